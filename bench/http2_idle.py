#!/usr/bin/python3
"""Memory per idle watch: HTTP/2 streams (many per connection) against HTTP/1.1 connections
(one per watch), on one server, side by side.

    bench/http2_idle.py [--binary build/server/kwatch-apiserver] [--watches 4000]
                        [--streams-per-connection 100] [--rounds 2]

For each transport and round: starts kwatch-apiserver (HTTPS on a free loopback port, embedded
store in memory), opens --watches watches of ConfigMaps in one namespace (HTTP/2: that many
streams, --streams-per-connection on each connection; HTTP/1.1 over TLS: a connection each),
waits until every watch's head has come and the server's watcher count says so, and reads the
server's RSS before and after. Then one write, and the time until every watch has its event.
Prints one JSON document: bytes of RSS per watch and the write's fan-out time, per run, and
the medians. Needs python3-h2. Only 127.0.0.1 is used; servers are stopped by PID.
"""
import argparse
import json
import os
import selectors
import statistics
import sys
import tempfile
import time

import h2.config
import h2.connection
import h2.events
import h2.settings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from https_server import Server, rss_bytes, tls  # noqa: E402


def open_h2(port, n, per_conn, path):
    conns = []
    while n > 0:
        k = min(n, per_conn)
        s = tls(port, ["h2"])
        c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        c.initiate_connection()
        s.sendall(c.data_to_send())
        # The server's SETTINGS (its stream limit) first.
        while c.remote_settings.max_concurrent_streams < k:
            for ev in c.receive_data(s.recv(65536)):
                pass
            s.sendall(c.data_to_send())
        for _ in range(k):
            sid = c.get_next_available_stream_id()
            c.send_headers(sid, [(":method", "GET"), (":path", path), (":scheme", "https"),
                                 (":authority", "127.0.0.1")], end_stream=True)
        s.sendall(c.data_to_send())
        conns.append({"sock": s, "conn": c, "heads": 0, "events": 0, "want": k})
        n -= k
    return conns


def pump_h2(conns, done, timeout):
    deadline = time.monotonic() + timeout
    sel = selectors.DefaultSelector()
    for c in conns:
        sel.register(c["sock"], selectors.EVENT_READ, c)
    while not done() and time.monotonic() < deadline:
        for key, _ in sel.select(0.5):
            c, s = key.data, key.fileobj
            data = s.recv(1 << 20)
            if not data:
                raise SystemExit("an HTTP/2 connection closed")
            for ev in c["conn"].receive_data(data):
                if isinstance(ev, h2.events.ResponseReceived):
                    c["heads"] += 1
                elif isinstance(ev, h2.events.DataReceived):
                    c["events"] += ev.data.count(b"\n")
                    c["conn"].acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            s.sendall(c["conn"].data_to_send())
    sel.close()
    return done()


def open_h1(port, n, path):
    socks = []
    for _ in range(n):
        s = tls(port, ["http/1.1"])
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        socks.append({"sock": s, "buf": b"", "heads": 0, "events": 0})
    return socks


def pump_h1(socks, done, timeout):
    deadline = time.monotonic() + timeout
    sel = selectors.DefaultSelector()
    for c in socks:
        sel.register(c["sock"], selectors.EVENT_READ, c)
    while not done() and time.monotonic() < deadline:
        for key, _ in sel.select(0.5):
            c, s = key.data, key.fileobj
            data = s.recv(65536)
            if not data:
                raise SystemExit("an HTTP/1.1 watch closed")
            c["buf"] += data
            if not c["heads"] and b"\r\n\r\n" in c["buf"]:
                c["heads"] = 1
                c["buf"] = c["buf"].split(b"\r\n\r\n", 1)[1]
            if c["heads"]:
                c["events"] += c["buf"].count(b"\n") - c["buf"].count(b"\r\n")
                c["buf"] = b""
    sel.close()
    return done()


def idle_watch_path(client):
    """Makes namespace `idle`; the path of a watch of its ConfigMaps from now on."""
    client.request("POST", "/api/v1/namespaces", {"metadata": {"name": "idle"}})
    _, body = client.request("GET", "/api/v1/namespaces/idle/configmaps")
    rv = json.loads(body)["metadata"]["resourceVersion"]
    return f"/api/v1/namespaces/idle/configmaps?watch=1&resourceVersion={rv}"


def run(binary, transport, n, per_conn):
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(binary, tmp, ["--log-level=warn",
                                      f"--http2-max-streams-per-connection={per_conn}"])
        client = server.client
        try:
            path = idle_watch_path(client)
            base_watchers = client.metric("kwatch_watchers")
            time.sleep(1)
            before = rss_bytes(server.proc.pid)
            if transport == "h2":
                clients = open_h2(server.port, n, per_conn, path)
                pump = pump_h2
            else:
                clients = open_h1(server.port, n, path)
                pump = pump_h1
            ok = pump(clients, lambda: sum(c["heads"] for c in clients) >= n, 120)
            deadline = time.monotonic() + 60
            while client.metric("kwatch_watchers") - base_watchers < n and time.monotonic() < deadline:
                time.sleep(0.2)
            time.sleep(1)
            after = rss_bytes(server.proc.pid)
            events_before = sum(c["events"] for c in clients)
            start = time.monotonic()
            client.request("POST", "/api/v1/namespaces/idle/configmaps", {"metadata": {"name": "x"}})
            delivered = pump(clients, lambda: sum(c["events"] for c in clients) - events_before >= n, 60)
            fan_out = time.monotonic() - start
            for c in clients:
                c["sock"].close()
            return {"transport": transport, "watches": n, "all_open": ok, "all_delivered": delivered,
                    "connections": len(clients), "rss_before": before, "rss_after": after,
                    "bytes_per_watch": round((after - before) / n),
                    "fan_out_ms": round(fan_out * 1000, 1)}
        finally:
            server.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build/server/kwatch-apiserver"))
    ap.add_argument("--watches", type=int, default=4000)
    ap.add_argument("--streams-per-connection", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    runs = []
    for _ in range(args.rounds):
        for transport in ("h2", "http/1.1"):
            r = run(args.binary, transport, args.watches, args.streams_per_connection)
            print(json.dumps(r), file=sys.stderr, flush=True)
            runs.append(r)
    summary = {"watches": args.watches, "streams_per_connection": args.streams_per_connection,
               "runs": runs}
    for t in ("h2", "http/1.1"):
        summary[f"{t}_bytes_per_watch"] = statistics.median(
            r["bytes_per_watch"] for r in runs if r["transport"] == t)
        summary[f"{t}_fan_out_ms"] = statistics.median(
            r["fan_out_ms"] for r in runs if r["transport"] == t)
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
