"""Watch consistency: what watchers see is exactly what was written, once each, in RV order.

- RV=0 and RV unset: the current state as ADDED events (RV=0 sorted by key), then changes;
- watch of one object (fieldSelector=metadata.name and the legacy /watch/.../{name} path);
- a namespace watch sees only its namespace, a cluster-wide watch sees every namespace;
- 100 concurrent chunked watchers from a list's RV while 1,000 configmaps are created, updated and
  deleted by several writers: every watcher gets all 3,000 events, in RV order, with the types and
  RVs the writes returned.

Usage: watch_consistency_test.py <path to kwatch-apiserver>
"""
import sys
import threading
import time

from harness import (delete_and_observe, Checks, Server, WatchStream, configmap, rv_of, storage_backend, summarize,
                     wait_for)

NS, NS2 = "wc", "wc-other"
CMS = f"/api/v1/namespaces/{NS}/configmaps"
CMS2 = f"/api/v1/namespaces/{NS2}/configmaps"
WATCHERS = 100
OBJECTS = 1000
WRITERS = 4
MERGE = {"Content-Type": "application/merge-patch+json"}


class Suite:
    def __init__(self, server, checks):
        self.server = server
        self.t = checks
        self.streams = []

    def watch(self, path, **kwargs):
        s = WatchStream(self.server, path, **kwargs)
        self.streams.append(s)
        return s

    def close_all(self):
        for s in self.streams:
            s.close()
        self.streams = []

    def write(self, method, path, body=None, headers=None, expect=(200, 201)):
        if method == "DELETE":  # the object as its DELETED event carries it
            status, obj = delete_and_observe(self.server.port, path)
        else:
            status, obj = self.server.request(method, path, body=body, headers=headers)
        if status not in expect:
            raise AssertionError(f"{method} {path}: {status} {obj!r}"[:600])
        return obj

    def check_stream_head(self, name, s):
        ok = (s.status == 200 and s.chunked
              and s.headers.get("content-type", "").startswith("application/json"))
        self.t.check(f"{name}: 200 chunked application/json", ok,
                     f"status={s.status} headers={s.headers} body={s.body!r}"[:600])
        return ok

    def no_more(self, name, s, timeout=0.4):
        extra = s.next_event(timeout)
        self.t.check(f"{name}: no further events", s.status == 200 and extra is None,
                     summarize(extra) if extra else f"status {s.status}")

    # ------------------------------------------------------------------------------------------
    def initial_state(self):
        t = self.t
        created = {}
        for name in ["zeta", "alpha", "mid", "beta"]:  # creation order is not key order
            created[name] = rv_of(self.write("POST", CMS, configmap(name, {"v": name})))
        self.write("POST", CMS2, configmap("elsewhere"))
        last = max(created.values())
        # a list at the last RV waits for the cache to have it: RV=0 then serves everything
        status, lst = self.server.request("GET", f"{CMS}?resourceVersion={last}")
        t.check("list at the last write's RV", status == 200, lst)
        items = {i["metadata"]["name"]: i for i in lst.get("items", [])} if status == 200 else {}
        if storage_backend() == "etcd3":
            # etcd 3.4.23 may report watch progress ahead of events still in flight, so kwatch
            # answers the list above from etcd and its cache may still be applying the writes:
            # wait for the cache (RV=0 reads it) before testing what an RV=0 watch starts with.
            wait_for(lambda: len(self.server.request("GET", f"{CMS}?resourceVersion=0")[1]
                                 .get("items", [])) == 4, timeout=10, what="the cache to have 4")

        w0 = self.watch(f"{CMS}?watch=true&resourceVersion=0")
        wu = self.watch(f"{CMS}?watch=1")
        self.check_stream_head("RV=0 watch", w0)
        self.check_stream_head("RV unset watch (watch=1)", wu)
        ev0 = w0.take(4, timeout=5)
        evu = wu.take(4, timeout=5)
        t.check("RV=0: initial events are ADDED, sorted by key, with each object's own RV",
                [summarize(e) for e in ev0]
                == [("ADDED", f"{NS}/{n}", created[n]) for n in sorted(created)],
                [summarize(e) for e in ev0])
        t.check("RV=0: initial objects equal the listed objects",
                [e.get("object") for e in ev0] == [items.get(n) for n in sorted(created)],
                [e.get("object") for e in ev0][:2])
        t.check("RV unset: the current state as ADDED events",
                sorted(summarize(e) for e in evu)
                == sorted(("ADDED", f"{NS}/{n}", created[n]) for n in created),
                [summarize(e) for e in evu])
        t.check("RV unset: initial objects equal the listed objects",
                sorted((e.get("object") or {}).get("metadata", {}).get("name", "") for e in evu)
                == sorted(created)
                and all(e.get("object") == items.get(e["object"]["metadata"]["name"])
                        for e in evu if isinstance(e.get("object"), dict)
                        and "metadata" in e["object"]), [e.get("object") for e in evu][:2])

        upd = self.write("PATCH", f"{CMS}/alpha", '{"data":{"v":"alpha-2"}}', MERGE)
        for name, s in [("RV=0", w0), ("RV unset", wu)]:
            ev = s.take(1, timeout=5)
            t.check(f"{name}: then the change as MODIFIED with the write's RV and content",
                    [summarize(e) for e in ev] == [("MODIFIED", f"{NS}/alpha", rv_of(upd))]
                    and ev[0]["object"] == upd, ev)
            self.no_more(name, s)
        self.close_all()

    # ------------------------------------------------------------------------------------------
    def one_object_and_scope(self):
        t = self.t
        start = self.server.list_rv("/api/v1/configmaps")
        watches = {
            "fieldSelector=metadata.name": self.watch(
                f"{CMS}?watch=true&resourceVersion={start}&fieldSelector=metadata.name%3Dzeta"),
            "legacy /watch/.../zeta": self.watch(
                f"/api/v1/watch/namespaces/{NS}/configmaps/zeta?resourceVersion={start}"),
            "namespace": self.watch(f"{CMS}?watch=true&resourceVersion={start}"),
            "cluster-wide": self.watch(f"/api/v1/configmaps?watch=true&resourceVersion={start}"),
            "legacy cluster-wide /watch/configmaps": self.watch(
                f"/api/v1/watch/configmaps?resourceVersion={start}"),
        }
        for name, s in watches.items():
            self.check_stream_head(f"{name} watch", s)

        log = []  # (type, ns/name, rv, object)

        def did(kind, ns, name, obj):
            log.append((kind, f"{ns}/{name}", rv_of(obj), obj))

        did("MODIFIED", NS, "zeta", self.write(
            "PUT", f"{CMS}/zeta", dict(self.server.request("GET", f"{CMS}/zeta")[1],
                                       data={"v": "zeta-2"})))
        did("ADDED", NS2, "other2", self.write("POST", CMS2, configmap("other2")))
        did("MODIFIED", NS, "mid", self.write("PATCH", f"{CMS}/mid", '{"data":{"x":"1"}}', MERGE))
        did("ADDED", NS, "gamma", self.write("POST", CMS, configmap("gamma")))
        did("DELETED", NS, "zeta", self.write("DELETE", f"{CMS}/zeta"))
        did("MODIFIED", NS2, "elsewhere",
            self.write("PATCH", f"{CMS2}/elsewhere", '{"data":{"v":"9"}}', MERGE))
        did("DELETED", NS, "gamma", self.write("DELETE", f"{CMS}/gamma"))

        want = {
            "fieldSelector=metadata.name": [e for e in log if e[1] == f"{NS}/zeta"],
            "legacy /watch/.../zeta": [e for e in log if e[1] == f"{NS}/zeta"],
            "namespace": [e for e in log if e[1].startswith(f"{NS}/")],
            "cluster-wide": log,
            "legacy cluster-wide /watch/configmaps": log,
        }
        for name, s in watches.items():
            exp = want[name]
            got = s.take(len(exp), timeout=5)
            t.check(f"{name}: exactly the expected events (types, keys, RVs)",
                    [summarize(e) for e in got] == [e[:3] for e in exp],
                    f"got {[summarize(e) for e in got]} want {[e[:3] for e in exp]}")
            t.check(f"{name}: event objects are what the writes returned",
                    [e.get("object") for e in got] == [e[3] for e in exp],
                    [e.get("object") for e in got][:3])
            self.no_more(name, s)
        self.close_all()

    # ------------------------------------------------------------------------------------------
    def many_watchers(self):
        t = self.t
        start = self.server.list_rv(CMS)

        def keep(e):
            obj = e.get("object") or {}
            return summarize(e) + ((obj.get("data") or {}).get("v"),)

        watchers = []
        for i in range(WATCHERS):
            bookmarks = "&allowWatchBookmarks=true" if i % 10 == 0 else ""
            watchers.append(self.watch(f"{CMS}?watch=true&resourceVersion={start}{bookmarks}",
                                       timeout=15).start_background(keep))
        t.check(f"{WATCHERS} watchers from the list RV were accepted",
                all(w.status == 200 and w.chunked for w in watchers),
                [(w.status, w.body) for w in watchers if w.status != 200][:2])

        records = []
        errors = []
        lock = threading.Lock()

        def writer(k):
            session = self.server.session()
            mine = [f"cm-{i:04d}" for i in range(OBJECTS) if i % WRITERS == k]
            out = []
            try:
                for phase in ("create", "update", "delete"):
                    for name in mine:
                        if phase == "create":
                            code, obj = session.request("POST", CMS, configmap(name, {"v": "c"}))
                            kind, ok = "ADDED", code == 201
                        elif phase == "update":
                            code, obj = session.request("PATCH", f"{CMS}/{name}",
                                                        '{"data":{"v":"u"}}', MERGE)
                            kind, ok = "MODIFIED", code == 200
                        else:
                            code, obj = delete_and_observe(self.server.port, f"{CMS}/{name}")
                            kind, ok = "DELETED", code == 200
                        if not ok:
                            raise AssertionError(f"{phase} {name}: {code} {obj!r}"[:300])
                        out.append((kind, f"{NS}/{name}", rv_of(obj), obj["data"]["v"]))
            except Exception as e:  # noqa: BLE001 - reported as a check below
                with lock:
                    errors.append(repr(e))
            finally:
                session.close()
                with lock:
                    records.extend(out)

        t0 = time.monotonic()
        threads = [threading.Thread(target=writer, args=(k,)) for k in range(WRITERS)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=120)
        wrote = time.monotonic() - t0
        t.check(f"{3 * OBJECTS} writes by {WRITERS} writers succeeded",
                not errors and len(records) == 3 * OBJECTS, errors[:3])
        expected = sorted(records, key=lambda r: r[2])
        t.check("every write got its own RV, above the list RV",
                len({r[2] for r in records}) == len(records)
                and all(r[2] > start for r in records))

        def non_bookmarks(w):
            return [e for e in w.events() if e[0] != "BOOKMARK"]

        def everyone_done():
            return all(len(non_bookmarks(w)) >= len(expected) or w.ended for w in watchers)

        try:
            self.wait(everyone_done, 60)
            short = [(w.path, len(non_bookmarks(w)), w.ended) for w in watchers
                     if len(non_bookmarks(w)) < len(expected)]
            t.check("all watchers got as many events as there were writes, within 60 s",
                    not short, f"{len(short)} short, e.g. {short[:2]}")
        finally:
            delivered = time.monotonic() - t0
            print(f"     {len(records)} writes in {wrote:.1f}s, all delivered after "
                  f"{delivered:.1f}s")
        exact = [w for w in watchers if non_bookmarks(w) == expected]
        first_bad = next((w for w in watchers if non_bookmarks(w) != expected), None)
        detail = ""
        if first_bad:
            got = non_bookmarks(first_bad)
            i = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b),
                     min(len(got), len(expected)))
            detail = (f"first mismatch (path {first_bad.path}) at #{i}: got {got[i:i + 3]} want "
                      f"{expected[i:i + 3]}; got {len(got)} events, want {len(expected)}; "
                      f"ended={first_bad.ended}")
        t.check(f"every one of {WATCHERS} watchers saw every change exactly once, in RV order, "
                "with the written types, RVs and content", len(exact) == WATCHERS,
                f"{len(exact)} exact; {detail}")
        # A bookmark says "everything up to this RV was sent": it may repeat the RV of the event
        # before it (kube's bookmarks carry the cache's RV, the last event's when nothing else
        # moved it), never go back; an event's RV is above everything before it.
        monotonic = all(all(a[2] <= b[2] if b[0] == "BOOKMARK" else a[2] < b[2]
                            for a, b in zip(ev, ev[1:]))
                        for ev in ([e for e in w.events() if e[2] is not None] for w in watchers))
        t.check("RVs (bookmarks included) only grow on every watcher", monotonic)
        bookmark_ok = all(e[1] is None and e[2] is not None
                          for w in watchers for e in w.events() if e[0] == "BOOKMARK")
        t.check("bookmarks, if any, carry only an RV", bookmark_ok)
        t.check("no watcher was ended by the server during the writes",
                not any(w.ended for w in watchers),
                [w.path for w in watchers if w.ended][:3])
        self.close_all()

    @staticmethod
    def wait(condition, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return True
            time.sleep(0.05)
        return condition()


def main():
    binary = sys.argv[1]
    t = Checks()
    server = Server(binary).start()
    suite = Suite(server, t)
    try:
        server.create_namespace(NS)
        server.create_namespace(NS2)
        for part in (suite.initial_state, suite.one_object_and_scope, suite.many_watchers):
            try:
                part()
            except AssertionError as e:  # a failed write or request: report it, go on
                t.check(f"{part.__name__} ran to completion", False, str(e)[:600])
            finally:
                suite.close_all()
    finally:
        suite.close_all()
        server.stop()
        if t.failed:
            print(server.read_log()[-3000:])
    t.finish()


if __name__ == "__main__":
    main()
