#!/usr/bin/env python3
"""What the aggregator costs a watch: events of an extension API server watched through kwatch's
aggregation proxy, against the same events watched on the extension server directly.

    bench/aggregated_watch.py [--binary build/server/kwatch-apiserver] [--events 2000]

Two kwatch-apiservers on loopback, embedded stores in memory: B, the extension, serves a custom
resource (widgets.ext.bench.example.com/v1) over HTTPS (its generated certificate) and plain
HTTP; A, the aggregator, has an APIService for ext.bench.example.com/v1 pointing at B through a
Service whose Endpoints hold 127.0.0.1 (so A runs with --unsafe-webhook-loopback-endpoints). For
1 and 4 watchers, each phase opens the watchers (on B directly, or through A), creates
`--events` objects on B one after another, and ends when every watcher has every event; it reads
both servers' CPU (utime + stime) around the phase. Prints one JSON document.
"""
import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

from admission_webhooks import cpu_seconds  # noqa: E402
from harness import Server, TempDir, WatchStream, free_port, wait_for  # noqa: E402

GROUP = "ext.bench.example.com"
PATH = f"/apis/{GROUP}/v1/namespaces/default/widgets"


def phase(aggregator, extension, via, watchers, events, prefix):
    watched = aggregator if via == "aggregator" else extension
    _, listed = extension.session().request("GET", PATH)
    rv = listed["metadata"]["resourceVersion"]
    streams = [WatchStream(watched, f"{PATH}?watch=1&resourceVersion={rv}").start_background(
        keep=lambda e: e.get("type")) for _ in range(watchers)]
    if any(s.status != 200 for s in streams):
        raise SystemExit(f"watch via {via}: {[s.status for s in streams]}")
    session = extension.session()
    before = (cpu_seconds(aggregator.proc.pid), cpu_seconds(extension.proc.pid))
    start = time.monotonic()
    for i in range(events):
        status, body = session.request("POST", PATH, {
            "apiVersion": f"{GROUP}/v1", "kind": "Widget",
            "metadata": {"name": f"{prefix}-{i}"}, "spec": {"n": i, "text": "x" * 200}})
        if status != 201:
            raise SystemExit(f"create {prefix}-{i}: {status} {body}")
    got = wait_for(lambda: all(s.count >= events for s in streams), timeout=120,
                   what="every watcher has every event")
    wall = time.monotonic() - start
    cpu_a = cpu_seconds(aggregator.proc.pid) - before[0]
    cpu_b = cpu_seconds(extension.proc.pid) - before[1]
    for s in streams:
        s.close()
    if not got:
        raise SystemExit(f"via {via}: watchers got {[s.count for s in streams]}")
    delivered = events * watchers
    return {"via": via, "watchers": watchers, "events": events,
            "events_delivered_per_second": round(delivered / wall),
            "aggregator_cpu_us_per_delivered_event": round(cpu_a / delivered * 1e6, 1),
            "extension_cpu_us_per_delivered_event": round(cpu_b / delivered * 1e6, 1),
            "seconds": round(wall, 2)}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--binary", default=os.path.join(ROOT, "build", "server", "kwatch-apiserver"))
    p.add_argument("--events", type=int, default=2000)
    args = p.parse_args()
    results = []
    with TempDir() as tmp:
        secure = free_port()
        extension = Server(args.binary, extra_args=(
            f"--secure-port={secure}", f"--cert-dir={tmp}/ext-certs")).start()
        aggregator = Server(args.binary, extra_args=(
            "--unsafe-webhook-loopback-endpoints=true",)).start()
        try:
            s = extension.session()
            status, body = s.request(
                "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                 "metadata": {"name": f"widgets.{GROUP}"},
                 "spec": {"group": GROUP, "scope": "Namespaced",
                          "names": {"plural": "widgets", "kind": "Widget"},
                          "versions": [{"name": "v1", "served": True, "storage": True,
                                        "schema": {"openAPIV3Schema": {
                                            "type": "object",
                                            "x-kubernetes-preserve-unknown-fields": True}}}]}})
            if status != 201:
                raise SystemExit(f"definition: {status} {body}")
            wait_for(lambda: s.request("GET", PATH)[0] == 200, timeout=20, what="widgets served")
            a = aggregator.session()
            for obj in (
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ext"}},
                    {"apiVersion": "v1", "kind": "Service",
                     "metadata": {"name": "ext", "namespace": "ext"},
                     "spec": {"ports": [{"name": "https", "port": 443, "targetPort": secure}]}},
                    {"apiVersion": "v1", "kind": "Endpoints",
                     "metadata": {"name": "ext", "namespace": "ext"},
                     "subsets": [{"addresses": [{"ip": "127.0.0.1"}],
                                  "ports": [{"name": "https", "port": secure}]}]},
                    {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                     "metadata": {"name": f"v1.{GROUP}"},
                     "spec": {"group": GROUP, "version": "v1", "groupPriorityMinimum": 1000,
                              "versionPriority": 100, "insecureSkipTLSVerify": True,
                              "service": {"namespace": "ext", "name": "ext"}}}):
                kind = obj["kind"]
                path = {"Namespace": "/api/v1/namespaces",
                        "Service": "/api/v1/namespaces/ext/services",
                        "Endpoints": "/api/v1/namespaces/ext/endpoints",
                        "APIService": "/apis/apiregistration.k8s.io/v1/apiservices"}[kind]
                status, body = a.request("POST", path, obj)
                if status != 201:
                    raise SystemExit(f"{kind}: {status} {body}")
            wait_for(lambda: a.request("GET", PATH)[0] == 200, timeout=20,
                     what="the APIService available")
            n = 0
            for watchers in (1, 4):
                for via in ("extension", "aggregator"):
                    phase(aggregator, extension, via, watchers, 100, f"warm{n}")
                    n += 1
                    results.append(phase(aggregator, extension, via, watchers, args.events,
                                         f"e{n}"))
                    n += 1
        finally:
            aggregator.stop()
            extension.stop()
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
