#!/usr/bin/env python3
"""What expensive or hostile requests cost kwatch, and what they cost everyone else.

    bench/hostile_requests.py [--binary build/server/kwatch-apiserver] [--finalizers 100000]

Starts a kwatch-apiserver on a free loopback port (embedded store, in memory) and measures:
- a JSON patch of 22 copies of the whole object into itself (refused): latency, server RSS growth;
- a JSON patch of 10,000 inserts at the front of a 100,000-element array (refused): latency;
- a strategic merge patch adding N finalizers (about 3 MiB of body at N=100,000): latency;
- /healthz latency (p50, p99, max) on its own connection while two clients send such strategic
  merge patches back to back, against /healthz on an idle server.
Prints one JSON document. Only 127.0.0.1 is used; the server is stopped by PID on exit.
"""
import argparse
import http.client
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from https_server import rss_bytes  # noqa: E402
CM = "/api/v1/namespaces/default/configmaps"


class Server:
    def __init__(self, binary):
        self.log = tempfile.NamedTemporaryFile(prefix="kwatch-hostile-", delete=False)
        self.proc = subprocess.Popen([binary, "--port=0", "--bind-address=127.0.0.1",
                                      "--io-threads=2", "--log-level=warn",
                                      "--secure-port=0", "--authorization-mode=AlwaysAllow",
                                      "--anonymous-auth=true"],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        # --log-level=warn hides the banner: find the port from the process's sockets.
        deadline = time.monotonic() + 20
        self.port = None
        while self.port is None:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise SystemExit("kwatch-apiserver did not start")
            self.port = self.listening_port()
            time.sleep(0.05)
        while self.request("GET", "/readyz")[0] != 200:
            time.sleep(0.05)

    def listening_port(self):
        inodes = set()
        fd_dir = f"/proc/{self.proc.pid}/fd"
        for fd in os.listdir(fd_dir):
            try:
                m = re.match(r"socket:\[(\d+)\]", os.readlink(os.path.join(fd_dir, fd)))
            except OSError:
                continue
            if m:
                inodes.add(m.group(1))
        with open("/proc/net/tcp") as f:
            for line in f.readlines()[1:]:
                cols = line.split()
                if cols[3] == "0A" and cols[9] in inodes:  # LISTEN
                    return int(cols[1].split(":")[1], 16)
        return None

    def request(self, method, path, body=None, content_type="application/json", timeout=600):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers={"Content-Type": content_type})
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def rss(self):
        return rss_bytes(self.proc.pid)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        os.unlink(self.log.name)


def configmap(name, data=None):
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                       "data": data or {"k": "v"}})


def timed(fn, runs):
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        status = fn()
        out.append((time.perf_counter() - t0, status))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build/server/kwatch-apiserver"))
    ap.add_argument("--finalizers", type=int, default=100000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()

    server = Server(args.binary)
    result = {"binary": args.binary, "finalizers": args.finalizers}
    try:
        server.request("POST", CM, configmap("base"))
        copies = json.dumps([{"op": "copy", "from": "", "path": f"/data/k{i}"} for i in range(22)])
        rss0 = server.rss()
        runs = timed(lambda: server.request("PATCH", CM + "/base", copies,
                                            "application/json-patch+json")[0], args.runs)
        result["copy_amplification"] = {
            "status": runs[-1][1], "median_ms": 1000 * statistics.median(t for t, _ in runs),
            "max_ms": 1000 * max(t for t, _ in runs), "rss_growth_kib": (server.rss() - rss0) >> 10,
            "body_bytes": len(copies)}

        server.request("POST", CM, json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                                               "metadata": {"name": "arr"},
                                               "list": [0] * 100000}))
        inserts = json.dumps([{"op": "add", "path": "/list/0", "value": 1}] * 10000)
        runs = timed(lambda: server.request("PATCH", CM + "/arr", inserts,
                                            "application/json-patch+json")[0], args.runs)
        result["front_inserts"] = {"status": runs[-1][1],
                                   "median_ms": 1000 * statistics.median(t for t, _ in runs)}

        finalizers = [f"example.com/finalizer-{i:07d}" for i in range(args.finalizers)]
        smp = json.dumps({"metadata": {"finalizers": finalizers}})
        server.request("POST", CM, configmap("smp"))

        def strategic(name="smp"):
            return server.request("PATCH", f"{CM}/{name}", smp,
                                  "application/strategic-merge-patch+json")[0]

        runs = timed(strategic, args.runs)
        result["strategic_finalizers"] = {
            "status": runs[-1][1], "body_bytes": len(smp),
            "median_ms": 1000 * statistics.median(t for t, _ in runs)}

        def healthz_latencies(seconds):
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=600)
            out = []
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                t0 = time.perf_counter()
                conn.request("GET", "/healthz")
                conn.getresponse().read()
                out.append(time.perf_counter() - t0)
                time.sleep(0.01)
            conn.close()
            return out

        def summary(lat):
            lat = sorted(lat)
            return {"n": len(lat), "p50_ms": 1000 * lat[len(lat) // 2],
                    "p99_ms": 1000 * lat[min(len(lat) - 1, int(len(lat) * 0.99))],
                    "max_ms": 1000 * lat[-1]}

        result["healthz_idle"] = summary(healthz_latencies(3))
        stop = threading.Event()
        done = []

        def hammer(name):
            server.request("POST", CM, configmap(name))
            while not stop.is_set():
                done.append(strategic(name))

        workers = [threading.Thread(target=hammer, args=(f"busy-{i}",)) for i in range(2)]
        for w in workers:
            w.start()
        loaded = healthz_latencies(10)
        stop.set()
        for w in workers:
            w.join()
        result["healthz_during_two_patch_streams"] = summary(loaded)
        result["healthz_during_two_patch_streams"]["patches_completed"] = len(done)
    finally:
        server.stop()
    json.dump(result, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
