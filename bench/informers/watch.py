"""The official Python client (python3-kubernetes) as bench/client-informers drives it, beside
kwatch-informer-bench and informer.mjs: list, then watch from the list's resourceVersion into a
dict keyed namespace/name, as a Python user mirrors a collection (the typed API: objects are
V1ConfigMap). The same JSON lines on stdout (start, synced, events on each stdin line and at
EOF); garbage is collected before RSS is read.

Usage: /usr/bin/python3 watch.py SERVER_URL NAMESPACE
"""
import gc
import json
import sys
import threading
import time

from kubernetes import client, watch


def rss_kib():
    gc.collect()
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def say(o):
    sys.stdout.write(json.dumps(o) + "\n")
    sys.stdout.flush()


def main():
    server, namespace = sys.argv[1], sys.argv[2]
    config = client.Configuration()
    config.host = server
    api = client.CoreV1Api(client.ApiClient(config))
    say({"phase": "start", "rss_kib": rss_kib()})
    start = time.monotonic()
    listed = api.list_namespaced_config_map(namespace)
    cache = {f"{o.metadata.namespace}/{o.metadata.name}": o for o in listed.items}
    rv = listed.metadata.resource_version
    say({"phase": "synced", "ms": round((time.monotonic() - start) * 1000), "objects": len(cache),
         "rss_kib": rss_kib()})
    counts = {"events": len(cache), "last_ms": 0}
    lock = threading.Lock()

    def follow():
        nonlocal rv
        w = watch.Watch()
        while True:
            for event in w.stream(api.list_namespaced_config_map, namespace, resource_version=rv,
                                  allow_watch_bookmarks=True, timeout_seconds=300):
                o = event["object"]
                if event["type"] == "BOOKMARK":
                    continue
                key = f"{o.metadata.namespace}/{o.metadata.name}"
                if event["type"] == "DELETED":
                    cache.pop(key, None)
                else:
                    cache[key] = o
                rv = o.metadata.resource_version
                with lock:
                    counts["events"] += 1
                    counts["last_ms"] = round((time.monotonic() - start) * 1000)

    threading.Thread(target=follow, daemon=True).start()
    for _ in sys.stdin:
        with lock:
            say({"phase": "events", **counts})
    with lock:
        say({"phase": "events", **counts})


if __name__ == "__main__":
    main()
