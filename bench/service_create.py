#!/usr/bin/python3
"""What a Service's create costs beside a ConfigMap's, on one or more kwatch-apiserver binaries
side by side (alternating runs, so that a noisy machine weighs on all alike): a Service's write
also allocates its addresses (an IPAddress object per cluster IP since ServiceCIDRs, a key per
node port). Prints the p50 and p99 of sequential creates and the Service/ConfigMap ratio of
each run.

    bench/service_create.py [--count N] [--runs R] <kwatch-apiserver> [<kwatch-apiserver> ...]
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "e2e"))
from harness import Server  # noqa: E402


def creates(server, kind, count):
    session = server.session()
    latencies = []
    for i in range(count):
        if kind == "service":
            path = "/api/v1/namespaces/default/services"
            body = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"s{i}"},
                    "spec": {"ports": [{"port": 80}]}}
        else:
            path = "/api/v1/namespaces/default/configmaps"
            body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i}"},
                    "data": {"a": "b"}}
        start = time.perf_counter()
        status, answer = session.request("POST", path, body=body)
        latencies.append((time.perf_counter() - start) * 1e3)
        if status != 201:
            raise SystemExit(f"{kind} create {i}: {status} {answer}")
    latencies.sort()
    return statistics.median(latencies), latencies[int(len(latencies) * 0.99) - 1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=200,
                    help="creates of each kind per run (at most 252: the default range is a /24)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("binaries", nargs="+")
    args = ap.parse_args()
    for run in range(args.runs):
        for binary in args.binaries:
            server = Server(binary).start()
            try:
                cm50, cm99 = creates(server, "configmap", args.count)
                svc50, svc99 = creates(server, "service", args.count)
            finally:
                server.stop()
            print(json.dumps({"binary": binary, "run": run, "configmap_p50_ms": round(cm50, 3),
                              "configmap_p99_ms": round(cm99, 3), "service_p50_ms": round(svc50, 3),
                              "service_p99_ms": round(svc99, 3),
                              "service_over_configmap_p50": round(svc50 / cm50, 2)}), flush=True)


if __name__ == "__main__":
    main()
