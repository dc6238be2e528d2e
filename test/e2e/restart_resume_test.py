"""Watches resume across a restart on the same data, even when the restarted server writes.

A server that starts again on its data has writes of its own to make: a bootstrap ClusterRole
that lost a rule gets it back, and the garbage collector (off in the first run) deletes an object
whose owner is gone. Every built-in cache must list before those writes, so that they reach the
caches as events: a client that watched before the restart then resumes from its last
resourceVersion on any resource, where a cache that listed after such a write would answer 410
and send every informer of the cluster to list again.

Usage: restart_resume_test.py <path to kwatch-apiserver>
"""
import os
import re
import signal
import sys

from harness import Checks, Server, TempDir, WatchStream, configmap, wait_for

NS = "resume"
CMS = f"/api/v1/namespaces/{NS}/configmaps"
ROLES = "/apis/rbac.authorization.k8s.io/v1/clusterroles"
ROLE = "system:discovery"  # a bootstrap role that kwatch reconciles at start


def first_event(server, path):
    stream = WatchStream(server, path)
    try:
        return stream.next_event(timeout=10)
    finally:
        stream.close()


def summary(event):
    if event is None:
        return None
    obj = event.get("object", {})
    if event.get("type") == "ERROR":
        return ("ERROR", obj.get("code"), obj.get("message"))
    return (event.get("type"), obj.get("metadata", {}).get("name"))


def main():
    binary = sys.argv[1]
    checks = Checks()
    with TempDir() as tmp:
        data = os.path.join(tmp, "data")
        server = Server(binary, data_dir=data, extra_args=["--enable-garbage-collector=false"]).start()
        try:
            server.create_namespace(NS)
            server.request("POST", CMS, body=configmap("before"))
            orphan = configmap("orphan")
            orphan["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "ConfigMap",
                                                      "name": "gone", "uid": "0b9ad1c4-5f1e-4c39-9d51-3c4b5e0e0d11"}]
            status, _ = server.request("POST", CMS, body=orphan)
            checks.check("an object whose owner does not exist, kept while the collector is off",
                         status == 201, status)
            status, role = server.request("GET", f"{ROLES}/{ROLE}")
            full_rules = role["rules"]
            role["rules"] = full_rules[:-1]
            status, _ = server.request("PUT", f"{ROLES}/{ROLE}", body=role)
            checks.check("a bootstrap ClusterRole loses a rule", status == 200, status)
            wait_for(lambda: server.request("GET", f"/api/v1/namespaces/{NS}/serviceaccounts/default")[0]
                     == 200, what="the namespace's default ServiceAccount")
            status, listed = server.request("GET", "/api/v1/namespaces")
            rv = listed["metadata"]["resourceVersion"]

            # A watch open at the stop: its last event is older than the server's last write (a
            # Secret), and the stop hands it a bookmark at that write before its stream ends.
            server.request("POST", CMS, body=configmap("watched"))
            open_watch = WatchStream(server, f"{CMS}?watch=1&allowWatchBookmarks=true&resourceVersion={rv}")
            events = open_watch.take(1)
            status, secret = server.request("POST", f"/api/v1/namespaces/{NS}/secrets",
                                            body={"metadata": {"name": "later"}, "data": {}})
            rv = secret["metadata"]["resourceVersion"]
            server.stop()
            rest = []
            while True:
                event = open_watch.next_event(timeout=10)
                if event is None:
                    break
                rest.append(event)
            open_watch.close()
            last = rest[-1] if rest else {}
            checks.check("a watch open at the stop ends with a bookmark at the server's last write",
                         open_watch.ended and last.get("type") == "BOOKMARK"
                         and last["object"]["metadata"]["resourceVersion"] == rv
                         and [summary(e) for e in events] == [("ADDED", "watched")],
                         ([summary(e) for e in events + rest], rv))
            server.extra_args = ["--watch-bookmark-interval=1s"]
            server.start()
            wait_for(lambda: len(server.request("GET", f"{ROLES}/{ROLE}")[1].get("rules", [])) == len(full_rules),
                     what="the bootstrap rule written back")
            status, after = server.request("GET", f"{ROLES}/{ROLE}")
            checks.check("the restarted server wrote (the bootstrap rule back)",
                         int(after["metadata"]["resourceVersion"]) > int(rv), (rv, after["metadata"]))

            got = summary(first_event(server, f"{ROLES}?watch=1&resourceVersion={rv}"))
            checks.check("a ClusterRole watch from before the restart resumes: the restart's write "
                         "is its first event", got == ("MODIFIED", ROLE), got)
            wait_for(lambda: server.request("GET", f"{CMS}/orphan")[0] == 404, what="the orphan collected")
            got = summary(first_event(server, f"{CMS}?watch=1&resourceVersion={rv}"))
            checks.check("a ConfigMap watch from before the restart resumes: the collector's delete is "
                         "its first event", got == ("DELETED", "orphan"), got)
            # Every other built-in resource: its first event is a bookmark (one a second), not 410.
            paths = []
            for base in ["/api/v1"] + [f"/apis/{g['preferredVersion']['groupVersion']}"
                                       for g in server.request("GET", "/apis")[1]["groups"]]:
                for r in server.request("GET", base)[1]["resources"]:
                    if "/" not in r["name"] and "watch" in r["verbs"]:
                        paths.append(f"{base}/{r['name']}")
            streams = [WatchStream(server, f"{p}?watch=1&allowWatchBookmarks=true&resourceVersion={rv}")
                       for p in paths]
            refused = []
            for p, stream in zip(paths, streams):
                event = stream.next_event(timeout=10)
                if event is None or event.get("type") == "ERROR":
                    refused.append((p, summary(event)))
                stream.close()
            checks.check(f"a watch from before the restart resumes on each of {len(paths)} resources",
                         len(paths) > 30 and not refused, refused[:5])
            server.create_namespace(f"{NS}-after")
            got = summary(first_event(server, f"/api/v1/namespaces?watch=1&resourceVersion={rv}"))
            checks.check("a Namespace watch from before the restart resumes", got == ("ADDED", f"{NS}-after"),
                         got)
            got = summary(first_event(server, f"/api/v1/namespaces/{NS}-after/serviceaccounts"
                                              f"?watch=1&resourceVersion={rv}"))
            checks.check("a ServiceAccount watch from before the restart resumes: the new namespace's "
                         "default ServiceAccount", got == ("ADDED", "default"), got)

            # Killed right after writes that its controllers follow up (default ServiceAccounts):
            # every cache lists before the restarted server's own writes, at one revision.
            for i in range(5):
                server.create_namespace(f"{NS}-killed-{i}")
            server.proc.send_signal(signal.SIGKILL)
            server.proc.wait(timeout=10)
            server.stop()
            server.start()
            starts = {}
            for p in paths:
                event = first_event(server, f"{p}?watch=1&resourceVersion=1")
                m = re.search(r"too old resource version: 1 \((\d+)\)", str((event or {}).get("object")))
                starts[p] = int(m.group(1)) if m else None
            checks.check("after a crash every cache starts at one revision",
                         len(set(starts.values())) == 1 and None not in starts.values(),
                         sorted(set(starts.values()), key=str))
            checks.check("server alive", server.alive())
        finally:
            server.stop()
    checks.finish()


if __name__ == "__main__":
    main()
