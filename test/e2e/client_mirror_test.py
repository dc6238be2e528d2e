"""The client library's Informer keeps a mirror equal to the server through what a long-running
controller meets: 10,000 mixed writes (creates, updates, deletes) from four writers, during which
the client's connection is cut in the middle of a chunk, the server restarts on the same data,
and a reconnect meets a corrupted stream (an invalid JSON event, then an unknown event type);
then a disconnection long enough for its version to leave the server's window (410: one
re-list), and a server that accepts the watch and never answers (the client's deadline ends the
wait). After each, the mirror must equal the server's state, object by object and version by
version, and so must the view built from the handler's notifications alone, which came in order;
a second, slow handler (2 ms per change, a queue of 64) does not hold the first up and converges
as well. All of it twice: with streaming lists (sendInitialEvents) and watches over WebSocket, and with
paged lists and chunked watches.

The client speaks to the server through a proxy in this test that can cut, corrupt, refuse or
swallow its connections.

Usage: client_mirror_test.py <path to kwatch-apiserver> <path to kwatch-mirror-probe>
"""
import http.client
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time

from harness import Checks, Server, TempDir, storage_backend, wait_for

NS = "mirror"
CMS = f"/api/v1/namespaces/{NS}/configmaps"
NAMES = [f"cm-{i}" for i in range(300)]


class Proxy:
    """TCP proxy in front of the server. Per accepted connection a thread per direction. The
    next connection may be answered with canned bytes (`corrupt_next`), or read and never
    answered (`swallow`); new connections may be refused (`refusing`); `cut_watches` sends half of
    the next piece the server sends on each open watch, then closes it."""

    def __init__(self, upstream_port):
        self.upstream = upstream_port
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.conns = []
        self.canned = []    # responses for the next connections, in turn
        self.swallow = 0    # connections to read and never answer
        self.refusing = False
        self.swallowed = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                if self.refusing:
                    client.close()
                    continue
                if self.canned:
                    response = self.canned.pop(0)
                    threading.Thread(target=self._answer, args=(client, response), daemon=True).start()
                    continue
                if self.swallow:
                    self.swallow -= 1
                    self.swallowed.append(client)
                    continue
            try:
                server = socket.create_connection(("127.0.0.1", self.upstream), timeout=5)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            pair = {"client": client, "server": server, "closed": False, "watch": False,
                    "cut": False}
            with self.lock:
                self.conns.append(pair)
            threading.Thread(target=self._pump, args=(pair, client, server, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(pair, server, client, True), daemon=True).start()

    @staticmethod
    def _answer(client, response):
        try:
            client.settimeout(5)
            client.recv(65536)  # the request
            client.sendall(response)
        except OSError:
            pass
        finally:
            client.close()

    def _pump(self, pair, src, dst, downstream):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if not downstream and b"watch=" in data.split(b"\r\n", 1)[0]:
                    pair["watch"] = True
                if downstream and pair["cut"] and len(data) > 1:
                    dst.sendall(data[:len(data) // 2])
                    break
                dst.sendall(data)
        except OSError:
            pass
        self._close(pair)

    def _close(self, pair):
        with self.lock:
            if pair["closed"]:
                return
            pair["closed"] = True
            if pair in self.conns:
                self.conns.remove(pair)
        for s in (pair["client"], pair["server"]):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def cut_watches(self):
        """Marks the open watches to be cut in their next piece; returns them."""
        with self.lock:
            pairs = [p for p in self.conns if p["watch"]]
        for p in pairs:
            p["cut"] = True
        return pairs

    def close_all(self):
        with self.lock:
            pairs = list(self.conns)
        for p in pairs:
            self._close(p)

    def open_connections(self):
        with self.lock:
            return len(self.conns)


def watch_response(*events):
    """A 200 watch response whose chunked body carries these raw event lines."""
    body = b"".join(b"%x\r\n%s\r\n" % (len(e) + 1, e + b"\n") for e in events)
    return (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            + body)


class Writer:
    """Mixed writes through keep-alive connections; the ones the server acknowledged count."""

    def __init__(self, port_of):
        self.port_of = port_of
        self.conn = None

    def request(self, method, path, body=None):
        for attempt in range(200):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection("127.0.0.1", self.port_of(), timeout=10)
                data = json.dumps(body).encode() if body is not None else None
                self.conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
                r = self.conn.getresponse()
                r.read()
                if r.status in (500, 503, 429):
                    raise OSError(f"status {r.status}")
                return r.status
            except (OSError, http.client.HTTPException):
                if self.conn is not None:
                    self.conn.close()
                self.conn = None
                time.sleep(min(0.02 * (attempt + 1), 0.2))
        raise AssertionError(f"{method} {path} failed 200 times")

    def mixed(self, n, seed, progress):
        rnd = random.Random(seed)
        for i in range(n):
            name = rnd.choice(NAMES)
            op = rnd.random()
            cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                  "data": {"i": str(i), "w": str(seed)}}
            if op < 0.45:
                if self.request("PUT", f"{CMS}/{name}", cm) == 404:
                    self.request("POST", CMS, cm)
            elif op < 0.8:
                self.request("POST", CMS, cm)  # 409 when it exists: a write that changed nothing
            else:
                self.request("DELETE", f"{CMS}/{name}")
            progress[seed] = i + 1


def server_state(port):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", CMS)
    items = json.loads(conn.getresponse().read())["items"]
    conn.close()
    return {f"{NS}/{o['metadata']['name']}": o["metadata"]["resourceVersion"] for o in items}


class Probe:
    def __init__(self, binary, kubeconfig, timeout_ms, mode, transport):
        self.proc = subprocess.Popen([binary, kubeconfig, CMS, str(timeout_ms), mode, transport],
                                     stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)

    def dump(self):
        self.proc.stdin.write("dump\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"the probe ended: {self.proc.stderr.read()[-1000:]}")
        return json.loads(line)

    def stop(self):
        try:
            self.proc.stdin.close()
            return self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            return -9


def main():
    binary, probe_binary = sys.argv[1], sys.argv[2]
    checks = Checks()
    for mode, transport in (("stream", "websocket"), ("list", "chunked")):
        scenario(binary, probe_binary, mode, transport, checks)
    checks.finish()


def scenario(binary, probe_binary, mode, transport, plain_checks):
    class Prefixed:
        @staticmethod
        def check(name, condition, detail=""):
            plain_checks.check(f"[{mode}, {transport}] {name}", condition, detail)
    checks = Prefixed()
    with TempDir() as tmp:
        data = os.path.join(tmp, "data")
        # A small event window, so that a short disconnection can outlive a version.
        server = Server(binary, data_dir=data,
                        extra_args=["--watch-cache-sizes=configmaps#200"]).start()
        port = server.port
        proxy = Proxy(port)
        try:
            server.create_namespace(NS)
            with open(os.path.join(tmp, "kubeconfig"), "w") as f:
                f.write(f"apiVersion: v1\nkind: Config\nclusters:\n- name: p\n  cluster:\n"
                        f"    server: http://127.0.0.1:{proxy.port}\ncontexts:\n- name: p\n"
                        f"  context: {{cluster: p, user: u}}\ncurrent-context: p\nusers:\n"
                        f"- name: u\n  user: {{}}\n")
            seed = Writer(lambda: port)
            for name in NAMES[:100]:
                seed.request("POST", CMS, {"metadata": {"name": name}, "data": {"i": "seed"}})
            probe = Probe(probe_binary, os.path.join(tmp, "kubeconfig"), 2000, mode, transport)

            def converged(what, timeout=60):
                want = server_state(port)
                last = {}

                def same():
                    last.update(probe.dump())
                    return last["synced"] and last["store"] == want and last["handler"] == want
                try:
                    wait_for(same, timeout=timeout, what=what)
                except AssertionError:
                    pass
                ok = last.get("store") == want and last.get("handler") == want
                diff = sorted(set(want.items()) ^ set((last.get("store") or {}).items()))[:6]
                checks.check(what, ok, f"{len(want)} objects; first differences: {diff}")
                return last

            first = converged("the first list: the mirror equals the server")
            checks.check("the first list was streamed" if mode == "stream" else "the first list was paged",
                         first.get("streaming_lists") == (1 if mode == "stream" else 0),
                         first.get("streaming_lists"))

            # 10,000 mixed writes from 4 writers; meanwhile: a cut mid-chunk, a restart, a
            # corrupted stream.
            progress = {}
            writers = [Writer(lambda: port) for _ in range(4)]
            threads = [threading.Thread(target=w.mixed, args=(2500, s, progress), daemon=True)
                       for s, w in enumerate(writers)]
            for t in threads:
                t.start()
            done = lambda: sum(progress.values())  # noqa: E731
            wait_for(lambda: done() >= 2000, timeout=120, what="2,000 writes")
            cut = proxy.cut_watches()
            checks.check("a watch was open to cut", len(cut) == 1, len(cut))
            wait_for(lambda: all(p["closed"] for p in cut), timeout=10, what="the cut")
            wait_for(lambda: done() >= 4000, timeout=120, what="4,000 writes")
            server.stop()
            restarted = Server(binary, data_dir=data,
                               extra_args=["--watch-cache-sizes=configmaps#200", f"--port={port}"])
            restarted.start()
            server = restarted
            wait_for(lambda: done() >= 7000, timeout=120, what="7,000 writes")
            proxy.canned += [watch_response(b'{"type":"MODIFIED","object":{"metadata":'),
                             watch_response(b'{"type":"RENAMED","object":{"metadata":{}}}')]
            # Until both are used: a watch may first go out on a kept connection.
            wait_for(lambda: (proxy.close_all(), not proxy.canned)[1], timeout=30,
                     what="the corrupted answers to be used")
            for t in threads:
                t.join(timeout=180)
            checks.check("10,000 writes were acknowledged", done() == 10000, done())
            checks.check("the proxy's corrupted answers were used", not proxy.canned, len(proxy.canned))
            after = converged("after 10,000 writes, a cut mid-chunk, a restart and corrupted "
                              "streams: the mirror equals the server")
            checks.check("the handler's notifications came in order", after.get("out_of_order") == 0,
                         after.get("out_of_order"))
            checks.check("a slow handler (2 ms per change, a queue of 64) fell behind meanwhile",
                         after.get("slow_overflows", 0) > 0, after.get("slow_overflows"))
            want = server_state(port)
            slow = {}
            try:
                wait_for(lambda: slow.update(probe.dump()) or slow["slow_handler"] == want,
                         timeout=60, what="the slow handler")
            except AssertionError:
                pass
            checks.check("the slow handler converges too (the latest change per object)",
                         slow.get("slow_handler") == want and slow.get("slow_backlog") == 0,
                         (len(slow.get("slow_handler") or {}), len(want), slow.get("slow_backlog")))
            checks.check("the failures were noticed and retried (cut, restart, bad JSON, bad type)",
                         after.get("failures", 0) >= 3, after.get("failures"))

            # Away for longer than the window: the resumed watch gets 410, one re-list.
            lists = after["lists"]
            proxy.refusing = True
            proxy.close_all()
            w = Writer(lambda: port)
            for i in range(400):
                w.request("PUT", f"{CMS}/{NAMES[i % 50]}",
                          {"metadata": {"name": NAMES[i % 50]}, "data": {"away": str(i)}})
            w.request("DELETE", f"{CMS}/{NAMES[60]}")
            proxy.refusing = False
            relisted = converged("after a disconnection longer than the window: the mirror "
                                 "equals the server")
            checks.check("the version that left the window cost one re-list",
                         relisted.get("lists") == lists + 1, (lists, relisted.get("lists")))
            checks.check("re-list: notifications still in order", relisted.get("out_of_order") == 0,
                         relisted.get("out_of_order"))

            # A server that takes the request and never answers: the 2 s deadline ends the wait.
            # Until it is used: a connection the client was opening as the others were closed
            # reaches the server and may carry the next watch.
            proxy.swallow = 1
            wait_for(lambda: (proxy.close_all(), proxy.swallow == 0)[1], timeout=30,
                     what="the swallowing connection to be used")
            w.request("PUT", f"{CMS}/{NAMES[0]}", {"metadata": {"name": NAMES[0]}, "data": {"late": "1"}})
            converged("after a server that never answered: the mirror equals the server", timeout=30)
            checks.check("the swallowed connection was used", len(proxy.swallowed) == 1,
                         len(proxy.swallowed))

            code = probe.stop()
            checks.check("the informer stops cleanly", code == 0,
                         (code, probe.proc.stderr.read()[-500:] if probe.proc.stderr else ""))
            checks.check("server alive", server.alive())
            if mode == "stream":
                checks.check("every list was a streaming list",
                             relisted.get("streaming_lists") == relisted.get("lists"),
                             (relisted.get("streaming_lists"), relisted.get("lists")))
        finally:
            server.stop()


if __name__ == "__main__":
    main()
