"""Graceful shutdown, as a rolling update or a load balancer sees it: after SIGTERM /readyz fails
at once while requests are still served for --shutdown-delay-duration; then no new connection is
accepted, idle keep-alive connections are closed, a new watch is refused with 429, every one of
1,000 chunked watch streams (and the WebSocket ones) ends cleanly with events in order, and the
process exits 0 within --shutdown-grace-period. A second signal exits at once. What was written
is there after a restart on the same data directory.

Usage: shutdown_test.py <path to kwatch-apiserver>
"""
import os
import re
import resource
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time

from harness import Checks, Server, TempDir, WebSocketWatch, configmap, storage_backend, wait_for

WATCHERS = 1000
CMS = "/api/v1/namespaces/default/configmaps"
RV = re.compile(rb'"resourceVersion":"(\d+)"')


class ManyWatches:
    """WATCHERS chunked watches read by one thread: per stream the resourceVersions of its events,
    whether the terminal chunk came before the connection closed, and any decoding problem."""

    def __init__(self, port, n, path, group=200):
        """Opens the watches `group` at a time, each group once the previous one's heads came: a
        client that opens a thousand at once meets --max-requests-inflight (watches count while
        they are set up), which is not what this suite is about."""
        self.streams = []
        self.sel = selectors.DefaultSelector()
        self.lock = threading.Lock()
        self.added = []  # registered by the reading thread
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        for first in range(0, n, group):
            for _ in range(min(group, n - first)):
                s = socket.create_connection(("127.0.0.1", port), timeout=10)
                s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json\r\n\r\n"
                          .encode())
                s.setblocking(False)
                st = {"sock": s, "buf": bytearray(), "head": None, "rvs": [], "terminal": False,
                      "eof": False, "error": None, "body": bytearray()}
                with self.lock:
                    self.streams.append(st)
                    self.added.append(st)
            wait_for(lambda: self.established() == len(self.streams), timeout=30,
                     what=f"the heads of {len(self.streams)} watches")

    def _run(self):
        while not self.stop:
            with self.lock:
                added, self.added = self.added, []
            for st in added:
                self.sel.register(st["sock"], selectors.EVENT_READ, st)
            if not self.sel.get_map():
                time.sleep(0.01)
                continue
            for key, _ in self.sel.select(timeout=0.05):
                st = key.data
                try:
                    data = st["sock"].recv(1 << 16)
                except BlockingIOError:
                    continue
                except OSError as e:
                    st["error"] = f"the connection failed: {e}"
                    data = b""
                with self.lock:
                    if not data:
                        st["eof"] = True
                        self.sel.unregister(st["sock"])
                        st["sock"].close()
                        continue
                    st["buf"] += data
                    self._decode(st)

    @staticmethod
    def _decode(st):
        buf = st["buf"]
        if st["head"] is None:
            i = buf.find(b"\r\n\r\n")
            if i < 0:
                return
            st["head"] = bytes(buf[:i])
            del buf[:i + 4]
        while not st["terminal"]:
            i = buf.find(b"\r\n")
            if i < 0:
                return
            size = int(buf[:i], 16)
            if len(buf) < i + 2 + size + 2:
                return
            chunk = bytes(buf[i + 2:i + 2 + size])
            del buf[:i + 2 + size + 2]
            if size == 0:
                st["terminal"] = True
                return
            st["body"] += chunk
            while True:
                j = st["body"].find(b"\n")
                if j < 0:
                    break
                line = bytes(st["body"][:j])
                del st["body"][:j + 1]
                m = RV.search(line)
                if m is None:
                    st["error"] = f"an event without a resourceVersion: {line[:120]!r}"
                else:
                    st["rvs"].append(int(m.group(1)))

    def established(self):
        with self.lock:
            return sum(1 for st in self.streams if st["head"] is not None)

    def ended(self):
        with self.lock:
            return sum(1 for st in self.streams if st["eof"])

    def close(self):
        self.stop = True
        self.thread.join(timeout=5)
        for st in self.streams:
            if not st["eof"]:
                st["sock"].close()


def raise_fd_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def connect_refused(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return False
    except OSError:
        return True


def graceful(checks, binary, tmp):
    data = os.path.join(tmp, "data")
    extra = ["--shutdown-delay-duration=2s", "--shutdown-grace-period=20s", "--data-dir-fsync=false"]
    if storage_backend() != "etcd3":
        extra.append(f"--data-dir={data}")
    server = Server(binary, extra_args=extra, max_open_files=4096).start()
    port = server.port
    try:
        status, _ = server.request("POST", CMS, body=configmap("seed"))
        checks.check("a configmap is created", status == 201)
        watches = ManyWatches(port, WATCHERS, f"{CMS}?watch=1")
        # The whole head and what came of the body, to tell which limit refused it.
        refused = [bytes(st["head"][:400]) + bytes(st["body"][:300]) for st in watches.streams
                   if not st["head"].startswith(b"HTTP/1.1 200")]
        why = "" if not refused else "; " + ", ".join(
            f"{labels.get('flow_schema')}/{labels.get('reason')}: {int(v)}"
            for name, labels, v in server.metrics()
            if name == "apiserver_flowcontrol_rejected_requests_total")
        checks.check(f"all {WATCHERS} watches are accepted", not refused,
                     f"{len(refused)} refused{why}, first: {refused[:1]}")
        ws = [WebSocketWatch(server, f"{CMS}?watch=1") for _ in range(5)]
        checks.check("5 WebSocket watches open", all(w.status == 101 for w in ws))
        # Never read again: it will not answer the server's close frame.
        silent = WebSocketWatch(server, f"{CMS}?watch=1")
        # Writes go on until the server stops taking them.
        acked = []
        writer_stop = threading.Event()

        def write():
            i = 0
            while not writer_stop.is_set():
                try:
                    status, body = server.request("PUT", f"{CMS}/seed",
                                                  body=configmap("seed", data={"i": str(i)}))
                except OSError:
                    break
                if status != 200:
                    break
                acked.append(int(body["metadata"]["resourceVersion"]))
                i += 1
                time.sleep(0.01)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        wait_for(lambda: len(acked) >= 20, what="20 writes")
        # Idle keep-alive connection: answered once, then waiting for its next request.
        idle = socket.create_connection(("127.0.0.1", port), timeout=10)
        idle.sendall(b"GET /version HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        first = idle.recv(65536)
        checks.check("a keep-alive connection is answered", first.startswith(b"HTTP/1.1 200"))

        signalled = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        wait_for(lambda: server.request("GET", "/readyz")[0] == 500, timeout=2,
                 what="/readyz to fail")
        status, body = server.request("GET", "/readyz")
        checks.check("during the delay /readyz fails at once, naming the shutdown",
                     status == 500 and "shutdown" in str(body) and time.monotonic() - signalled < 1.5,
                     (status, body))
        status, _ = server.request("GET", CMS)
        checks.check("during the delay requests are still served", status == 200)
        late = WebSocketWatch(server, f"{CMS}?watch=1")
        checks.check("during the delay a new watch is still accepted", late.status == 101)
        writes_during_delay = len(acked)

        wait_for(lambda: connect_refused(port), timeout=5, what="the listener to close")
        after_delay = time.monotonic() - signalled
        checks.check("after the delay no new connection is accepted",
                     1.8 <= after_delay < 5, f"{after_delay:.2f}s")
        idle.settimeout(5)
        try:
            rest = idle.recv(65536)
        except OSError:
            rest = b""
        checks.check("an idle keep-alive connection is closed by the server", rest == b"")
        idle.close()

        exited = wait_for(lambda: server.proc.poll() is not None, timeout=20,
                          what="the process to exit")
        took = time.monotonic() - signalled
        checks.check("the process exits 0 within the grace period",
                     exited and server.proc.returncode == 0 and took < 20,
                     f"code {server.proc.returncode} after {took:.2f}s")
        # The delay (2 s), then at most 5 s for the silent client's close handshake.
        checks.check("a WebSocket client that never answers the close frame holds the exit 5 s at most",
                     took < 2 + 5 + 2, f"{took:.2f}s")
        silent.close()
        wait_for(lambda: watches.ended() == WATCHERS, timeout=10, what="every watch stream to end")
        writer_stop.set()
        writer.join(timeout=10)
        checks.check("writes went on through the delay", len(acked) > writes_during_delay,
                     (writes_during_delay, len(acked)))
        clean = sum(1 for st in watches.streams if st["terminal"] and st["error"] is None)
        errors = [st["error"] for st in watches.streams if st["error"] is not None]
        unterminated = sum(1 for st in watches.streams if not st["terminal"])
        checks.check(f"all {WATCHERS} chunked watch streams ended with the terminal chunk",
                     clean == WATCHERS,
                     f"{clean} of {WATCHERS}; {unterminated} without it; {len(errors)} with a "
                     f"decoding problem, first: {errors[:1]}")
        ordered = sum(1 for st in watches.streams
                      if all(a < b for a, b in zip(st["rvs"], st["rvs"][1:])))
        checks.check("every stream's events are in resourceVersion order, none twice",
                     ordered == WATCHERS, f"{ordered} of {WATCHERS}")
        last = max(acked)
        # A stream may end before the last write's event reached it: its client re-watches from
        # its last resourceVersion. What it did get is a prefix of what was written.
        first_acked = min(acked)
        prefixes = sum(1 for st in watches.streams
                       if [rv for rv in st["rvs"] if rv >= first_acked] ==
                       [rv for rv in acked if first_acked <= rv <= (st["rvs"][-1] if st["rvs"] else 0)])
        checks.check("each stream got every acknowledged write up to its last event",
                     prefixes == WATCHERS, f"{prefixes} of {WATCHERS}")
        most = max(len(st["rvs"]) for st in watches.streams)
        checks.check("the streams carried the writes (not an empty stream ended at once)",
                     most >= 20, most)
        for w in ws + [late]:
            deadline = time.monotonic() + 5
            while not w.ended and time.monotonic() < deadline:
                w.next_event(timeout=0.5)
        checks.check("every WebSocket watch ended with a normal close frame (1000)",
                     all(w.close_code == 1000 for w in ws + [late]),
                     [w.close_code for w in ws + [late]])
        for w in ws + [late]:
            w.close()
        watches.close()
        log = server.read_log()
        checks.check("the log tells the shutdown's steps",
                     "shutting down" in log and "every request answered" in log)
        server.proc = None  # exited by itself
        server.log.close()
    finally:
        server.stop()

    if storage_backend() != "etcd3":
        again = Server(binary, data_dir=data).start()
        try:
            status, body = again.request("GET", f"{CMS}/seed")
            checks.check("after a restart on the same data directory the last write is there",
                         status == 200 and int(body["metadata"]["resourceVersion"]) == last,
                         (status, body.get("metadata") if isinstance(body, dict) else body, last))
        finally:
            again.stop()


def refused_watch(checks, binary):
    """A watch asked on a connection that was open before the drain gets 429 with Retry-After."""
    server = Server(binary, extra_args=["--shutdown-delay-duration=1s"]).start()
    try:
        conn = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        conn.sendall(b"GET /version HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        conn.recv(65536)
        # Half a request before the signal: the connection is no longer idle, so the drain lets
        # it finish; the rest arrives after the listener closed.
        conn.sendall(b"GET /api/v1/namespaces/default/configmaps?watch=1 HTTP/1.1\r\n")
        server.proc.send_signal(signal.SIGTERM)
        wait_for(lambda: connect_refused(server.port), timeout=5, what="the listener to close")
        conn.sendall(b"Host: 127.0.0.1\r\n\r\n")
        conn.settimeout(5)
        answer = b""
        try:
            while True:
                got = conn.recv(65536)
                if not got:
                    break
                answer += got
        except OSError:
            pass
        text = answer.decode("latin-1")
        checks.check("a watch asked after the drain began is 429 with Retry-After, connection closed",
                     text.startswith("HTTP/1.1 429") and "Retry-After: 1" in text
                     and "Connection: close" in text and "shutting down" in text, text[:300])
        conn.close()
        wait_for(lambda: server.proc.poll() is not None, timeout=10, what="exit")
        checks.check("and the process exits 0", server.proc.returncode == 0, server.proc.returncode)
        server.proc = None
        server.log.close()
    finally:
        server.stop()


def second_signal(checks, binary):
    server = Server(binary, extra_args=["--shutdown-delay-duration=30s",
                                        "--shutdown-grace-period=60s"]).start()
    try:
        server.proc.send_signal(signal.SIGTERM)
        wait_for(lambda: server.request("GET", "/readyz")[0] == 500, timeout=5, what="shutting down")
        signalled = time.monotonic()
        server.proc.send_signal(signal.SIGINT)
        try:
            code = server.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        checks.check("a second signal exits at once with code 1",
                     code == 1 and time.monotonic() - signalled < 2, code)
        server.proc = None
        server.log.close()
    finally:
        server.stop()


def main():
    binary = sys.argv[1]
    checks = Checks()
    if raise_fd_limit() < WATCHERS + 200:
        print("the open-file limit is too low for 1,000 watchers: skipping")
        sys.exit(77)
    with TempDir() as tmp:
        graceful(checks, binary, tmp)
        refused_watch(checks, binary)
        second_signal(checks, binary)
    checks.finish()


if __name__ == "__main__":
    main()
