#!/usr/bin/env python3
"""What a flood from one user at a low priority level does to another user's latency, with API
Priority and Fairness on and off.

    bench/priority_and_fairness.py [--binary build/server/kwatch-apiserver] [--seconds 10]
                                   [--flood slow|cpu] [--flooders 16] [--readonly 8] [--mutating 4]

Starts kwatch-apiserver on a free loopback port (embedded store, in memory; tokens for three
users) for each of: APF on and off (--enable-priority-and-fairness), with and without the flood,
--rounds times, alternating. With APF on, the flooding user's FlowSchema sends it to a level
`low` (5 shares, no lending, no borrowing, queues) and the victim's to kube's `workload-high`.
The flood: --flooders threads listing 2,000 ConfigMaps back to back from a process of its own at
nice 19 (the clients share the server's two cores here; elsewhere they would not). `slow`: the
objects are 5 kB (10 MB a list, more than the sockets buffer) and read 16 kB every 20 ms, so the
flood holds requests, and seats, while costing little CPU; `cpu`: 200-byte objects read at once,
so the flood costs the server CPU. The victim: one client reading one ConfigMap back to back on
a kept-alive connection for --seconds; a 429 is retried after its Retry-After, as client-go does,
and the wait counts in that read's latency. --readonly and --mutating are the two in-flight
flags (the server's seats). Prints one JSON document: each run's victim p50/p99/max and
statuses, the flood's served and refused counts, and the median ratios of the victim's p99 with
and without the flood. Only 127.0.0.1 is used; servers are stopped by PID.
"""
import argparse
import http.client
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GROUP = "/apis/flowcontrol.apiserver.k8s.io/v1"


class Server:
    def __init__(self, binary, tokens, apf, readonly, mutating, extra_args=(), preexec_fn=None):
        self.log = tempfile.NamedTemporaryFile(prefix="kwatch-apf-", delete=False)
        self.proc = subprocess.Popen(
            [binary, "--port=0", "--bind-address=127.0.0.1", "--io-threads=2", "--secure-port=0",
             "--authorization-mode=AlwaysAllow", "--anonymous-auth=false",
             f"--token-auth-file={tokens}", f"--enable-priority-and-fairness={str(apf).lower()}",
             f"--max-requests-inflight={readonly}", f"--max-mutating-requests-inflight={mutating}", *extra_args],
            stdout=self.log, stderr=subprocess.STDOUT, preexec_fn=preexec_fn)
        deadline = time.monotonic() + 20
        self.port = None
        while self.port is None:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise SystemExit("kwatch-apiserver did not start")
            with open(self.log.name) as f:
                for line in f:
                    if "serving on http://127.0.0.1:" in line:
                        self.port = int(line.rsplit(":", 1)[1].split()[0].strip("/"))
            time.sleep(0.05)
        while self.request("GET", "/readyz", "admin")[0] != 200:
            time.sleep(0.05)

    def request(self, method, path, token, body=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        try:
            conn.request(method, path, body=json.dumps(body) if body is not None else None,
                         headers={"Content-Type": "application/json",
                                  "Authorization": f"Bearer {token}"})
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        os.unlink(self.log.name)


def configure(server, slow):
    """ConfigMaps to flood with (2,000 of 200 bytes; slow: of 5 kB, 10 MB in all, more than the
    sockets buffer), one for the victim; with APF, the two FlowSchemas."""
    for ns in ("flood", "victim"):
        server.request("POST", "/api/v1/namespaces", "admin", {"metadata": {"name": ns}})
    for i in range(2000):
        server.request("POST", "/api/v1/namespaces/flood/configmaps", "admin",
                       {"metadata": {"name": f"cm-{i}"}, "data": {"v": "x" * (5000 if slow else 200)}})
    server.request("POST", "/api/v1/namespaces/victim/configmaps", "admin",
                   {"metadata": {"name": "target"}, "data": {"v": "y"}})
    level = {"metadata": {"name": "low",
                          "annotations": {"flowcontrol.kwatch.io/cpu-priority": "low"}},
             "spec": {"type": "Limited", "limited": {
                 "nominalConcurrencyShares": 5, "lendablePercent": 0, "borrowingLimitPercent": 0,
                 "limitResponse": {"type": "Queue", "queuing": {
                     "queues": 16, "handSize": 4, "queueLengthLimit": 50}}}}}

    def schema(name, user, level_name):
        return {"metadata": {"name": name},
                "spec": {"priorityLevelConfiguration": {"name": level_name},
                         "matchingPrecedence": 500, "distinguisherMethod": {"type": "ByUser"},
                         "rules": [{"subjects": [{"kind": "User", "user": {"name": user}}],
                                    "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"],
                                                       "resources": ["*"], "namespaces": ["*"],
                                                       "clusterScope": True}]}]}}
    server.request("POST", f"{GROUP}/prioritylevelconfigurations", "admin", level)
    server.request("POST", f"{GROUP}/flowschemas", "admin", schema("flooder", "flooder", "low"))
    server.request("POST", f"{GROUP}/flowschemas", "admin",
                   schema("victim", "victim", "workload-high"))


def timed_read(conn, statuses, end):
    """One victim read until it is answered, a 429 being retried after its Retry-After as
    client-go does (the wait counts); its latency in seconds."""
    headers = {"Authorization": "Bearer victim"}
    t0 = time.perf_counter()
    while True:
        conn.request("GET", "/api/v1/namespaces/victim/configmaps/target", headers=headers)
        resp = conn.getresponse()
        resp.read()
        statuses[resp.status] = statuses.get(resp.status, 0) + 1
        if resp.status != 429:
            break
        if time.monotonic() >= end:
            # Never served within the run: counted as waiting until its end ("starved").
            statuses["starved"] = statuses.get("starved", 0) + 1
            break
        time.sleep(float(resp.getheader("Retry-After") or 1))
    return time.perf_counter() - t0


def victim_latencies(port, seconds):
    """The victim's reads for `seconds`, each one's latency (timed_read)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    out, statuses = [], {}
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        out.append(timed_read(conn, statuses, end))
    conn.close()
    return out, statuses


def lowest_cpu_priority():
    """The flood's client process: SCHED_IDLE (any other thread that wakes preempts it at once;
    nice 19 alone still runs out its time slice first, up to a scheduler slice of delay for the
    victim's client and server), nice 19 where the policy cannot be set."""
    os.nice(19)
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        pass


def wait_for_schemas(server):
    """Until the FlowSchemas are in force (the response names the victim's by UID)."""
    status, body = server.request("GET", f"{GROUP}/flowschemas/victim", "admin")
    uid = json.loads(body)["metadata"]["uid"]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        conn.request("GET", "/version", headers={"Authorization": "Bearer victim"})
        resp = conn.getresponse()
        resp.read()
        conn.close()
        if resp.getheader("X-Kubernetes-PF-FlowSchema-UID") == uid:
            return
        time.sleep(0.05)


def quantiles(latencies):
    """Count, p50, p99 and max in ms; None for each quantile when there was no read."""
    latencies = sorted(latencies)
    if not latencies:
        return {"requests": 0, "p50_ms": None, "p99_ms": None, "max_ms": None}
    ms = lambda q: round(latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000, 3)  # noqa: E731
    return {"requests": len(latencies), "p50_ms": ms(0.5), "p99_ms": ms(0.99),
            "max_ms": round(latencies[-1] * 1000, 3)}


def run_paired(binary, tokens, apf, args):
    """One server, one flood process for the whole run, stopped (SIGSTOP) and resumed (SIGCONT)
    every --window seconds: the victim's reads in flooded and quiet windows of the same server,
    interleaved, so that neither a server's start nor the machine's drift over minutes tells the
    two apart. The first --guard seconds after each switch are not counted (the flood's lists
    in flight finish, or its clients start again)."""
    server = Server(binary, tokens, apf, args.readonly, args.mutating, args.server_arg)
    flood_proc = flood_server = None
    try:
        configure(server, args.flood == "slow")
        if apf:
            wait_for_schemas(server)
        flood_port = server.port
        if args.flood_target == "separate":
            # The floor: the flood served by a second server, all of it at nice 19.
            flood_server = Server(binary, tokens, apf, args.readonly, args.mutating,
                                  args.server_arg,
                                  preexec_fn=lowest_cpu_priority if args.flood_server_idle
                                  else lambda: os.nice(19))
            configure(flood_server, args.flood == "slow")
            flood_port = flood_server.port
        flood_proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--flood-worker", str(flood_port),
             str(args.flooders), args.flood],
            stdout=subprocess.PIPE, preexec_fn=lowest_cpu_priority)
        time.sleep(1)  # every flood client connected and listing
        flood_proc.send_signal(signal.SIGSTOP)
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
        samples = {False: [], True: []}
        statuses = {}
        windows = max(2, int(round(args.seconds * 2 / args.window)))
        run_end = time.monotonic() + windows * args.window + 10
        for w in range(windows):
            flooded = w % 2 == 1
            flood_proc.send_signal(signal.SIGCONT if flooded else signal.SIGSTOP)
            start = time.monotonic()
            count_from, end = start + args.guard, start + args.window
            while time.monotonic() < end:
                # A read counts in the window it began in; a 429's retries may run past it.
                began = time.monotonic()
                took = timed_read(conn, statuses, run_end)
                if began >= count_from:
                    samples[flooded].append(took)
        conn.close()
        flood_proc.send_signal(signal.SIGCONT)
        flood_proc.send_signal(signal.SIGTERM)
        counts = json.loads(flood_proc.communicate(timeout=60)[0] or b"null")
        flood_proc = None
        quiet, flooded = quantiles(samples[False]), quantiles(samples[True])
        return {"apf": apf, "paired": True, "windows": windows, "victim_statuses": statuses,
                "quiet": quiet, "flooded": flooded,
                # No read counted in a flooded window: each was a 429 retried past it.
                "p99_ratio": round(flooded["p99_ms"] / quiet["p99_ms"], 3)
                if flooded["p99_ms"] and quiet["p99_ms"] else None,
                "flood_counts": counts}
    finally:
        if flood_proc:
            flood_proc.send_signal(signal.SIGCONT)
            flood_proc.kill()
        server.stop()
        if flood_server:
            flood_server.stop()


def run(binary, tokens, apf, flood, args):
    server = Server(binary, tokens, apf, args.readonly, args.mutating, args.server_arg)
    flood_server = None
    try:
        configure(server, args.flood == "slow")
        if apf:
            wait_for_schemas(server)
        # The flood comes from its own process at the lowest CPU priority: on a machine whose
        # cores the clients share with the server, what is measured is then the server's
        # isolation of the victim, not the flood's client taking the victim client's core.
        flood_proc = None
        if flood and args.flood_target == "separate":
            # The floor: the flood served by a second server at nice 19, a process of its own.
            flood_server = Server(binary, tokens, apf, args.readonly, args.mutating,
                                  args.server_arg,
                                  preexec_fn=lowest_cpu_priority if args.flood_server_idle
                                  else lambda: os.nice(19))
            configure(flood_server, args.flood == "slow")
        if flood:
            flood_port = flood_server.port if flood_server else server.port
            flood_proc = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--flood-worker", str(flood_port),
                 str(args.flooders), args.flood],
                stdout=subprocess.PIPE, preexec_fn=lowest_cpu_priority)
            time.sleep(1)  # the flood is under way before the victim starts measuring
        latencies, statuses = victim_latencies(server.port, args.seconds)
        counts = None
        if flood_proc:
            flood_proc.send_signal(signal.SIGTERM)
            counts = json.loads(flood_proc.communicate(timeout=60)[0] or b"null")
        q = quantiles(latencies)
        return {"apf": apf, "flood": flood, "victim_requests": q["requests"],
                "victim_statuses": statuses, "victim_p50_ms": q["p50_ms"],
                "victim_p99_ms": q["p99_ms"], "victim_max_ms": q["max_ms"],
                "victim_mean_ms": round(statistics.mean(latencies) * 1000, 3),
                "flood_counts": counts}
    finally:
        server.stop()
        if flood_server:
            flood_server.stop()


def flood_worker(port, threads, kind):
    """--flood-worker: `threads` clients listing the flood namespace until SIGTERM; prints counts.
    cpu: each reads its answer at once; slow: 16 kB every 20 ms (a slow client: the server holds
    the request, and its seat, until the answer is written)."""
    stop = threading.Event()
    counts = {"served": 0, "refused": 0, "other": 0}
    lock = threading.Lock()

    def flooder():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        headers = {"Authorization": "Bearer flooder"}
        while not stop.is_set():
            try:
                conn.request("GET", "/api/v1/namespaces/flood/configmaps", headers=headers)
                resp = conn.getresponse()
                if kind == "slow" and resp.status == 200:
                    while resp.read(16384) and not stop.is_set():
                        time.sleep(0.02)
                    if stop.is_set():
                        raise ConnectionError("stopped")
                else:
                    resp.read()
                key = "served" if resp.status == 200 else "refused" if resp.status == 429 else "other"
            except (ConnectionError, http.client.HTTPException, OSError):
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
                key = "other"
            with lock:
                counts[key] += 1
        conn.close()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    workers = [threading.Thread(target=flooder) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    print(json.dumps(counts))


def write_tokens(tmp):
    tokens = os.path.join(tmp, "tokens.csv")
    with open(tokens, "w") as f:
        f.write('admin,admin,1,"system:masters"\nflooder,flooder,2\nvictim,victim,3\n')
    return tokens


def paired_main(args):
    with tempfile.TemporaryDirectory() as tmp:
        tokens = write_tokens(tmp)
        runs = []
        for _ in range(args.rounds):
            for apf in {"both": (True, False), "on": (True,), "off": (False,)}[args.apf]:
                r = run_paired(args.binary, tokens, apf, args)
                print(json.dumps(r), file=sys.stderr, flush=True)
                runs.append(r)

    def ratio(apf):
        mine = [r["p99_ratio"] or float("inf") for r in runs if r["apf"] == apf]
        return round(statistics.median(mine), 3) if mine else None
    print(json.dumps({
        "flood": args.flood, "paired": True, "seats": args.readonly + args.mutating,
        "flooders": args.flooders, "seconds": args.seconds, "window": args.window,
        "flood_target": args.flood_target, "flood_server_idle": args.flood_server_idle,
        "guard": args.guard, "server_args": args.server_arg,
        "apf_on_p99_ratio": ratio(True), "apf_off_p99_ratio": ratio(False),
        "apf_on_p99_ratios": [r["p99_ratio"] for r in runs if r["apf"]],
        "runs": runs,
    }, indent=1))


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--flood-worker":
        flood_worker(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
        return
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build/server/kwatch-apiserver"))
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--flooders", type=int, default=16)
    ap.add_argument("--readonly", type=int, default=8)
    ap.add_argument("--mutating", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2, help="each configuration, alternating")
    ap.add_argument("--flood", choices=("cpu", "slow"), default="slow",
                    help="cpu: lists read at once (the flood costs CPU); slow: lists read slowly "
                         "(the flood holds seats)")
    ap.add_argument("--server-arg", action="append", default=[],
                    help="one more flag for kwatch-apiserver (repeatable)")
    ap.add_argument("--flood-target", choices=("same", "separate"), default="same",
                    help="separate: the flood goes to a second server, all of it at nice 19 "
                         "(what sharing the cores costs the victim, whatever one server does)")
    ap.add_argument("--flood-server-idle", action="store_true",
                    help="with --flood-target separate: that server runs SCHED_IDLE, not nice 19")
    ap.add_argument("--apf", choices=("both", "on", "off"), default="both",
                    help="run with APF on, off or both (the ratio of a side not run is null)")
    ap.add_argument("--paired", action="store_true",
                    help="one server per run, its flood stopped and resumed every --window "
                         "seconds: flooded and quiet windows interleaved (--seconds of each)")
    ap.add_argument("--window", type=float, default=1.0, help="with --paired: seconds per window")
    ap.add_argument("--guard", type=float, default=0.2,
                    help="with --paired: seconds not counted after each switch")
    args = ap.parse_args()
    if args.paired:
        paired_main(args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        tokens = write_tokens(tmp)
        runs = []
        for _ in range(args.rounds):
            for apf in {"both": (True, False), "on": (True,), "off": (False,)}[args.apf]:
                for flood in (False, True):
                    r = run(args.binary, tokens, apf, flood, args)
                    print(json.dumps(r), file=sys.stderr, flush=True)
                    runs.append(r)

    def p99(apf, flood):
        return statistics.median(r["victim_p99_ms"] for r in runs
                                 if r["apf"] == apf and r["flood"] == flood)

    def ratio(apf):
        if not any(r["apf"] == apf for r in runs):
            return None
        return round(p99(apf, True) / p99(apf, False), 3)
    summary = {
        "flood": args.flood, "seats": args.readonly + args.mutating, "flooders": args.flooders,
        "seconds": args.seconds, "flood_target": args.flood_target,
        "flood_server_idle": args.flood_server_idle,
        "server_args": args.server_arg,
        "apf_on_p99_ratio": ratio(True),
        "apf_off_p99_ratio": ratio(False),
        "runs": runs,
    }
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
