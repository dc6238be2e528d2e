#!/usr/bin/python3
"""Many watches on one replica over HTTP/2, as a cluster's kubelets and controllers hold them:
h2load (Debian's nghttp2-client, --groups processes) opens --connections HTTP/2 connections of
--streams watch streams each: pod watches of one node each (`spec.nodeName=node-i`, as kubelets
watch their pods), each node watched by the connections of one group, and one unfiltered pod
watch on each connection of the first group (as controllers watch).
Then a writer patches the pods in turn at --rate writes/s for --hold seconds, while a probe (one
HTTP/2 connection of its own) watches node-0's pods and all pods and times each event from the
write that caused it (the write carries its send time).

    bench/http2_scale.py [--connections 1000] [--streams 100] [--nodes 1000] [--rate 100]
                         [--hold 600]

Reported (one JSON document): the watches the server holds, how many were cut off
(kwatch_watchers_terminated_total) or ended otherwise, RSS before and after they opened (bytes
per idle watch), server CPU per dispatched event over the hold, the probe's write->event p50,
p99 and max for the selective and the unfiltered watch, and the open-file limit the server
reports. The server runs with HTTPS, the embedded store in memory, --log-level=warn,
--max-watches-per-user=0, priority and fairness off and no in-flight limit (100,000 watch
requests arrive in a few seconds; the point here is holding them). Only 127.0.0.1 is used;
every process is stopped by PID.
"""
import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time

import h2.config
import h2.connection
import h2.events

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from https_server import Server, cpu_seconds, rss_bytes, tls  # noqa: E402
NS = "scale"


class Probe(threading.Thread):
    """Two watch streams on one HTTP/2 connection: node-0's pods and all pods. Each event's
    latency is its arrival minus the send time the write put in the pod's annotation."""

    def __init__(self, port, rv):
        super().__init__(daemon=True)
        self.sock = tls(port, ["h2"])
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        self.conn.initiate_connection()
        base = f"/api/v1/namespaces/{NS}/pods?watch=1&resourceVersion={rv}&timeoutSeconds=86400"
        self.paths = {"selective": base + "&fieldSelector=spec.nodeName%3Dnode-0",
                      "unfiltered": base}
        self.ids = {}
        for kind, path in self.paths.items():
            sid = self.conn.get_next_available_stream_id()
            self.conn.send_headers(sid, [(":method", "GET"), (":path", path), (":scheme", "https"),
                                         (":authority", "127.0.0.1")], end_stream=True)
            self.ids[sid] = kind
        self.sock.sendall(self.conn.data_to_send())
        self.latencies = {"selective": [], "unfiltered": [], "unfiltered_pod0": []}
        self.partial = {sid: b"" for sid in self.ids}
        self.ended = []
        self.stop = False

    def run(self):
        self.sock.settimeout(0.5)
        while not self.stop:
            try:
                data = self.sock.recv(1 << 20)
            except socket.timeout:
                continue
            except OSError:
                break
            if not data:
                break
            now = time.time()
            for ev in self.conn.receive_data(data):
                if isinstance(ev, h2.events.DataReceived):
                    self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                    buf = self.partial[ev.stream_id] + ev.data
                    *lines, self.partial[ev.stream_id] = buf.split(b"\n")
                    for line in lines:
                        m = re.search(rb'"bench/sent":"([0-9.]+)"', line)
                        if m:
                            kind = self.ids[ev.stream_id]
                            self.latencies[kind].append(now - float(m.group(1)))
                            # The unfiltered watch's events of node-0's pod, apart: the same
                            # writes the selective watch sees.
                            if kind == "unfiltered" and b'"name":"pod-0"' in line:
                                self.latencies["unfiltered_pod0"].append(now - float(m.group(1)))
                elif isinstance(ev, (h2.events.StreamEnded, h2.events.StreamReset)):
                    self.ended.append(self.ids.get(ev.stream_id))
            self.sock.sendall(self.conn.data_to_send())


def pct(values, q):
    if not values:
        return None
    values = sorted(values)
    return round(values[min(len(values) - 1, int(q * len(values)))] * 1000, 2)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build/server/kwatch-apiserver"))
    ap.add_argument("--connections", type=int, default=1000)
    ap.add_argument("--streams", type=int, default=100)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--groups", type=int, default=10,
                    help="h2load processes; each node is watched by one group's connections")
    ap.add_argument("--rate", type=float, default=100)
    ap.add_argument("--hold", type=float, default=600)
    args = ap.parse_args()
    watches = args.connections * args.streams
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(args.binary, tmp, [
            "--log-level=info", "--enable-priority-and-fairness=false",
            "--max-requests-inflight=0", "--max-mutating-requests-inflight=0",
            f"--http2-max-streams-per-connection={args.streams}"])
        port, client = server.port, server.client
        loads = []
        try:
            limit_line = next((l.strip() for l in server.log().splitlines() if "open files" in l),
                              None)
            client.request("POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
            for i in range(args.nodes):
                status, body = client.request("POST", f"/api/v1/namespaces/{NS}/pods", {
                    "metadata": {"name": f"pod-{i}", "annotations": {"bench/sent": "0"}},
                    "spec": {"nodeName": f"node-{i}",
                             "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}})
                if status != 201:
                    raise SystemExit(f"cannot create a pod: {status} {body[:200]!r}")
            _, body = client.request("GET", f"/api/v1/namespaces/{NS}/pods?limit=1")
            rv = json.loads(body)["metadata"]["resourceVersion"]
            base_watchers = client.metric("kwatch_watchers")
            time.sleep(1)
            rss_before = rss_bytes(server.proc.pid)
            # Every h2load client (connection) walks its URI file from the top, one URI per
            # stream: so each of --groups h2load processes gets its own file. Group 0's
            # connections hold one unfiltered watch each (controllers'); every other stream is
            # a node watch (kubelets'), the nodes spread over the groups, each watched by the
            # connections of one group.
            base = (f"https://127.0.0.1:{port}/api/v1/namespaces/{NS}/pods?watch=1"
                    f"&resourceVersion={rv}&timeoutSeconds=86400")
            groups = args.groups
            per_group = args.connections // groups
            loads = []
            started = time.monotonic()
            node = 0
            for g in range(groups):
                uris = os.path.join(tmp, f"uris-{g}")
                with open(uris, "w") as f:
                    lines = [base] if g == 0 else []
                    while len(lines) < args.streams:
                        lines.append(f"{base}&fieldSelector=spec.nodeName%3Dnode-{node % args.nodes}")
                        node += 1
                    f.write("\n".join(lines) + "\n")
                loads.append(subprocess.Popen(
                    ["h2load", "-c", str(per_group), "-m", str(args.streams),
                     "-n", str(per_group * args.streams), "-t", "1", "-i", uris],
                    stdout=open(os.path.join(tmp, f"h2load-{g}.out"), "w"),
                    stderr=subprocess.STDOUT))
            watches = per_group * groups * args.streams
            load = loads[0]
            deadline = time.monotonic() + 300
            while client.metric("kwatch_watchers") - base_watchers < watches:
                if time.monotonic() > deadline or any(l.poll() is not None for l in loads):
                    with open(os.path.join(tmp, "h2load-0.out")) as f:
                        out = f.read()[-2000:]
                    raise SystemExit(f"only {client.metric('kwatch_watchers') - base_watchers:.0f} "
                                     f"watches opened; h2load:\n{out}")
                time.sleep(1)
            open_s = time.monotonic() - started
            time.sleep(5)
            held = client.metric("kwatch_watchers") - base_watchers
            rss_after = rss_bytes(server.proc.pid)
            probe = Probe(port, rv)
            probe.start()
            time.sleep(1)
            cpu0 = cpu_seconds(server.proc.pid)
            ev0 = client.metric("kwatch_watch_events_dispatched_total")
            term0 = client.metric("kwatch_watchers_terminated_total")
            writes = int(args.rate * args.hold)
            t0 = time.monotonic()
            behind = 0
            write_latencies = {"pod-0": [], "others": []}
            for i in range(writes):
                target = t0 + i / args.rate
                delay = target - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                elif delay < -1:
                    behind += 1
                # node-0's pod every 10th write, so the selective probe sees a steady stream.
                n = 0 if i % 10 == 0 else i % args.nodes
                sent = time.time()
                status, body = client.request(
                    "PATCH", f"/api/v1/namespaces/{NS}/pods/pod-{n}",
                    {"metadata": {"annotations": {"bench/sent": f"{sent:.6f}"}}})
                write_latencies["pod-0" if n == 0 else "others"].append(time.time() - sent)
                if status != 200:
                    raise SystemExit(f"a write failed: {status} {body[:200]!r}")
            write_s = time.monotonic() - t0
            time.sleep(2)
            cpu1 = cpu_seconds(server.proc.pid)
            ev1 = client.metric("kwatch_watch_events_dispatched_total")
            term1 = client.metric("kwatch_watchers_terminated_total")
            still = client.metric("kwatch_watchers") - base_watchers
            probe.stop = True
            events = ev1 - ev0
            result = {
                "watches_requested": watches, "connections": per_group * groups,
                "h2load_groups": groups,
                "streams_per_connection": args.streams, "nodes": args.nodes,
                "watches_held": held, "watches_at_end": still,
                "opened_in_s": round(open_s, 1),
                "watchers_terminated": term1 - term0, "probe_streams_ended": probe.ended,
                "rss_before": rss_before, "rss_after": rss_after,
                "bytes_per_idle_watch": round((rss_after - rss_before) / max(held, 1)),
                "writes": writes, "write_seconds": round(write_s, 1),
                "writes_per_s": round(writes / write_s, 1), "writer_behind_1s": behind,
                "events_dispatched": events,
                "server_cpu_s": round(cpu1 - cpu0, 2),
                "server_cpu_us_per_event": round((cpu1 - cpu0) * 1e6 / max(events, 1), 2),
                "server_cores_busy": round((cpu1 - cpu0) / write_s, 2),
                "selective_p50_ms": pct(probe.latencies["selective"], 0.5),
                "selective_p99_ms": pct(probe.latencies["selective"], 0.99),
                "selective_max_ms": pct(probe.latencies["selective"], 1.0),
                "selective_events": len(probe.latencies["selective"]),
                "unfiltered_p50_ms": pct(probe.latencies["unfiltered"], 0.5),
                "unfiltered_p99_ms": pct(probe.latencies["unfiltered"], 0.99),
                "unfiltered_max_ms": pct(probe.latencies["unfiltered"], 1.0),
                "unfiltered_events": len(probe.latencies["unfiltered"]),
                "write_pod0_p50_ms": pct(write_latencies["pod-0"], 0.5),
                "write_pod0_p99_ms": pct(write_latencies["pod-0"], 0.99),
                "write_others_p50_ms": pct(write_latencies["others"], 0.5),
                "write_others_p99_ms": pct(write_latencies["others"], 0.99),
                "unfiltered_pod0_p50_ms": pct(probe.latencies["unfiltered_pod0"], 0.5),
                "unfiltered_pod0_p99_ms": pct(probe.latencies["unfiltered_pod0"], 0.99),
                "open_files": limit_line,
                "server_alive": server.proc.poll() is None,
            }
            print(json.dumps(result, indent=1))
        finally:
            for l in loads:
                if l.poll() is None:
                    l.kill()
                    l.wait()
            server.stop()


if __name__ == "__main__":
    main()
