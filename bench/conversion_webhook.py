#!/usr/bin/env python3
"""What a conversion webhook costs watches: events of a custom resource watched in a version its
definition's webhook converts, against the same events watched in the stored version and in a
version converted without a webhook (strategy None), for 1, 4 and 16 watchers.

    bench/conversion_webhook.py [--binary build/server/kwatch-apiserver] [--events 1000]

Starts a kwatch-apiserver on a free loopback port (embedded store, in memory) and
kwatch-bench-webhook (bench/webhook_server.cpp: HTTPS with its own CA, keep-alive, one thread)
converting every ConversionReview at once (apiVersion changed, nothing else). Two definitions
with the same two versions (v1 stored, v2 served): one converts through the webhook, one with
strategy None. For each target and watcher count: the watchers open on that version, `--events`
objects are created through v1 one after another, and the phase ends when every watcher has
every event. Reads kwatch's CPU (utime + stime of its process) around each phase (the creates
included) and the number of objects the webhook converted. The goal (issue #28): conversion once
per event per version, whatever the number of watchers. The webhook definition's v2 cache
converts every event whether or not v2 is watched (as kube keeps a cacher per version), so its
v1 phases pay for that conversion too. Prints one JSON document. Only 127.0.0.1 is used.
"""
import argparse
import json
import os
import ssl
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

from admission_webhooks import cpu_seconds, webhook_server  # noqa: E402
from harness import Server, TempDir, WatchStream, wait_for  # noqa: E402


def definition(group, conversion):
    def version(name, storage):
        return {"name": name, "served": True, "storage": storage,
                "schema": {"openAPIV3Schema": {"type": "object",
                                               "x-kubernetes-preserve-unknown-fields": True}}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"widgets.{group}"},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"plural": "widgets", "kind": "Widget"},
                     "versions": [version("v1", True), version("v2", False)],
                     "conversion": conversion}}


def converted(port, context):
    with urllib.request.urlopen(f"https://127.0.0.1:{port}/stats", context=context) as r:
        return json.loads(r.read())["converted"]


def phase(server, session, group, version, watchers, events, prefix, stats):
    path = f"/apis/{group}/{version}/namespaces/default/widgets"
    _, listed = session.request("GET", path)
    rv = listed["metadata"]["resourceVersion"]
    streams = [WatchStream(server, f"{path}?watch=1&resourceVersion={rv}").start_background(
        keep=lambda e: e.get("type")) for _ in range(watchers)]
    converted_before = stats()
    before = cpu_seconds(server.proc.pid)
    start = time.monotonic()
    for i in range(events):
        status, body = session.request("POST", f"/apis/{group}/v1/namespaces/default/widgets",
                                       {"apiVersion": f"{group}/v1", "kind": "Widget",
                                        "metadata": {"name": f"{prefix}-{i}"},
                                        "spec": {"n": i, "text": "x" * 200}})
        if status != 201:
            raise SystemExit(f"create {prefix}-{i}: {status} {body}")
    got = wait_for(lambda: all(s.count >= events for s in streams), timeout=120,
                   what="every watcher has every event")
    wall = time.monotonic() - start
    cpu = cpu_seconds(server.proc.pid) - before
    conversions = stats() - converted_before
    for s in streams:
        s.close()
    if not got:
        raise SystemExit(f"{group}/{version}: watchers got {[s.count for s in streams]}")
    return {"watchers": watchers, "events": events,
            "webhook_objects_converted": conversions,
            "conversions_per_event": round(conversions / events, 3),
            "kwatch_cpu_us_per_event": round(cpu / events * 1e6, 1),
            "kwatch_cpu_us_per_event_per_watcher": round(cpu / events / watchers * 1e6, 1),
            "seconds": round(wall, 2)}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--binary", default=os.path.join(ROOT, "build", "server", "kwatch-apiserver"))
    p.add_argument("--webhook", default=os.path.join(ROOT, "build", "bench", "kwatch-bench-webhook"))
    p.add_argument("--events", type=int, default=1000)
    args = p.parse_args()
    results = {}
    with TempDir() as tmp:
        webhook, port, bundle = webhook_server(tmp, args.webhook)
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # the bench's own webhook, read for its counter
        server = Server(args.binary).start()
        try:
            session = server.session()
            for group, conversion in (
                    ("hooked.bench.example.com",
                     {"strategy": "Webhook", "webhook": {
                         "conversionReviewVersions": ["v1"],
                         "clientConfig": {"url": f"https://127.0.0.1:{port}/convert",
                                          "caBundle": bundle}}}),
                    ("plain.bench.example.com", {"strategy": "None"})):
                status, body = session.request(
                    "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                    definition(group, conversion))
                if status != 201:
                    raise SystemExit(f"definition {group}: {status} {body}")
                wait_for(lambda g=group: session.request(
                    "GET", f"/apis/{g}/v2/namespaces/default/widgets")[0] == 200,
                    timeout=20, what=f"{group} served")
            stats = lambda: converted(port, context)  # noqa: E731
            n = 0
            for name, group, version in (
                    ("none_stored_v1", "plain.bench.example.com", "v1"),
                    ("none_converted_v2", "plain.bench.example.com", "v2"),
                    ("webhook_stored_v1", "hooked.bench.example.com", "v1"),
                    ("webhook_converted_v2", "hooked.bench.example.com", "v2")):
                phase(server, session, group, version, 1, 100, f"warm{n}", stats)
                n += 1
                results[name] = []
                for watchers in (1, 4, 16):
                    results[name].append(phase(server, session, group, version, watchers,
                                               args.events, f"e{n}", stats))
                    n += 1
        finally:
            server.stop()
            webhook.kill()
            webhook.wait()
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
