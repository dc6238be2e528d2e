"""Watch semantics: resourceVersion windows, selectors, bookmarks, timeouts and parameter errors.

Server A runs with --watch-cache-sizes=configmaps#100 (a fixed window of 100 events) and
--watch-bookmark-interval=1s (frequent periodic bookmarks); server B has the default bookmark
interval, so that the bookmark sent before a watch's deadline can be told from periodic ones.

Usage: watch_semantics_test.py <path to kwatch-apiserver>
"""
import sys
import time

from harness import (delete_and_observe, Checks, Server, WatchStream, configmap, rv_of, start_server, summarize)

NS = "ws"
CMS = f"/api/v1/namespaces/{NS}/configmaps"
MERGE = {"Content-Type": "application/merge-patch+json"}
WINDOW = 100


class Recorded(WatchStream):
    """A WatchStream that remembers every event it hands out (for the every-event-has-an-RV check)."""
    all_events = []

    def next_event(self, timeout=5.0):
        ev = super().next_event(timeout)
        if ev is not None:
            Recorded.all_events.append(ev)
        return ev


def timed(e):
    """keep() for background readers: the event with its arrival time."""
    return e, time.monotonic()


class Suite:
    def __init__(self, checks):
        self.t = checks
        self.streams = []
        self.server = None

    def watch(self, path, server=None, **kwargs):
        s = Recorded(server or self.server, path, **kwargs)
        self.streams.append(s)
        return s

    def close_all(self):
        for s in self.streams:
            s.close()
        self.streams = []

    def write(self, method, path, body=None, headers=None, server=None):
        if method == "DELETE":  # the object as its DELETED event carries it
            status, obj = delete_and_observe((server or self.server).port, path)
        else:
            status, obj = (server or self.server).request(method, path, body=body, headers=headers)
        if status not in (200, 201):
            raise AssertionError(f"{method} {path}: {status} {obj!r}"[:600])
        return obj

    def patch(self, name, patch):
        return self.write("PATCH", f"{CMS}/{name}", patch, MERGE)

    def stream_ok(self, name, s):
        ok = s.status == 200 and s.chunked
        self.t.check(f"{name}: accepted as a 200 chunked stream", ok,
                     f"status={s.status} body={s.body!r}"[:500])
        return ok

    def expect_events(self, name, s, want, timeout=5.0, skip_bookmarks=False):
        """want: [(type, ns/name, rv, object or None)]; checks the next len(want) events exactly."""
        got = s.take(len(want), timeout=timeout, skip_bookmarks=skip_bookmarks)
        self.t.check(f"{name}: events (type, key, RV)",
                     [summarize(e) for e in got] == [w[:3] for w in want],
                     f"got {[summarize(e) for e in got]} want {[w[:3] for w in want]}")
        objs = [(i, w[3]) for i, w in enumerate(want) if w[3] is not None]
        if objs:
            self.t.check(f"{name}: event objects",
                         all(i < len(got) and got[i].get("object") == o for i, o in objs),
                         [e.get("object") for e in got][:3])
        return got

    def nothing_more(self, name, s, timeout=0.4, skip_bookmarks=False):
        while True:
            extra = s.next_event(timeout)
            if not (skip_bookmarks and extra and extra.get("type") == "BOOKMARK"):
                break
        self.t.check(f"{name}: nothing more", s.status == 200 and extra is None,
                     summarize(extra) if extra else f"status {s.status}")

    # ------------------------------------------------------------------------------------------
    def too_old(self):
        t = self.t
        before = self.server.list_rv(CMS)
        session = self.server.session()
        rvs = [rv_of(session.request("POST", CMS, configmap("old-0", {"v": "0"}))[1])]
        for i in range(1, WINDOW + WINDOW // 2):
            code, obj = session.request("PATCH", f"{CMS}/old-0", f'{{"data":{{"v":"{i}"}}}}', MERGE)
            if code != 200:
                raise AssertionError(f"update {i} of old-0: {code} {obj!r}")
            rvs.append(rv_of(obj))
        session.close()

        s = self.watch(f"{CMS}?watch=true&resourceVersion={before}")
        events = s.read_to_end(timeout=5) if s.status == 200 else []
        t.check("too old RV: accepted as a stream (the error comes as an event)",
                s.status == 200 and s.chunked, f"status={s.status} body={s.body!r}"[:400])
        st = events[0].get("object", {}) if events else {}
        t.check("too old RV: exactly one event, ERROR, then the stream ends",
                [e.get("type") for e in events] == ["ERROR"] and s.ended,
                f"{[summarize(e) for e in events][:5]} ended={s.ended}")
        t.check("too old RV: the ERROR is a 410 Expired Status",
                st.get("kind") == "Status" and st.get("apiVersion") == "v1"
                and st.get("status") == "Failure" and st.get("code") == 410
                and st.get("reason") == "Expired"
                and str(st.get("message", "")).startswith("too old resource version"), st)

        mid = rvs[WINDOW - 1]
        s = self.watch(f"{CMS}?watch=true&resourceVersion={mid}")
        if self.stream_ok("RV inside the window", s):
            want = [("MODIFIED", f"{NS}/old-0", rv, None) for rv in rvs[WINDOW:]]
            got = self.expect_events(f"RV inside the window: the {len(want)} later events", s, want)
            t.check("RV inside the window: content of the last event",
                    len(got) == len(want)
                    and got[-1]["object"]["data"] == {"v": str(len(rvs) - 1)}, got[-1:])
            self.nothing_more("RV inside the window", s)
        self.close_all()

    def too_large(self):
        t = self.t
        current = self.server.list_rv(CMS)
        ahead = current + 1000
        t0 = time.monotonic()
        s = self.watch(f"{CMS}?watch=true&resourceVersion={ahead}", timeout=15)
        s.read_head(15)
        if s.status == 200:
            first = s.next_event(15)
            st = (first or {}).get("object", {}) if (first or {}).get("type") == "ERROR" else {}
        else:
            st = s.body if isinstance(s.body, dict) else {}
        took = time.monotonic() - t0
        details = st.get("details") or {}
        causes = details.get("causes") or [{}]
        t.check("RV ahead: 504 Timeout Status (response or first event)",
                (s.status == 504 or s.status == 200) and st.get("kind") == "Status"
                and st.get("code") == 504 and st.get("reason") == "Timeout", f"{s.status} {st}")
        t.check("RV ahead: cause ResourceVersionTooLarge, retryAfterSeconds 1",
                causes[0].get("reason") == "ResourceVersionTooLarge"
                and details.get("retryAfterSeconds") == 1, st)
        t.check("RV ahead: message names both RVs",
                str(st.get("message", "")).startswith(f"Too large resource version: {ahead}, "
                                                      "current: "), st.get("message"))
        t.check("RV ahead: answered after waiting about 3 s (>= 2.5 s, < 10 s)",
                2.5 <= took < 10, f"took {took:.2f}s")
        self.close_all()

    def label_selector(self):
        start = self.server.list_rv(CMS)
        paths = {"labelSelector app=web": f"{CMS}?watch=true&resourceVersion={start}"
                                          "&labelSelector=app%3Dweb",
                 "labelSelector app in (web)": f"{CMS}?watch=true&resourceVersion={start}"
                                               "&labelSelector=app%20in%20%28web%29"}
        streams = {name: self.watch(p) for name, p in paths.items()}
        want = []

        def ev(kind, name, obj, content=None):
            content = dict(content or obj)
            content["metadata"] = dict(content["metadata"],
                                       resourceVersion=obj["metadata"]["resourceVersion"])
            want.append((kind, f"{NS}/{name}", rv_of(obj), content))

        self.write("POST", CMS, configmap("lbl", {"v": "0"}))  # no label: no event
        a = self.patch("lbl", '{"metadata":{"labels":{"app":"web"}},"data":{"v":"1"}}')
        ev("ADDED", "lbl", a)
        m = self.patch("lbl", '{"data":{"v":"2"}}')
        ev("MODIFIED", "lbl", m)
        d = self.patch("lbl", '{"metadata":{"labels":{"app":"db"}},"data":{"v":"3"}}')
        ev("DELETED", "lbl", d, content=m)  # the previous content, with the RV of the change
        self.patch("lbl", '{"data":{"v":"4"}}')  # still not matching: no event
        b = self.patch("lbl", '{"metadata":{"labels":{"app":"web"}}}')
        ev("ADDED", "lbl", b)
        ev("DELETED", "lbl", self.write("DELETE", f"{CMS}/lbl"))
        c = self.write("POST", CMS, configmap("lbl2", {"v": "a"}, labels={"app": "web"}))
        ev("ADDED", "lbl2", c)
        r = self.patch("lbl2", '{"metadata":{"labels":null}}')
        ev("DELETED", "lbl2", r, content=c)
        self.write("DELETE", f"{CMS}/lbl2")  # not matching any more: no event

        for name, s in streams.items():
            if self.stream_ok(name, s):
                self.expect_events(f"{name}: ADDED when it starts matching, DELETED (previous "
                                   "content, RV of the change) when it stops", s, want)
                self.nothing_more(name, s)
        self.close_all()

    def field_selector(self):
        start = self.server.list_rv(CMS)
        eq = self.watch(f"{CMS}?watch=true&resourceVersion={start}&fieldSelector=metadata.name%3Dfs-a")
        ne = self.watch(f"{CMS}?watch=true&resourceVersion={start}"
                        "&fieldSelector=metadata.name%21%3Dfs-a")
        log = []
        for kind, name, method, path, body in [
                ("ADDED", "fs-a", "POST", CMS, configmap("fs-a")),
                ("ADDED", "fs-b", "POST", CMS, configmap("fs-b")),
                ("MODIFIED", "fs-b", "PATCH", f"{CMS}/fs-b", '{"data":{"v":"1"}}'),
                ("MODIFIED", "fs-a", "PATCH", f"{CMS}/fs-a", '{"data":{"v":"1"}}'),
                ("DELETED", "fs-a", "DELETE", f"{CMS}/fs-a", None),
                ("DELETED", "fs-b", "DELETE", f"{CMS}/fs-b", None)]:
            obj = self.write(method, path, body, MERGE if method == "PATCH" else None)
            log.append((kind, f"{NS}/{name}", rv_of(obj), obj))
        for name, s, want in [("fieldSelector metadata.name=fs-a", eq,
                               [e for e in log if e[1] == f"{NS}/fs-a"]),
                              ("fieldSelector metadata.name!=fs-a", ne,
                               [e for e in log if e[1] != f"{NS}/fs-a"])]:
            if self.stream_ok(name, s):
                self.expect_events(name, s, want)
                self.nothing_more(name, s)
        self.close_all()

    def periodic_bookmarks(self):
        t = self.t
        start = self.server.list_rv(CMS)
        wb = self.watch(f"{CMS}?watch=true&resourceVersion={start}&allowWatchBookmarks=true")
        wn = self.watch(f"{CMS}?watch=true&resourceVersion={start}")
        if not (self.stream_ok("bookmarks allowed", wb) & self.stream_ok("bookmarks not asked", wn)):
            self.close_all()
            return
        got = []
        t0 = time.monotonic()
        while len(got) < 2 and time.monotonic() - t0 < 6:
            e = wb.next_event(6 - (time.monotonic() - t0))
            if e is None:
                break
            got.append((e, time.monotonic()))
        kinds = [e.get("type") for e, _ in got]
        t.check("periodic bookmarks (interval 1s): two BOOKMARKs within 6 s", kinds == ["BOOKMARK"] * 2,
                [summarize(e) for e, _ in got])
        if kinds == ["BOOKMARK"] * 2:
            objs = [e["object"] for e, _ in got]
            t.check("bookmark object: the resource's kind with only metadata.resourceVersion",
                    all(o.get("kind") == "ConfigMap" and o.get("apiVersion") == "v1"
                        and set(o) <= {"kind", "apiVersion", "metadata"}
                        and set(o.get("metadata", {})) == {"resourceVersion"} for o in objs), objs)
            t.check("bookmark RVs are not older than the watch start and do not go back",
                    start <= rv_of(objs[0]) <= rv_of(objs[1]), [rv_of(o) for o in objs])
            gap = got[1][1] - got[0][1]
            t.check("periodic bookmarks are about 1 s apart (0.5-3 s)", 0.5 <= gap <= 3,
                    f"{gap:.2f}s")
        w = self.patch("old-0", '{"data":{"v":"after-bookmarks"}}')
        e = wb.take(1, timeout=5, skip_bookmarks=True)
        t.check("a change between bookmarks arrives as MODIFIED",
                [summarize(x) for x in e] == [("MODIFIED", f"{NS}/old-0", rv_of(w))], e)
        later = wb.events_until(lambda evs: any(x.get("type") == "BOOKMARK" for x in evs), 5)
        t.check("the next bookmark's RV is at least the change's RV",
                later and later[-1].get("type") == "BOOKMARK" and rv_of(later[-1]) >= rv_of(w),
                [summarize(x) for x in later])
        quiet = wn.take(2, timeout=0.5)
        t.check("a watch without allowWatchBookmarks got no bookmark, only the change",
                [summarize(x) for x in quiet] == [("MODIFIED", f"{NS}/old-0", rv_of(w))],
                [summarize(x) for x in quiet])
        self.close_all()

    def initial_events_end(self):
        t = self.t
        ns = "ws-init"
        self.server.create_namespace(ns)
        path = f"/api/v1/namespaces/{ns}/configmaps"
        created = {n: self.write("POST", path, configmap(n, {"v": n})) for n in ("b", "a", "c")}
        s = self.watch(f"{path}?watch=true&sendInitialEvents=true"
                       "&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true")
        if not self.stream_ok("sendInitialEvents", s):
            self.close_all()
            return
        marker = {"k8s.io/initial-events-end": "true"}
        got = s.events_until(lambda evs: evs and evs[-1].get("type") == "BOOKMARK"
                             and evs[-1]["object"].get("metadata", {}).get("annotations") == marker,
                             timeout=5)
        initial, end = got[:-1], got[-1:] if got else []
        t.check("sendInitialEvents: the state as ADDED events (objects as stored)",
                sorted((summarize(e), str(e.get("object"))) for e in initial)
                == sorted((("ADDED", f"{ns}/{n}", rv_of(o)), str(o)) for n, o in created.items()),
                [summarize(e) for e in initial])
        top = max(rv_of(o) for o in created.values())
        t.check("sendInitialEvents: then a BOOKMARK annotated k8s.io/initial-events-end=true",
                len(end) == 1 and end[0].get("type") == "BOOKMARK"
                and end[0]["object"].get("kind") == "ConfigMap"
                and end[0]["object"]["metadata"].get("annotations") == marker,
                [e for e in got[-2:]])
        t.check("sendInitialEvents: the end bookmark's RV covers the initial state",
                bool(end) and (rv_of(end[0]) or 0) >= top, end)
        u = self.write("PATCH", f"{path}/a", '{"data":{"v":"a2"}}', MERGE)
        e = s.take(1, timeout=5, skip_bookmarks=True)
        t.check("sendInitialEvents: then changes",
                [summarize(x) for x in e] == [("MODIFIED", f"{ns}/a", rv_of(u))], e)
        self.close_all()

    def legacy_and_flags(self):
        t = self.t
        start = self.server.list_rv(CMS)
        variants = {"watch=true": f"{CMS}?watch=true&resourceVersion={start}",
                    "watch=1": f"{CMS}?watch=1&resourceVersion={start}",
                    "legacy /api/v1/watch/ prefix": f"/api/v1/watch/namespaces/{NS}/configmaps"
                                                    f"?resourceVersion={start}"}
        streams = {k: self.watch(p) for k, p in variants.items()}
        a = self.write("POST", CMS, configmap("legacy"))
        b = self.write("DELETE", f"{CMS}/legacy")
        want = [("ADDED", f"{NS}/legacy", rv_of(a), a), ("DELETED", f"{NS}/legacy", rv_of(b), b)]
        for name, s in streams.items():
            if self.stream_ok(name, s):
                self.expect_events(name, s, want)
        self.close_all()
        for value in ("false", "0"):
            status, body = self.server.request("GET", f"{CMS}?watch={value}")
            t.check(f"watch={value} is a list", status == 200 and isinstance(body, dict)
                    and body.get("kind") == "ConfigMapList", f"{status} {body!r}"[:300])

    def bad_parameters(self):
        t = self.t
        control = self.watch(f"{CMS}?watch=true&labelSelector=a%20in%20%28b%29&timeoutSeconds=5")
        self.stream_ok("control: the same watch with valid parameters", control)
        control.close()
        for name, query, codes in [
                ("bad label selector", "labelSelector=a%20in%20%28", (400,)),
                ("bad label selector operator", "labelSelector=a%3D%3D%3Db", (400,)),
                ("unsupported field selector", "fieldSelector=spec.foo%3Dbar", (400,)),
                ("field selector without a value", "fieldSelector=metadata.name", (400,)),
                ("resourceVersion not a number", "resourceVersion=abc", (400,)),
                ("bad resourceVersionMatch", "resourceVersion=1&resourceVersionMatch=Bogus", (400,)),
                ("timeoutSeconds not a number", "timeoutSeconds=abc", (400,)),
                ("sendInitialEvents not a bool", "sendInitialEvents=maybe", (400,)),
                ("sendInitialEvents without resourceVersionMatch", "sendInitialEvents=true",
                 (400, 422)),
                ("resourceVersionMatch=Exact on a watch", "resourceVersion=5&resourceVersionMatch=Exact",
                 (400, 422))]:
            for prefix, base in (("", f"{CMS}?watch=true&"),
                                 ("legacy ", f"/api/v1/watch/namespaces/{NS}/configmaps?")):
                s = self.watch(base + query)
                body = s.body if isinstance(s.body, dict) else {}
                t.check(f"{prefix}watch with {name} -> {'/'.join(map(str, codes))} Status, no stream",
                        s.status in codes and not s.chunked and body.get("kind") == "Status"
                        and body.get("code") == s.status and body.get("status") == "Failure",
                        f"status={s.status} chunked={s.chunked} body={s.body!r}"[:400])
        self.close_all()

    # --- server B: default bookmark interval ----------------------------------------------------
    def deadlines(self, server_b):
        t = self.t
        start = server_b.list_rv(CMS)
        with_bm = self.watch(f"{CMS}?watch=true&resourceVersion={start}&allowWatchBookmarks=true"
                             "&timeoutSeconds=4", server=server_b).start_background(timed)
        plain = self.watch(f"{CMS}?watch=true&resourceVersion={start}&timeoutSeconds=3",
                           server=server_b).start_background(timed)
        for s in (with_bm, plain):
            self.wait(lambda s=s: s.ended, 10)
        for name, s in (("timeoutSeconds=4 with bookmarks", with_bm), ("timeoutSeconds=3", plain)):
            self.stream_ok(name, s)
            Recorded.all_events.extend(e for e, _ in s.events())
        ev = [(e.get("type"), at - with_bm.opened, e) for e, at in with_bm.events()]
        ended = (with_bm.ended_at - with_bm.opened) if with_bm.ended_at else None
        bm = [x for x in ev if x[0] == "BOOKMARK"]
        t.check("timeoutSeconds=4: only bookmarks, one or two, the first 1-3.9 s in",
                len(bm) == len(ev) and 1 <= len(bm) <= 2 and 1.0 <= bm[0][1] <= 3.9,
                [(k, f"{at:.2f}s") for k, at, _ in ev])
        t.check("timeoutSeconds=4: the bookmark arrives before the stream ends",
                bool(bm) and ended is not None and bm[-1][1] <= ended, f"ended={ended}")
        t.check("timeoutSeconds=4: the stream ends at about 4 s (3.5-6 s)",
                ended is not None and 3.5 <= ended <= 6, f"ended={ended}")
        t.check("timeoutSeconds=4: bookmark object carries an RV >= the watch start",
                bool(bm) and all(rv_of(e) is not None and rv_of(e) >= start for _, _, e in bm),
                [e.get("object") for _, _, e in bm])
        ended = (plain.ended_at - plain.opened) if plain.ended_at else None
        t.check("timeoutSeconds=3 without bookmarks: no events, ends at about 3 s (2.5-5 s)",
                plain.events() == [] and ended is not None and 2.5 <= ended <= 5,
                f"events={[summarize(e) for e, _ in plain.events()]} ended={ended}")
        self.close_all()

    @staticmethod
    def wait(condition, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not condition():
            time.sleep(0.05)
        return condition()


def main():
    binary = sys.argv[1]
    t = Checks()
    suite = Suite(t)
    server_a = server_b = None
    try:
        server_a = start_server(t, binary, ["--watch-cache-sizes=configmaps#100",
                                            "--watch-bookmark-interval=1s"])
        server_b = Server(binary).start()
        for s in (server_a, server_b):
            s.create_namespace(NS)
        suite.server = server_a
        parts = [suite.too_old, suite.too_large, suite.label_selector, suite.field_selector,
                 suite.periodic_bookmarks, suite.initial_events_end, suite.legacy_and_flags,
                 suite.bad_parameters, lambda: suite.deadlines(server_b)]
        for part in parts:
            try:
                part()
            except AssertionError as e:  # a failed write or request: report it, go on
                t.check(f"{getattr(part, '__name__', 'deadlines')} ran to completion", False,
                        str(e)[:600])
            finally:
                suite.close_all()
        events = [e for e in Recorded.all_events if e.get("type") != "ERROR"]
        t.check(f"every event seen ({len(events)}) carries metadata.resourceVersion",
                events and all(rv_of(e) is not None for e in events),
                [summarize(e) for e in events if rv_of(e) is None][:5])
    finally:
        suite.close_all()
        for s in (server_a, server_b):
            if s:
                s.stop()
        if t.failed and server_a:
            print(server_a.read_log()[-2500:])
    t.finish()


if __name__ == "__main__":
    main()
