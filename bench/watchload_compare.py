#!/usr/bin/env python3
"""kwatch against etcd under two load generators, same parameters, side by side: kwatch-loadgen
(bench/run's) and watchload (../shared/tools/watchload, an independent tool: events scanned, not
parsed; PUT writes; one connection per watcher).

    bench/watchload_compare.py --watchload PATH [--rounds 3] [--watchers 1000] [--rate 100]
                               [--writers 16] [--duration 10] [--object-bytes 1024]
                               [--placement unpinned,pinned] [--tools loadgen,watchload]
                               [--websocket]

PATH is a watchload binary (build it outside the repository:
`cmake -S ../shared/tools/watchload -B /tmp/watchload && cmake --build /tmp/watchload`).
Each round runs, for each placement and tool, kwatch (embedded store) and then etcd, a fresh
server each time; `pinned`: the server on CPU 0 (kwatch with one I/O and one delivery thread, as
bench/run pins it), the load generator on CPU 1 with one thread; `unpinned`: neither pinned,
default threads. Prints one JSON document: every run's server CPU per delivered event, events/s,
write->event p50/p99 and how many watchers got every event, and per placement and tool the
median of kwatch/etcd's CPU per event over the rounds. Only 127.0.0.1 is used; servers are
stopped by PID.
"""
import argparse
import importlib.machinery
import importlib.util
import json
import os
import signal
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bench_run():
    """bench/run as a module: its server starters (Kwatch, Etcd) and loadgen runner."""
    loader = importlib.machinery.SourceFileLoader("bench_run", os.path.join(ROOT, "bench", "run"))
    spec = importlib.util.spec_from_loader("bench_run", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def watchload(br, args, target, server, pinned):
    argv = [args.watchload, "kube" if target == "kwatch" else "etcd"]
    if target == "kwatch":
        argv += ["--url", f"http://127.0.0.1:{server.port}", "--namespace", "default"]
        if args.websocket:
            argv.append("--websocket")
    else:
        argv += ["--endpoints", server.endpoints[0], "--prefix", "/bench/"]
    argv += ["--watchers", str(args.watchers), "--writers", str(args.writers),
             "--rate", str(args.rate), "--duration", str(args.duration),
             "--object-bytes", str(args.object_bytes), "--server-pid", str(server.pid), "--quiet"]
    if pinned:
        argv = ["taskset", "-c", "1"] + argv + ["--threads", "1"]
    br.log("  " + " ".join(argv))
    p = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(f"watchload failed ({p.returncode}): {p.stderr[-3000:]}")
    r = json.loads(p.stdout.strip().splitlines()[-1])
    return {"events_per_s": r.get("events_per_s"), "p50_ms": r.get("p50_ms"),
            "p99_ms": r.get("p99_ms"), "server_cpu_us_per_event": r.get("server_cpu_us_per_event"),
            "min_events_per_watcher": r.get("min_events_per_watcher"),
            "watchers_closed_early": r.get("watchers_closed_early"),
            "client_cpu_s": r.get("client_cpu_s")}


def loadgen(br, suite, args, target, server, pinned):
    extra = {"watchers": args.watchers, "writers": args.writers, "rate": args.rate,
             "duration": args.duration, "object-size": args.object_bytes}
    if pinned:
        extra["threads"] = 1
    if args.websocket and target == "kwatch":
        extra["transport"] = "ws"
    r = br.summarize_watch(suite.run_loadgen(target, server, "watch", extra,
                                             cpu=1 if pinned else None))
    return {"events_per_s": r["events_per_s"], "p50_ms": r["p50_ms"], "p99_ms": r["p99_ms"],
            "server_cpu_us_per_event": r["server_cpu_us_per_event"],
            "events": r["events"], "expected_events": r["expected_events"],
            "ended_early": r["ended_early"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--watchload", required=True, help="the watchload binary")
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--watchers", type=int, default=1000)
    ap.add_argument("--writers", type=int, default=16)
    ap.add_argument("--rate", type=float, default=100, help="writes/s in all (0: saturation)")
    ap.add_argument("--duration", type=float, default=10)
    ap.add_argument("--object-bytes", type=int, default=1024)
    ap.add_argument("--placement", default="unpinned,pinned")
    ap.add_argument("--tools", default="loadgen,watchload")
    ap.add_argument("--websocket", action="store_true",
                    help="kwatch's watches over WebSocket, not chunked HTTP (etcd: gRPC always)")
    ap.add_argument("--kwatch-args", default="", help="more kwatch-apiserver flags")
    args = ap.parse_args()
    br = bench_run()
    suite = br.Suite(argparse.Namespace(build_dir=args.build_dir, quick=True,
                                        kwatch_backend="memory", kwatch_args=args.kwatch_args))
    import atexit
    atexit.register(br.cleanup)
    signal.signal(signal.SIGTERM, br.on_signal)
    signal.signal(signal.SIGINT, br.on_signal)

    runs = []
    for rnd in range(args.rounds):
        for placement in args.placement.split(","):
            pinned = placement == "pinned"
            for tool in args.tools.split(","):
                for target in ("kwatch", "etcd"):
                    server = suite.start(target, cpu=0 if pinned else None,
                                         io_threads=1 if pinned else None)
                    try:
                        run = (watchload(br, args, target, server, pinned) if tool == "watchload"
                               else loadgen(br, suite, args, target, server, pinned))
                    finally:
                        server.stop()
                    run.update(round=rnd, placement=placement, tool=tool, target=target)
                    print(json.dumps(run), file=sys.stderr, flush=True)
                    runs.append(run)

    summary = {}
    for placement in args.placement.split(","):
        for tool in args.tools.split(","):
            ratios, cpu = [], {"kwatch": [], "etcd": []}
            for rnd in range(args.rounds):
                pair = {r["target"]: r for r in runs
                        if r["round"] == rnd and r["placement"] == placement and r["tool"] == tool}
                k, e = (pair[t]["server_cpu_us_per_event"] for t in ("kwatch", "etcd"))
                cpu["kwatch"].append(k)
                cpu["etcd"].append(e)
                if k and e:
                    ratios.append(round(k / e, 3))
            summary[f"{placement}/{tool}"] = {
                "kwatch_cpu_us_per_event": cpu["kwatch"], "etcd_cpu_us_per_event": cpu["etcd"],
                "kwatch_over_etcd": ratios,
                "median_kwatch_over_etcd": statistics.median(ratios) if ratios else None}
    print(json.dumps({"watchers": args.watchers, "websocket": args.websocket,
                      "writers": args.writers, "rate": args.rate,
                      "duration": args.duration, "object_bytes": args.object_bytes,
                      "summary": summary, "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
