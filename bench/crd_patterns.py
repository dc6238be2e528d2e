#!/usr/bin/env python3
"""What a CustomResourceDefinition with expensive patterns costs kwatch (issue 25, item 10).

    bench/crd_patterns.py --binary build/server/kwatch-apiserver [--properties 200] [--updates 30]

Starts a kwatch-apiserver (embedded store, in memory, loopback only) and measures:
- creating a definition whose `properties` string properties all have the pattern ^\\pL{100}$:
  the POST's latency, the time until its objects are served, and the server's VmRSS growth;
- `updates` spec updates of it (each changes an enum, so the controller registers a new spec),
  each waited for until an object using the new enum value is accepted: time, and VmRSS after.
Prints one JSON document.
"""
import argparse
import http.client
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "test", "e2e"))
from harness import Server, wait_for  # noqa: E402

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
NAME = "patterned.example.net"
OBJECTS = "/apis/example.net/v1/namespaces/default/patterned"


def request(server, method, path, body=None):
    """As Server.request, with a timeout long enough for the slowest create measured (minutes)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=900)
    try:
        conn.request(method, path, body=json.dumps(body) if body is not None else None,
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        data = resp.read()
    finally:
        conn.close()
    try:
        return resp.status, json.loads(data)
    except ValueError:
        return resp.status, data.decode(errors="replace")


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def definition(properties, marker):
    props = {f"p{i}": {"type": "string", "pattern": "^\\pL{100}$"} for i in range(properties)}
    props["marker"] = {"type": "string", "enum": [marker]}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": NAME},
            "spec": {"group": "example.net", "scope": "Namespaced",
                     "names": {"plural": "patterned", "singular": "patterned", "kind": "Patterned"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {
                                       "type": "object",
                                       "properties": {"spec": {"type": "object",
                                                               "properties": props}}}}}]}}


def accepted(server, marker):
    obj = {"apiVersion": "example.net/v1", "kind": "Patterned",
           "metadata": {"name": f"o-{marker}"}, "spec": {"marker": marker, "p0": "a" * 100}}
    return request(server, "POST", OBJECTS, body=obj)[0] == 201


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--properties", type=int, default=200)
    ap.add_argument("--updates", type=int, default=30)
    args = ap.parse_args()
    server = Server(args.binary).start()
    out = {"properties": args.properties, "updates": args.updates}
    try:
        pid = server.proc.pid
        out["rss_start_kib"] = rss_kib(pid)
        started = time.monotonic()
        status, body = request(server, "POST", CRDS, body=definition(args.properties, "m0"))
        out["create_status"] = status
        out["create_s"] = round(time.monotonic() - started, 3)
        if status != 201:
            out["create_body"] = str(body)[:300]
            print(json.dumps(out, indent=1))
            return
        wait_for(lambda: accepted(server, "m0"), timeout=600, what="the definition to be served")
        out["served_s"] = round(time.monotonic() - started, 3)
        out["rss_served_kib"] = rss_kib(pid)
        started = time.monotonic()
        for u in range(1, args.updates + 1):
            for _ in range(20):  # the controller's status writes race with ours
                status, current = request(server, "GET", f"{CRDS}/{NAME}")
                current["spec"] = definition(args.properties, f"m{u}")["spec"]
                status, body = request(server, "PUT", f"{CRDS}/{NAME}", body=current)
                if status != 409:
                    break
            if status != 200:
                out["update_failed"] = f"{u}: {status} {str(body)[:200]}"
                break
            wait_for(lambda: accepted(server, f"m{u}"), timeout=600, what=f"update {u} served")
        out["updates_s"] = round(time.monotonic() - started, 3)
        out["rss_after_updates_kib"] = rss_kib(pid)
    finally:
        server.stop()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
