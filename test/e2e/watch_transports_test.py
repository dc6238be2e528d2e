"""Watch transports: chunked HTTP and WebSocket, and a client that stops reading.

- a WebSocket watcher and a chunked watcher on the same URL get identical event sequences;
- the WebSocket watcher ignores the frames a client sends; a refused WebSocket watch gets the
  HTTP error; timeoutSeconds closes a WebSocket watch;
- a stalled client (tiny SO_RCVBUF, not reading) watching while 256 objects of 64 KiB are written
  is parked (kwatch_watchers_parked_total grows), not ended, while 50 fast watchers get every
  event, each write reaching all of them within a deadline; once it reads it gets every event in
  order, then the next write live;
- with the window fixed at 64 events (--watch-cache-sizes), a stalled client whose next event
  leaves the window is ended (connection closed, no ERROR event,
  kwatch_watchers_terminated_total{reason="slow"} grows); re-watching from its last version is
  410, so its client re-lists.

Usage: watch_transports_test.py <path to kwatch-apiserver>
"""
import sys
import time

from harness import (delete_and_observe, Checks, Server, WatchStream, WebSocketWatch, configmap, rv_of, summarize)

MERGE = {"Content-Type": "application/merge-patch+json"}
FAST = 50
BIG = 256
BLOB = 64 * 1024
LAG = 4             # the writer keeps every fast watcher within LAG events of the newest write
EVENT_DEADLINE = 5  # seconds for one write to reach every fast watcher


def wait(condition, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not condition():
        time.sleep(0.01)
    return condition()


class Suite:
    def __init__(self, server, checks):
        self.server = server
        self.t = checks
        self.closers = []

    def track(self, s):
        self.closers.append(s)
        return s

    def close_all(self):
        for s in self.closers:
            s.close()
        self.closers = []

    def write(self, method, path, body=None, headers=None):
        if method == "DELETE":  # the object as its DELETED event carries it
            status, obj = delete_and_observe(self.server.port, path)
        else:
            status, obj = self.server.request(method, path, body=body, headers=headers)
        if status not in (200, 201):
            raise AssertionError(f"{method} {path}: {status} {obj!r}"[:600])
        return obj

    # ------------------------------------------------------------------------------------------
    def websocket_vs_chunked(self):
        t = self.t
        ns = "wt"
        self.server.create_namespace(ns)
        cms = f"/api/v1/namespaces/{ns}/configmaps"
        start = self.server.list_rv(cms)
        path = f"{cms}?watch=true&resourceVersion={start}"
        watchers0 = self.server.metric("kwatch_watchers", resource="configmaps")
        ws = self.track(WebSocketWatch(self.server, path))
        ch = self.track(WatchStream(self.server, path))
        t.check("WebSocket watch: handshake accepted (101)", ws.status == 101,
                f"status={ws.status} {ws.error}")
        t.check("chunked watch on the same URL: 200 chunked", ch.status == 200 and ch.chunked,
                f"status={ch.status} body={ch.body!r}"[:300])

        log = []
        for i in range(20):
            log.append(("ADDED", f"cm-{i:02d}", self.write("POST", cms, configmap(f"cm-{i:02d}",
                                                                                   {"i": str(i)}))))
        for i in range(20):
            log.append(("MODIFIED", f"cm-{i:02d}", self.write(
                "PATCH", f"{cms}/cm-{i:02d}", '{"data":{"u":"1"}}', MERGE)))
        for i in range(0, 20, 2):
            log.append(("DELETED", f"cm-{i:02d}", self.write("DELETE", f"{cms}/cm-{i:02d}")))
        want = [(k, f"{ns}/{n}", rv_of(o)) for k, n, o in log]

        got_ch = ch.take(len(want), timeout=10) if ch.status == 200 else []
        got_ws = ws.take(len(want), timeout=10) if ws.status == 101 else []
        t.check("chunked watcher: the writes' events (type, key, RV)",
                [summarize(e) for e in got_ch] == want,
                f"got {[summarize(e) for e in got_ch][:4]}.. ({len(got_ch)}) want {want[:4]}..")
        t.check("chunked watcher: objects are what the writes returned",
                [e.get("object") for e in got_ch] == [o for _, _, o in log], got_ch[:1])
        t.check("WebSocket watcher: the same sequence as the chunked one (whole events)",
                len(got_ws) == len(want) and got_ws == got_ch,
                f"ws {[summarize(e) for e in got_ws][:4]}.. ({len(got_ws)})")
        t.check("WebSocket watcher: one text frame per event",
                len(ws.opcodes) == len(got_ws) > 0 and set(ws.opcodes) <= {1}, set(ws.opcodes))

        # client frames are ignored: text, binary, ping, something that looks like a request
        sent = True
        if ws.status == 101:
            try:
                ws.ws.send("hello")
                ws.ws.send('{"type":"ADDED","object":{}}')
                ws.ws.send_binary(b"\x00\xff\x10garbage")
                ws.ws.ping("are you there")
            except Exception as e:  # noqa: BLE001 - reported as a check
                sent = repr(e)
        t.check("WebSocket watcher: the client could send text, binary and ping frames",
                sent is True and ws.status == 101, sent)
        after = self.write("PATCH", f"{cms}/cm-01", '{"data":{"after":"frames"}}', MERGE)
        got = ws.take(1, timeout=5) if ws.status == 101 else []
        t.check("WebSocket watcher: after client frames, the next event is still the next change",
                [summarize(e) for e in got] == [("MODIFIED", f"{ns}/cm-01", rv_of(after))]
                and got[0].get("object") == after and not ws.ended,
                f"{[summarize(e) for e in got]} ended={ws.ended}")
        extra = ch.take(1, timeout=5)
        t.check("chunked watcher: the same change",
                [summarize(e) for e in extra] == [("MODIFIED", f"{ns}/cm-01", rv_of(after))], extra)
        for name, s in (("WebSocket", ws), ("chunked", ch)):
            e = s.next_event(0.3)
            t.check(f"{name} watcher: nothing more", e is None and not s.ended,
                    f"{summarize(e) if e else None} ended={s.ended}")
        self.close_all()

        # RV unset over WebSocket: the current state first
        state = sorted((f"{ns}/{n}", rv_of(o)) for k, n, o in log
                       if k == "MODIFIED" and int(n[3:]) % 2 == 1 and n != "cm-01")
        state = sorted(state + [(f"{ns}/cm-01", rv_of(after))])
        ws2 = self.track(WebSocketWatch(self.server, f"{cms}?watch=true"))
        init = ws2.take(len(state), timeout=5) if ws2.status == 101 else []
        t.check("WebSocket watch without RV: the current state as ADDED events",
                sorted((summarize(e)[1], summarize(e)[2]) for e in init) == state
                and all(e.get("type") == "ADDED" for e in init),
                f"status={ws2.status} {[summarize(e) for e in init][:3]}")
        self.close_all()

        # a refused WebSocket watch gets the HTTP error; timeoutSeconds closes the socket
        bad = self.track(WebSocketWatch(self.server, f"{cms}?watch=true&labelSelector=a%20in%20%28"))
        t.check("WebSocket watch with a bad selector: handshake refused with 400",
                bad.status == 400, f"status={bad.status} {bad.error}")
        t0 = time.monotonic()
        short = self.track(WebSocketWatch(self.server, f"{cms}?watch=true&timeoutSeconds=2"
                                                       f"&resourceVersion={rv_of(after)}"))
        events = []
        while short.status == 101 and not short.ended and time.monotonic() - t0 < 8:
            e = short.next_event(8 - (time.monotonic() - t0))
            if e is not None:
                events.append(e)
        took = time.monotonic() - t0
        t.check("WebSocket watch with timeoutSeconds=2: no events, closed at about 2 s (1.5-5 s)",
                short.status == 101 and short.ended and not events and 1.5 <= took <= 5,
                f"status={short.status} ended={short.ended} events={events[:2]} took={took:.2f}s")
        self.close_all()
        # closed by the client (close frame, TCP close) or ended at the deadline: no longer watchers
        gone = wait(lambda: self.server.metric("kwatch_watchers", resource="configmaps")
                    == watchers0, 5)
        t.check("kwatch_watchers is back to where it was once these watches are closed or ended",
                watchers0 is not None and gone,
                f"{watchers0} -> {self.server.metric('kwatch_watchers', resource='configmaps')}")

    # ------------------------------------------------------------------------------------------
    def stalled_client(self):
        """A client that stops reading is parked, not cut off, and resumes with every event."""
        t = self.t
        ns = "wt-big"
        self.server.create_namespace(ns)
        cms = f"/api/v1/namespaces/{ns}/configmaps"
        start = self.server.list_rv(cms)
        path = f"{cms}?watch=true&resourceVersion={start}"
        watchers0 = self.server.metric("kwatch_watchers", resource="configmaps") or 0
        ended0 = self.server.metric("kwatch_watchers_terminated_total", resource="configmaps",
                                    reason="slow") or 0
        parked0 = self.server.metric("kwatch_watchers_parked_total", resource="configmaps") or 0

        stalled = self.track(WatchStream(self.server, path, rcvbuf=4096, read_head=False))
        fast = [self.track(WatchStream(self.server, path, timeout=15)).start_background(summarize)
                for _ in range(FAST)]
        t.check(f"{FAST} fast watchers accepted", all(f.status == 200 and f.chunked for f in fast),
                [(f.status, f.body) for f in fast if f.status != 200][:1])
        # (at least: watchers closed earlier may linger in the metric, see the check above)
        counted = wait(lambda: (self.server.metric("kwatch_watchers", resource="configmaps") or 0)
                       >= watchers0 + FAST + 1, 5)
        t.check(f"kwatch_watchers counts the {FAST + 1} watchers", counted,
                f"{watchers0} -> {self.server.metric('kwatch_watchers', resource='configmaps')}")

        want = write_big(self.server, cms, "big", BIG, fast)
        t.check(f"all {BIG} large writes done, each reaching every fast watcher within "
                f"{EVENT_DEADLINE}s (with the stalled client connected)", len(want) == BIG,
                f"{len(want)} done")
        exact = [f for f in fast if f.events() == want]
        t.check(f"all {FAST} fast watchers got every event exactly, in order",
                len(exact) == FAST,
                f"{len(exact)} exact; counts {sorted(f.count for f in fast)[:5]}; ended early: "
                f"{sum(f.ended for f in fast)}")
        t.check("no fast watcher was ended", not any(f.ended for f in fast))
        parked = self.server.metric("kwatch_watchers_parked_total", resource="configmaps") or 0
        t.check("kwatch_watchers_parked_total grew: the stalled client was parked", parked > parked0,
                f"{parked0} -> {parked}")
        t.check("no watcher was ended: the stalled client's next event is still in the window",
                (self.server.metric("kwatch_watchers_terminated_total", resource="configmaps",
                                    reason="slow") or 0) == ended0)

        # it reads again: every event, in order, then the next write live
        stalled.sock.settimeout(10)
        stalled.read_head(10)
        stalled.start_background(summarize)
        wait(lambda: stalled.count >= BIG or stalled.ended, 30)
        t.check("stalled client: once it reads, it gets every event exactly, in order",
                stalled.status == 200 and stalled.events() == want and not stalled.ended,
                f"status={stalled.status} count={stalled.count} ended={stalled.ended}")
        code, obj = self.server.request("POST", cms, body=configmap("after-resume", {"k": "v"}))
        live = wait(lambda: stalled.count >= BIG + 1, EVENT_DEADLINE)
        t.check("stalled client: after catching up it gets the next write live",
                code == 201 and live and stalled.events()[-1] == ("ADDED", f"{ns}/after-resume",
                                                                  rv_of(obj)),
                f"code={code} count={stalled.count}")
        self.close_all()

    # ------------------------------------------------------------------------------------------
    def lapsed_client(self):
        """A parked client whose next event has left the window is ended; its client re-lists."""
        t = self.t
        window = 64
        server = Server(self.binary, extra_args=[f"--watch-cache-sizes=configmaps#{window}"]).start()
        try:
            ns = "wt-lapse"
            server.create_namespace(ns)
            cms = f"/api/v1/namespaces/{ns}/configmaps"
            start = server.list_rv(cms)
            path = f"{cms}?watch=true&resourceVersion={start}"
            stalled = WatchStream(server, path, rcvbuf=4096, read_head=False)
            fast = [WatchStream(server, path, timeout=15).start_background(summarize)
                    for _ in range(4)]
            wait(lambda: (server.metric("kwatch_watchers", resource="configmaps") or 0) >= 5, 5)
            n = 320
            want = write_big(server, cms, "lapse", n, fast)
            t.check(f"window of {window}: {n} large writes reached the fast watchers",
                    len(want) == n and all(f.events() == want for f in fast),
                    f"{len(want)} done; counts {sorted(f.count for f in fast)}")
            ended = wait(lambda: (server.metric("kwatch_watchers_terminated_total",
                                                resource="configmaps", reason="slow") or 0) >= 1, 10)
            t.check("window of 64: the stalled client was ended once its next event left the "
                    "window (kwatch_watchers_terminated_total grew)", ended)
            t.check("kwatch_watchers no longer counts it",
                    wait(lambda: server.metric("kwatch_watchers", resource="configmaps") == 4, 10),
                    server.metric("kwatch_watchers", resource="configmaps"))
            # what it reads: a strict prefix of the events, no ERROR, then the end of the stream
            stalled.sock.settimeout(10)
            stalled.read_head(10)
            got = stalled.read_to_end(timeout=15) if stalled.status == 200 else []
            t.check("lapsed client: the server closed its stream", stalled.status == 200
                    and stalled.ended, f"status={stalled.status} ended={stalled.ended}")
            t.check("lapsed client: what it got is a strict prefix of the events, with no ERROR",
                    [summarize(e) for e in got] == want[:len(got)] and len(got) < n,
                    f"{len(got)} events; types {sorted({e.get('type') for e in got})}")
            # re-watching from the last version it saw is 410 Gone: the client re-lists
            last = got[-1]["object"]["metadata"]["resourceVersion"] if got else start
            again = WatchStream(server, f"{cms}?watch=true&resourceVersion={last}")
            first = again.next_event(10)
            t.check("lapsed client: watching on from its last version gets 410 Expired",
                    again.status == 200 and first is not None and first.get("type") == "ERROR"
                    and first["object"].get("code") == 410,
                    f"status={again.status} first={str(first)[:200]}")
            again.close()
            stalled.close()
            for f in fast:
                f.close()
            t.check("server with a fixed window is alive at the end", server.alive())
        finally:
            server.stop()


def write_big(server, cms, prefix, n, fast):
    """Creates n ConfigMaps of BLOB bytes, keeping every fast watcher within LAG events; returns
    the (type, ns/name, rv) of each write, stopping at the first a fast watcher did not get
    within EVENT_DEADLINE seconds."""
    ns = cms.split("/")[4]
    session = server.session()
    want = []
    try:
        for i in range(n):
            name = f"{prefix}-{i:03d}"
            blob = (f"{i:03d}" * (BLOB // 3 + 1))[:BLOB]
            code, obj = session.request("POST", cms, configmap(name, {"blob": blob}))
            if code != 201:
                raise AssertionError(f"create {name}: {code} {obj!r}"[:300])
            want.append(("ADDED", f"{ns}/{name}", rv_of(obj)))
            need = len(want) - LAG
            if need > 0 and not wait(lambda: all(f.count >= need or f.ended for f in fast),
                                     EVENT_DEADLINE):
                break
    finally:
        session.close()
    wait(lambda: all(f.count >= len(want) or f.ended for f in fast), EVENT_DEADLINE)
    return want


def main():
    binary = sys.argv[1]
    t = Checks()
    server = Server(binary).start()
    suite = Suite(server, t)
    suite.binary = binary
    try:
        for part in (suite.websocket_vs_chunked, suite.stalled_client,
                     suite.lapsed_client):
            try:
                part()
            except AssertionError as e:  # a failed write or request: report it, go on
                t.check(f"{part.__name__} ran to completion", False, str(e)[:600])
            finally:
                suite.close_all()
        t.check("server is alive at the end", server.alive())
    finally:
        suite.close_all()
        server.stop()
        if t.failed:
            print(server.read_log()[-2500:])
    t.finish()


if __name__ == "__main__":
    main()
