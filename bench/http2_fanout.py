#!/usr/bin/python3
"""Server CPU and bytes per delivered watch event: JSON over HTTP/1.1, JSON over HTTP/2 and
protobuf and CBOR over HTTP/2, at the same watchers and write rate, on one server build, side by
side.

    bench/http2_fanout.py [--binary build/server/kwatch-apiserver] [--watchers 1000]
                          [--rate 100] [--seconds 10] [--rounds 2]

For each form and round: starts kwatch-apiserver (HTTPS on a free loopback port, embedded store
in memory, --log-level=warn), creates 100 ConfigMaps of about 1 kB, opens --watchers watches of
them (HTTP/1.1: one TLS connection each, read and discarded by a few Python processes;
HTTP/2: `nghttp` processes of Debian's nghttp2-client, 100 streams on each connection, output
discarded), waits until the server counts them all, then updates the ConfigMaps in turn
at --rate writes/s for --seconds from one kept-alive connection. Server CPU (utime+stime) and
the events the server dispatched (kwatch_watch_events_dispatched_total) are read before and
after the writes; the readers' bytes received (rchar of their processes: TLS records included)
too. Prints one JSON document: per run the server CPU per dispatched event (us), bytes per event
and whether every watcher got every event (no watcher terminated), and per form the medians.
Only 127.0.0.1 is used; every process is stopped by PID.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from https_server import Server, cpu_seconds  # noqa: E402
PROTOBUF = "application/vnd.kubernetes.protobuf"
CBOR = "application/cbor"
NS = "fan"


def rchar(pids):
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/io") as f:
                for line in f:
                    if line.startswith("rchar:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


H1_READER = r"""
import socket, ssl, sys, selectors
port, n, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
ctx.set_alpn_protocols(["http/1.1"])
sel = selectors.DefaultSelector()
for _ in range(n):
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="x")
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ)
print("open", flush=True)
while True:
    for key, _ in sel.select():
        try:
            if not key.fileobj.recv(1 << 20):
                sel.unregister(key.fileobj)
        except ssl.SSLWantReadError:
            pass
"""


def run(args, form, tmp):
    server = Server(args.binary, tmp, ["--log-level=warn"], log_name=form.replace("/", "-"))
    port, client = server.port, server.client
    readers = []
    try:
        client.request("POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
        names = [f"cm-{i}" for i in range(100)]
        for name in names:
            client.request("POST", f"/api/v1/namespaces/{NS}/configmaps",
                           {"metadata": {"name": name}, "data": {"v": "x" * 1000}})
        _, body = client.request("GET", f"/api/v1/namespaces/{NS}/configmaps")
        rv = json.loads(body)["metadata"]["resourceVersion"]
        path = (f"/api/v1/namespaces/{NS}/configmaps?watch=1&resourceVersion={rv}"
                f"&timeoutSeconds={int(args.seconds) + 120}")
        base = client.metric("kwatch_watchers")
        if form == "json/http1.1":
            per = 250
            for i in range(0, args.watchers, per):
                readers.append(subprocess.Popen(
                    [sys.executable, "-c", H1_READER, str(port), str(min(per, args.watchers - i)), path],
                    stdout=subprocess.PIPE))
            for r in readers:
                r.stdout.readline()
        else:
            accept = {"protobuf/http2": PROTOBUF, "cbor/http2": CBOR}.get(form, "application/json")
            for i in range(0, args.watchers, 100):
                readers.append(subprocess.Popen(
                    ["nghttp", "-n", "-m", str(min(100, args.watchers - i)), "-t", "600",
                     "-H", f"accept: {accept}", f"https://127.0.0.1:{port}{path}"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        deadline = time.monotonic() + 60
        while client.metric("kwatch_watchers") - base < args.watchers:
            if time.monotonic() > deadline:
                raise SystemExit(f"{form}: the watchers did not all open")
            time.sleep(0.2)
        time.sleep(1)
        pids = [r.pid for r in readers]
        cpu0, bytes0 = cpu_seconds(server.proc.pid), rchar(pids)
        ev0 = client.metric("kwatch_watch_events_dispatched_total")
        term0 = client.metric("kwatch_watchers_terminated_total")
        writes = int(args.rate * args.seconds)
        start = time.monotonic()
        for i in range(writes):
            target = start + i / args.rate
            delay = target - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            name = names[i % len(names)]
            status, body = client.request("PATCH", f"/api/v1/namespaces/{NS}/configmaps/{name}",
                                          {"data": {"v": f"{i:08d}" + "x" * 992}})
            if status != 200:
                raise SystemExit(f"a write failed: {status} {body[:200]!r}")
        # Delivery finishes: the dispatched count reaches writes x watchers, or time runs out.
        want = ev0 + writes * args.watchers
        deadline = time.monotonic() + 30
        while client.metric("kwatch_watch_events_dispatched_total") < want and \
                time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(0.5)
        cpu1, bytes1 = cpu_seconds(server.proc.pid), rchar(pids)
        ev1 = client.metric("kwatch_watch_events_dispatched_total")
        term1 = client.metric("kwatch_watchers_terminated_total")
        events = ev1 - ev0
        return {"form": form, "watchers": args.watchers, "writes": writes,
                "write_seconds": round(time.monotonic() - start, 2), "events": events,
                "all_delivered": events >= writes * args.watchers and term1 == term0,
                "server_cpu_s": round(cpu1 - cpu0, 3),
                "server_cpu_us_per_event": round((cpu1 - cpu0) * 1e6 / max(events, 1), 3),
                "bytes_per_event": round((bytes1 - bytes0) / max(events, 1), 1)}
    finally:
        for r in readers:
            r.kill()
            r.wait()
        server.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build/server/kwatch-apiserver"))
    ap.add_argument("--watchers", type=int, default=1000)
    ap.add_argument("--rate", type=float, default=100)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    forms = ("json/http1.1", "json/http2", "protobuf/http2", "cbor/http2")
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.rounds):
            for form in forms:
                r = run(args, form, tmp)
                print(json.dumps(r), file=sys.stderr, flush=True)
                runs.append(r)
    summary = {"watchers": args.watchers, "rate": args.rate, "seconds": args.seconds, "runs": runs}
    for form in forms:
        mine = [r for r in runs if r["form"] == form]
        summary[form] = {"cpu_us_per_event": statistics.median(r["server_cpu_us_per_event"] for r in mine),
                         "bytes_per_event": statistics.median(r["bytes_per_event"] for r in mine)}
    base = summary["json/http1.1"]["cpu_us_per_event"]
    for form in forms[1:]:
        summary[form]["cpu_ratio_to_json_http1.1"] = round(summary[form]["cpu_us_per_event"] / base, 3)
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
