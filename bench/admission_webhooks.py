#!/usr/bin/env python3
"""What admission webhooks cost a write: kwatch's CPU and the write's latency, with one mutating
and one validating webhook on loopback, against the same writes with none.

    bench/admission_webhooks.py [--binary build/server/kwatch-apiserver] [--writes 2000]

Starts a kwatch-apiserver on a free loopback port (embedded store, in memory) and
kwatch-bench-webhook (bench/webhook_server.cpp: HTTPS with its own CA, keep-alive, one thread)
answering every review at once: /mutate adds a label with a JSONPatch, /validate allows. Creates `--writes` ConfigMaps over `--clients` keep-alive
connections (each one write after another), first with no webhook configuration, then with both in force, and reads
kwatch's CPU time (utime + stime of its process) around each phase. The added CPU per write is
kwatch's own: the webhook server and this client run in other processes. Prints one JSON
document. Only 127.0.0.1 is used; the server is stopped by PID on exit.
"""
import argparse
import base64
import json
import os
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))

from harness import Server, TempDir, wait_for  # noqa: E402
from pki import CA, server_certificate  # noqa: E402

def webhook_server(directory, binary):
    """Starts kwatch-bench-webhook (C++, answers at once) with a certificate for 127.0.0.1;
    returns (process, port, caBundle)."""
    ca = CA(directory, "bench-webhook-ca")
    cert, key = server_certificate(ca, "bench-webhook")
    port_file = os.path.join(directory, "webhook.port")
    proc = subprocess.Popen([binary, "--cert", cert, "--key", key, "--port-file", port_file])
    wait_for(lambda: os.path.exists(port_file) and open(port_file).read().strip(), timeout=10,
             what="the webhook listening")
    with open(port_file) as f:
        port = int(f.read())
    with open(ca.cert_file, "rb") as f:
        bundle = base64.b64encode(f.read()).decode()
    return proc, port, bundle


def configuration(kind, name, url, bundle):
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
            "metadata": {"name": name},
            "webhooks": [{"name": name + ".bench.example.com", "admissionReviewVersions": ["v1"],
                          "sideEffects": "None",
                          "clientConfig": {"url": url, "caBundle": bundle},
                          "rules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                     "operations": ["CREATE"], "resources": ["configmaps"]}]}]}


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def phase(server, prefix, writes, clients):
    """`writes` creates split over `clients` keep-alive connections, each its own thread."""
    latencies = []
    failures = []
    lock = threading.Lock()

    def writer(c):
        session = server.session()
        mine = []
        for i in range(c, writes, clients):
            t0 = time.monotonic()
            status, body = session.request("POST", "/api/v1/namespaces/default/configmaps",
                                           {"metadata": {"name": f"{prefix}-{i}"},
                                            "data": {"k": "v"}})
            mine.append(time.monotonic() - t0)
            if status != 201:
                failures.append(f"write {prefix}-{i}: {status} {body}")
                return
        with lock:
            latencies.extend(mine)
    threads = [threading.Thread(target=writer, args=(c,)) for c in range(clients)]
    before = cpu_seconds(server.proc.pid)
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - start
    if failures:
        raise SystemExit(failures[0])
    cpu = cpu_seconds(server.proc.pid) - before
    latencies.sort()
    return {"writes": writes, "clients": clients,
            "kwatch_cpu_us_per_write": round(cpu / writes * 1e6, 1),
            "writes_per_second": round(writes / wall, 1),
            "latency_p50_us": round(statistics.median(latencies) * 1e6),
            "latency_p99_us": round(latencies[int(len(latencies) * 0.99)] * 1e6)}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--binary", default=os.path.join(ROOT, "build", "server", "kwatch-apiserver"))
    p.add_argument("--webhook", default=os.path.join(ROOT, "build", "bench", "kwatch-bench-webhook"))
    p.add_argument("--writes", type=int, default=2000)
    p.add_argument("--clients", type=int, default=1,
                   help="concurrent writers (1: the CPU of one write alone, wake-ups included)")
    args = p.parse_args()
    with TempDir() as tmp:
        webhook, port, bundle = webhook_server(tmp, args.webhook)
        url = f"https://127.0.0.1:{port}"
        server = Server(args.binary).start()
        try:
            session = server.session()
            phase(server, "warm", 200, args.clients)
            none = phase(server, "plain", args.writes, args.clients)
            for kind, name, path in (("MutatingWebhookConfiguration", "mutate", "/mutate"),
                                     ("ValidatingWebhookConfiguration", "validate", "/validate")):
                status, body = session.request(
                    "POST", f"/apis/admissionregistration.k8s.io/v1/{kind.lower()}s",
                    configuration(kind, name, url + path, bundle))
                if status != 201:
                    raise SystemExit(f"{kind}: {status} {body}")
            n = [0]

            def in_force():
                n[0] += 1
                _, obj = session.request("POST", "/api/v1/namespaces/default/configmaps",
                                         {"metadata": {"name": f"probe-{n[0]}"}})
                return (obj.get("metadata", {}).get("labels") or {}).get("mutated") == "yes"
            wait_for(in_force, timeout=10, what="both webhooks in force")
            phase(server, "warm-hooked", 200, args.clients)
            hooked = phase(server, "hooked", args.writes, args.clients)
        finally:
            server.stop()
            webhook.kill()
            webhook.wait()
    added = round(hooked["kwatch_cpu_us_per_write"] - none["kwatch_cpu_us_per_write"], 1)
    print(json.dumps({"no_webhooks": none, "mutating_and_validating_webhook": hooked,
                      "added_kwatch_cpu_us_per_write": added}, indent=1))


if __name__ == "__main__":
    main()
