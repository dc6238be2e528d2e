"""kwatch on a real etcd: foreign writes, compaction, two replicas, member and cluster failures.

Usage: etcd_backend_test.py <path to kwatch-apiserver>
"""
import base64
import json
import os
import sys
import time

from harness import (SKIP, Checks, Etcd, Server, TempDir, WatchStream, configmap, rv_of,
                     wait_for)

CM = "/api/v1/namespaces/default/configmaps"


def names(server, path=CM):
    status, body = server.request("GET", path)
    if status != 200:
        return None
    return sorted(i["metadata"]["name"] for i in body["items"])


def etcd_objects(etcd, prefix="/registry/configmaps/"):
    """Every object under prefix as etcd holds it: name -> (mod_revision, data)."""
    p = etcd.etcdctl("get", prefix, "--prefix", "-w", "json")
    out = {}
    for kv in json.loads(p.stdout).get("kvs", []):
        obj = json.loads(base64.b64decode(kv["value"]))
        out[obj["metadata"]["name"]] = (str(kv["mod_revision"]), obj.get("data"))
    return out


def kwatch_objects(server, path=CM):
    status, body = server.request("GET", path)
    if status != 200:
        return None
    return {i["metadata"]["name"]: (i["metadata"]["resourceVersion"], i.get("data"))
            for i in body["items"]}


def main():
    binary = sys.argv[1]
    if not Etcd.available():
        print("etcd is not installed: skipping")
        sys.exit(SKIP)
    t = Checks()
    with TempDir() as tmp:
        servers = []
        etcd = Etcd(os.path.join(tmp, "single")).start()
        try:
            a = Server(binary, etcd=etcd,
                       extra_args=["--watch-cache-sizes=configmaps#100"]).start()
            b = Server(binary, etcd=etcd).start()
            servers += [a, b]

            # Objects written by kwatch are JSON under /registry/<resource>/<ns>/<name>.
            status, created = a.request("POST", CM, body=configmap("from-kwatch", {"k": "v"}))
            t.check("create through kwatch", status == 201, created)
            got = etcd.etcdctl("get", "/registry/configmaps/default/from-kwatch",
                               "--print-value-only").stdout
            t.check("etcdctl get shows the object as JSON",
                    json.loads(got or "{}").get("data") == {"k": "v"}, got)

            # A running watch sees foreign writes; a list shows them.
            _, listed = a.request("GET", CM)
            w = WatchStream(a, f"{CM}?watch=1&resourceVersion={listed['metadata']['resourceVersion']}")
            foreign = json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                                  "metadata": {"name": "from-etcdctl", "namespace": "default",
                                               "uid": "f0000000-0000-4000-8000-000000000001"},
                                  "data": {"x": "1"}})
            etcd.etcdctl("put", "/registry/configmaps/default/from-etcdctl", foreign)
            ev = w.next_event(timeout=10)
            t.check("etcdctl put reaches a running watch as ADDED",
                    ev is not None and ev["type"] == "ADDED"
                    and ev["object"]["metadata"]["name"] == "from-etcdctl", ev)
            wait_for(lambda: "from-etcdctl" in (names(a) or []), what="list to show it")
            t.check("etcdctl put shows in lists", "from-etcdctl" in (names(a) or []))
            etcd.etcdctl("del", "/registry/configmaps/default/from-etcdctl")
            ev = w.next_event(timeout=10)
            t.check("etcdctl del reaches the watch as DELETED",
                    ev is not None and ev["type"] == "DELETED"
                    and ev["object"]["metadata"]["name"] == "from-etcdctl", ev)
            w.close()

            # A value written around kwatch that it cannot read: a clear 500 for the object,
            # lists (cached and from etcd) and watches carry on without it, and it can be
            # deleted with kube's option for corrupt objects.
            _, listed = a.request("GET", CM)
            w = WatchStream(a, f"{CM}?watch=1&resourceVersion={listed['metadata']['resourceVersion']}")
            etcd.etcdctl("put", "/registry/configmaps/default/from-kwatch",
                         '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"from-kwatch",'
                         '"namespace":"default"},"x":1e999}')
            ev = w.next_event(timeout=10)
            t.check("an unreadable update leaves a watch as DELETED of the last good state",
                    ev is not None and ev["type"] == "DELETED"
                    and ev["object"]["metadata"]["name"] == "from-kwatch", ev)
            status, got = a.request("GET", CM + "/from-kwatch")
            t.check("get of an unreadable object is a 500 naming the way out",
                    status == 500 and "ignoreStoreReadErrorWithClusterBreakingPotential"
                    in got.get("message", ""), got)
            status, _ = a.request("POST", CM, body=configmap("beside-it"))
            wait_for(lambda: "beside-it" in (names(a, CM + "?resourceVersion=0") or []),
                     what="cached list to show the next object")
            t.check("cached list skips it and shows the rest",
                    names(a, CM + "?resourceVersion=0") == ["beside-it"])
            # On etcd 3.4 a consistent list (no resourceVersion) is read from etcd itself.
            t.check("list from etcd skips it and shows the rest", names(a) == ["beside-it"],
                    names(a))
            status, body = a.request("GET", CM + "?limit=10")
            t.check("paged list from etcd shows the rest",
                    status == 200 and [i["metadata"]["name"] for i in body["items"]] == ["beside-it"],
                    body)
            status, _ = a.request("DELETE", CM + "/from-kwatch")
            t.check("a plain delete of it is refused", status == 500)
            status, body = a.request(
                "DELETE", CM + "/from-kwatch?ignoreStoreReadErrorWithClusterBreakingPotential=true")
            t.check("deleting it with the option works", status == 200
                    and body.get("status") == "Success", body)
            got = etcd.etcdctl("get", "/registry/configmaps/default/from-kwatch",
                               "--print-value-only").stdout
            t.check("and it is gone from etcd", got.strip() == "", got)
            a.request("DELETE", CM + "/beside-it")
            w.close()

            # etcd's own request limit (1.5 MiB): 413, as kube-apiserver answers.
            status, body = a.request("POST", CM, body=configmap("huge", {"k": "x" * (2 << 20)}))
            t.check("an object over etcd's request limit is a 413",
                    status == 413 and body.get("reason") == "RequestEntityTooLarge", body)

            # Two replicas on one etcd: a write through one is seen by a watch on the other.
            _, listed = b.request("GET", CM)
            wb = WatchStream(b, f"{CM}?watch=1&resourceVersion={listed['metadata']['resourceVersion']}")
            status, made = a.request("POST", CM, body=configmap("replicated"))
            ev = wb.next_event(timeout=10)
            t.check("a write through replica A reaches a watch on replica B",
                    ev is not None and ev["object"]["metadata"]["name"] == "replicated"
                    and rv_of(ev["object"]) == rv_of(made), ev)
            wb.close()

            # Compaction: a watch from before the window and an exact list below the compacted
            # revision both get 410; a re-list and a watch from its RV work.
            _, first = a.request("POST", CM, body=configmap("churn"))
            first_rv = rv_of(first)
            for i in range(150):
                a.request("PATCH", f"{CM}/churn", body=json.dumps({"data": {"i": str(i)}}),
                          headers={"Content-Type": "application/merge-patch+json"})
            _, latest = a.request("GET", f"{CM}/churn")
            etcd.etcdctl("compact", str(rv_of(latest)))
            old = WatchStream(a, f"{CM}?watch=1&resourceVersion={first_rv}")
            ev = old.next_event(timeout=10)
            t.check("watch from a compacted, evicted RV gets a 410 ERROR event",
                    ev is not None and ev["type"] == "ERROR" and ev["object"]["code"] == 410, ev)
            old.close()
            status, body = a.request("GET", f"{CM}?resourceVersion={first_rv}&resourceVersionMatch=Exact")
            t.check("exact list below the compacted revision is 410 Expired",
                    status == 410 and body.get("reason") == "Expired", (status, body))
            status, relist = a.request("GET", CM)
            t.check("a re-list after compaction works", status == 200, relist)
            w = WatchStream(a, f"{CM}?watch=1&resourceVersion={relist['metadata']['resourceVersion']}")
            a.request("PATCH", f"{CM}/churn", body=json.dumps({"data": {"i": "final"}}),
                      headers={"Content-Type": "application/merge-patch+json"})
            ev = w.next_event(timeout=10)
            t.check("a watch from the re-list's RV gets the next change",
                    ev is not None and ev["type"] == "MODIFIED"
                    and ev["object"]["data"]["i"] == "final", ev)
            w.close()

            # The whole of etcd down: fast Status errors, /readyz red; back up: same state.
            wd = WatchStream(a, f"{CM}?watch=1")
            etcd.stop()
            started = time.monotonic()
            status, body = a.request("POST", CM, body=configmap("while-down"))
            elapsed = time.monotonic() - started
            t.check("a write while etcd is down fails with a 5xx Status",
                    status in (500, 503, 504) and isinstance(body, dict)
                    and body.get("kind") == "Status", (status, body))
            t.check("... and fails fast", elapsed < 15, elapsed)
            status, _ = a.request("GET", "/readyz")
            t.check("/readyz is red while etcd is down", status != 200, status)
            started = time.monotonic()
            status, body = a.request("GET", "/readyz?verbose")
            t.check("/readyz answers within --etcd-readycheck-timeout (2 s) while etcd is down",
                    time.monotonic() - started < 3.5, time.monotonic() - started)
            t.check("/readyz?verbose names the etcd check and withholds why",
                    status == 500 and "[-]etcd failed: reason withheld\n" in body
                    and "[+]ping ok\n" in body and body.endswith("readyz check failed\n"),
                    (status, body))
            status, body = a.request("GET", "/livez?exclude=etcd")
            t.check("/livez?exclude=etcd is green: the replica still serves its cache",
                    status == 200 and body == "ok", (status, body))
            status, body = a.request("GET", "/readyz/etcd")
            t.check("/readyz/etcd says why it fails",
                    status == 500 and str(body).startswith("internal server error: storage: "),
                    (status, body))
            etcd.start()
            wait_for(lambda: a.request("GET", "/readyz")[0] == 200, timeout=30,
                     what="/readyz green again")
            t.check("/readyz is green after etcd returns", True)
            # The caches may re-list once more after etcd returns (their watches were compacted
            # past while it was down), turning watch-caches red for a moment: wait for green.
            wait_for(lambda: a.request("GET", "/readyz?verbose")[0] == 200, timeout=30,
                     what="/readyz?verbose green")
            status, body = a.request("GET", "/readyz?verbose")
            t.check("... and lists its checks when asked",
                    status == 200 and "[+]etcd ok\n" in body and "[+]watch-caches ok\n" in body
                    and body.endswith("readyz check passed\n"), (status, body))
            for i in range(3):
                a.request("POST", CM, body=configmap(f"after-{i}"))
            wait_for(lambda: kwatch_objects(a) == etcd_objects(etcd), timeout=20,
                     what="kwatch to match etcd")
            t.check("after etcd returns, kwatch's state equals etcd's key by key",
                    kwatch_objects(a) == etcd_objects(etcd))
            t.check("replica B converges too",
                    wait_for(lambda: kwatch_objects(b) == etcd_objects(etcd), timeout=20,
                             what="replica B to match etcd"))
            # The watch opened before the outage went on through it: its cache watched etcd
            # again from where it was, so the client needs no re-list.
            seen = []
            while True:
                ev = wd.next_event(timeout=10)
                if ev is None:
                    break
                seen.append((ev["type"], ev["object"]["metadata"].get("name")))
                if seen[-1] == ("ADDED", "after-2"):
                    break
            t.check("a watch open through the etcd outage sees the writes after it, not an end",
                    [n for kind, n in seen if kind == "ADDED" and n.startswith("after-")]
                    == ["after-0", "after-1", "after-2"] and not wd.ended, (seen[-5:], wd.ended))
            wd.close()
        finally:
            for s in servers:
                s.stop()
            etcd.stop()
            if t.failed:
                for s in servers:
                    print(s.read_log()[-3000:])

        # A 3-member cluster: one member dies, kwatch keeps serving.
        cluster = Etcd(os.path.join(tmp, "cluster"), members=3).start()
        server = None
        try:
            server = Server(binary, etcd=cluster).start()
            server.request("POST", CM, body=configmap("before"))
            _, listed = server.request("GET", CM)
            w = WatchStream(server, f"{CM}?watch=1&resourceVersion={listed['metadata']['resourceVersion']}")
            cluster.stop(index=0, kill=True)
            ok = wait_for(lambda: server.request("POST", CM, body=configmap("during"))[0] in (201, 409),
                          timeout=30, what="a write with one member down")
            t.check("writes continue with one of three members down", ok)
            status, body = server.request("GET", CM)
            t.check("reads continue with one member down", status == 200
                    and "during" in [i["metadata"]["name"] for i in body["items"]], (status, body))
            ev = w.next_event(timeout=20)
            t.check("the watch continues with one member down",
                    ev is not None and ev["object"]["metadata"]["name"] == "during", ev)
            w.close()
        finally:
            if server:
                server.stop()
                if t.failed:
                    print(server.read_log()[-3000:])
            cluster.stop()
    t.finish()


if __name__ == "__main__":
    main()
