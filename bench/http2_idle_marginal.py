#!/usr/bin/python3
"""Memory per idle HTTP/2 watch at the margin: on one server, the RSS after a first group of
watches and again after a second group, so that what the first watches pay once (the schemas
and caches a watch loads, the allocator's first arenas) is not spread over the second.

    bench/http2_idle_marginal.py BINARY FIRST MORE

Streams of ConfigMaps in one namespace, 100 per HTTP/2 connection (bench/http2_idle.py's
clients). Prints {"first_per_watch": bytes, "marginal_per_watch": bytes}. Needs python3-h2.
Only 127.0.0.1 is used; the server is stopped by PID.
"""
import sys, time, json, os, subprocess, tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from https_server import Server, rss_bytes
import http2_idle as hi
binary = sys.argv[1]
first, more = int(sys.argv[2]), int(sys.argv[3])
with tempfile.TemporaryDirectory() as tmp:
    server = Server(binary, tmp, ["--log-level=warn", "--http2-max-streams-per-connection=100"])
    c = server.client
    try:
        path = hi.idle_watch_path(c)
        def open_n(n, have):
            cl = hi.open_h2(server.port, n, 100, path)
            assert hi.pump_h2(cl, lambda: sum(x["heads"] for x in cl) >= n, 120)
            while c.metric("kwatch_watchers") < have + n: time.sleep(0.2)
            time.sleep(1)
            return cl
        r0 = rss_bytes(server.proc.pid)
        a = open_n(first, 0)
        r1 = rss_bytes(server.proc.pid)
        b = open_n(more, first)
        r2 = rss_bytes(server.proc.pid)
        print(json.dumps({"first_per_watch": round((r1 - r0) / first), "marginal_per_watch": round((r2 - r1) / more)}))
        for x in a + b: x["sock"].close()
    finally:
        server.stop()
