"""The HA control plane under faults (deploy/local-cluster: 3 etcd members, 3 kwatch replicas,
HAProxy), with writers and watchers going through the load balancer while, in turn, a replica is
killed (SIGKILL), a replica is stopped gracefully (SIGTERM), the etcd leader is killed, a follower
is stopped, all of etcd is stopped for a while, and etcd is compacted.

A history checker then asks:
- every watcher saw its events in resourceVersion order and none twice, across reconnects
  (a broken stream resumes from its last resourceVersion; 410 means a re-list);
- every acknowledged write was seen by every watcher, unless a re-list at or after it covered it;
- after the faults every watcher's mirror, and every replica's cache, equals etcd key by key;
- during the graceful stop no write failed and no watch stream ended uncleanly.
It reports each fault's availability (writes that succeeded), its longest gap between successful
writes, reconnects, re-lists and the events re-delivered by them.

Usage: ha_test.py <kwatch-apiserver> [--watchers N] [--etcd-outage S] [--report FILE]
CI runs the short form (200 watchers, 5 s etcd outage); bench/ha-faults the long one.
"""
import argparse
import collections
import http.client
import json
import os
import random
import re
import selectors
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

from harness import Checks, json_exchange

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CLUSTER = os.path.join(ROOT, "deploy", "local-cluster")
NET = 77  # 127.77.0.x: apart from a developer's own local cluster
LB = f"127.{NET}.0.10"
PORT = 6443
NS = "ha"
CMS = f"/api/v1/namespaces/{NS}/configmaps"
KEYS_PER_WRITER = 20
SKIP = 77


def replica_addr(i):
    return f"127.{NET}.0.{20 + i}"


def etcd_endpoint(i):
    return f"http://127.{NET}.0.{30 + i}:2379"


class Cluster:
    def __init__(self, binary, directory):
        self.dir = directory
        self.env = dict(os.environ, KWATCH_BIN=binary)
        self.pki = os.path.join(directory, "pki")

    def run(self, *args, check=True):
        r = subprocess.run([sys.executable, CLUSTER, "--dir", self.dir, "--no-install", *args],
                           env=self.env, capture_output=True, text=True, timeout=180)
        if check and r.returncode != 0:
            raise AssertionError(f"local-cluster {' '.join(args)}: {r.stdout}{r.stderr}")
        return r

    def up(self):
        self.run("up", "--net", str(NET), "--", "--shutdown-delay-duration=3s",
                 "--etcd-compaction-interval=0")

    def etcdctl(self, *args, endpoints=None):
        eps = endpoints or ",".join(etcd_endpoint(i) for i in range(1, 4))
        return subprocess.run(["etcdctl", f"--endpoints={eps}", "--dial-timeout=2s",
                               "--command-timeout=5s", *args],
                              env=dict(os.environ, ETCDCTL_API="3"), capture_output=True, text=True,
                              timeout=30)

    def leader(self):
        """The etcd member (1-3) that leads, or None."""
        for i in range(1, 4):
            r = self.etcdctl("endpoint", "status", "-w", "json", endpoints=etcd_endpoint(i))
            if r.returncode != 0:
                continue
            try:
                st = json.loads(r.stdout)[0]["Status"]
            except (ValueError, KeyError, IndexError):
                continue
            if st["leader"] == st["header"]["member_id"]:
                return i
        return None

    def state(self):
        """etcd's configmaps in NS: name -> mod revision."""
        r = self.etcdctl("get", f"/registry/configmaps/{NS}/", "--prefix", "-w", "json")
        if r.returncode != 0:
            return None
        out = {}
        import base64
        for kv in json.loads(r.stdout).get("kvs", []):
            name = base64.b64decode(kv["key"]).decode().rsplit("/", 1)[-1]
            out[name] = int(kv["mod_revision"])
        return out

    def context(self):
        ctx = ssl.create_default_context(cafile=os.path.join(self.pki, "ca.crt"))
        ctx.load_cert_chain(os.path.join(self.pki, "admin.crt"), os.path.join(self.pki, "admin.key"))
        return ctx


def request(ctx, host, method, path, body=None, timeout=5):
    conn = http.client.HTTPSConnection(host, PORT, context=ctx, timeout=timeout)
    return json_exchange(conn, method, path, body)


class Writers:
    """Writers updating their keys through the balancer; every attempt is recorded with its time
    and outcome, every acknowledged write with its key and resourceVersion."""

    def __init__(self, ctx, n, period):
        self.ctx = ctx
        self.attempts = []  # (time, ok, how it failed: "" / "status NNN" / "timeout" / "connection")
        self.acked = []     # (time, name, rv)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(w, period), daemon=True)
                        for w in range(n)]

    def start(self):
        for t in self.threads:
            t.start()

    def run(self, w, period):
        i = 0
        while not self.stop.is_set():
            name = f"w{w}-{i % KEYS_PER_WRITER}"
            body = {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": name, "namespace": NS}, "data": {"i": str(i)}}
            ok, how = False, ""
            try:
                status, out = request(self.ctx, LB, "PUT", f"{CMS}/{name}", body)
                if status == 404:
                    status, out = request(self.ctx, LB, "POST", CMS, body)
                if status in (200, 201):
                    ok = True
                    with self.lock:
                        self.acked.append((time.monotonic(), name,
                                           int(out["metadata"]["resourceVersion"])))
                else:
                    how = f"status {status}"
            except TimeoutError:
                how = "timeout"
            except (OSError, http.client.HTTPException, ValueError):
                how = "connection"
            with self.lock:
                self.attempts.append((time.monotonic(), ok, how))
            i += 1
            self.stop.wait(period)

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=15)


class Readers:
    """Clients listing from the replicas' caches (resourceVersion=0, as informers list) through
    the balancer; every attempt is recorded with its time and outcome."""

    def __init__(self, ctx, n, period):
        self.ctx = ctx
        self.attempts = []  # (time, ok)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(period,), daemon=True)
                        for _ in range(n)]

    def start(self):
        for t in self.threads:
            t.start()

    def run(self, period):
        while not self.stop.is_set():
            try:
                status, _ = request(self.ctx, LB, "GET", f"{CMS}?resourceVersion=0")
                ok = status == 200
            except (OSError, http.client.HTTPException, ValueError):
                ok = False
            with self.lock:
                self.attempts.append((time.monotonic(), ok))
            self.stop.wait(period)

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=15)


RV = re.compile(rb'"resourceVersion":"(\d+)"')
NAME = re.compile(rb'"name":"([^"]+)"')
TYPE = re.compile(rb'^\{"type":"([A-Z]+)"')
CODE = re.compile(rb'"code":(\d+)')


class Watcher:
    def __init__(self, index):
        self.index = index
        self.sock = None
        self.buf = bytearray()
        self.body = bytearray()
        self.head = None
        self.terminal = False
        self.last_rv = 0
        self.mirror = {}       # name -> rv
        self.seen = set()      # rvs of the events received
        self.relists = []      # list resourceVersions
        self.relist_times = []  # when the re-lists after a 410 came
        self.redelivered = 0   # objects received again by re-lists
        self.violations = []
        self.reconnects = 0
        self.unclean = []      # times of streams that ended without the terminal chunk
        self.next_try = 0.0


class Watchers:
    """N list-then-watch clients through the balancer, read by one thread: resume from the last
    resourceVersion after a broken stream, re-list after 410, as client-go's reflector does."""

    def __init__(self, ctx, n):
        self.ctx = ctx
        self.watchers = [Watcher(i) for i in range(n)]
        self.sel = selectors.DefaultSelector()
        self.lock = threading.Lock()
        self.stop = False
        self.thread = threading.Thread(target=self.run, daemon=True)

    def start(self):
        status, lst = request(self.ctx, LB, "GET", CMS)
        assert status == 200, (status, lst)
        rv = int(lst["metadata"]["resourceVersion"])
        items = {i["metadata"]["name"]: int(i["metadata"]["resourceVersion"]) for i in lst["items"]}
        for w in self.watchers:
            w.last_rv = rv
            w.mirror = dict(items)
            w.relists.append(rv)
            self.connect(w)
        self.thread.start()

    def relist(self, w):
        try:
            status, lst = request(self.ctx, LB, "GET", CMS, timeout=5)
        except (OSError, http.client.HTTPException):
            return False
        if status != 200:
            return False
        rv = int(lst["metadata"]["resourceVersion"])
        w.mirror = {i["metadata"]["name"]: int(i["metadata"]["resourceVersion"])
                    for i in lst["items"]}
        w.redelivered += len(w.mirror)
        w.relists.append(rv)
        w.relist_times.append(time.monotonic())
        w.last_rv = rv
        return True

    def connect(self, w):
        w.buf, w.body, w.head, w.terminal = bytearray(), bytearray(), None, False
        try:
            raw = socket.create_connection((LB, PORT), timeout=3)
            s = self.ctx.wrap_socket(raw, server_hostname=LB)
            s.sendall(f"GET {CMS}?watch=1&allowWatchBookmarks=true&resourceVersion={w.last_rv} "
                      f"HTTP/1.1\r\nHost: {LB}\r\nAccept: application/json\r\n\r\n".encode())
            s.setblocking(False)
        except (OSError, ssl.SSLError):
            w.sock = None
            w.next_try = time.monotonic() + 0.2 + random.random() * 0.3
            return
        w.sock = s
        self.sel.register(s, selectors.EVENT_READ, w)

    def drop(self, w, clean, backoff=0.1):
        if w.sock is not None:
            try:
                self.sel.unregister(w.sock)
            except (KeyError, ValueError):
                pass
            w.sock.close()
            w.sock = None
        if not clean:
            w.unclean.append(time.monotonic())
        w.reconnects += 1
        w.next_try = time.monotonic() + backoff + random.random() * backoff

    def run(self):
        while not self.stop:
            now = time.monotonic()
            with self.lock:
                for w in self.watchers:
                    if w.sock is None and now >= w.next_try:
                        if w.next_try < 0:  # 410: re-list first
                            if not self.relist(w):
                                w.next_try = now + 0.5
                                continue
                        self.connect(w)
            for key, _ in self.sel.select(timeout=0.05):
                w = key.data
                with self.lock:
                    self.read(w)

    def read(self, w):
        try:
            while True:
                data = w.sock.recv(1 << 16)
                if not data:
                    self.drop(w, clean=w.terminal)
                    return
                w.buf += data
                if w.sock.pending() == 0:
                    break
        except ssl.SSLWantReadError:
            pass
        except (OSError, ssl.SSLError):
            self.drop(w, clean=w.terminal)
            return
        self.decode(w)

    def decode(self, w):
        if w.head is None:
            i = w.buf.find(b"\r\n\r\n")
            if i < 0:
                return
            w.head = bytes(w.buf[:i])
            del w.buf[:i + 4]
            status = int(w.head.split(b" ", 2)[1])
            if status == 410:
                self.drop(w, clean=True)
                w.next_try = -1
                return
            if status != 200:  # 429 while a replica's cache is not ready, 5xx: try again
                self.drop(w, clean=True, backoff=0.3)
                return
        while not w.terminal and w.sock is not None:
            i = w.buf.find(b"\r\n")
            if i < 0:
                return
            size = int(w.buf[:i], 16)
            if len(w.buf) < i + 2 + size + 2:
                return
            w.body += w.buf[i + 2:i + 2 + size]
            del w.buf[:i + 2 + size + 2]
            if size == 0:
                w.terminal = True
                return
            while w.sock is not None:
                j = w.body.find(b"\n")
                if j < 0:
                    break
                line = bytes(w.body[:j])
                del w.body[:j + 1]
                self.event(w, line)

    def event(self, w, line):
        t = TYPE.search(line)
        kind = t.group(1).decode() if t else "?"
        if kind == "ERROR":
            code = CODE.search(line)
            self.drop(w, clean=True)
            if code and code.group(1) == b"410":
                w.next_try = -1
            return
        m = RV.search(line)
        if m is None:
            w.violations.append(f"event without resourceVersion: {line[:100]!r}")
            return
        rv = int(m.group(1))
        if kind == "BOOKMARK":
            if rv < w.last_rv:
                w.violations.append(f"bookmark {rv} after {w.last_rv}")
            w.last_rv = max(w.last_rv, rv)
            return
        if rv <= w.last_rv:
            w.violations.append(f"{kind} at {rv} after {w.last_rv} (out of order or twice)")
            return
        name = NAME.search(line).group(1).decode()
        w.last_rv = rv
        w.seen.add(rv)
        if kind == "DELETED":
            w.mirror.pop(name, None)
        else:
            w.mirror[name] = rv

    def finish(self):
        self.stop = True
        self.thread.join(timeout=10)
        for w in self.watchers:
            if w.sock is not None:
                w.sock.close()


def wait_until(condition, timeout, step=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(step)
    return condition()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--watchers", type=int, default=200)
    ap.add_argument("--writers", type=int, default=2)
    ap.add_argument("--write-period", type=float, default=0.05)
    ap.add_argument("--etcd-outage", type=float, default=5)
    ap.add_argument("--fault-time", type=float, default=4, help="seconds each fault lasts")
    ap.add_argument("--report", help="write the measurements here as JSON")
    args = ap.parse_args()
    for tool in ("haproxy", "etcd", "etcdctl", "openssl"):
        if shutil.which(tool) is None:
            print(f"{tool} is not installed: skipping")
            sys.exit(SKIP)
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    checks = Checks()
    tmp = tempfile.mkdtemp(prefix="kwatch-ha-")
    failed = True  # until the end is reached
    cluster = Cluster(os.path.abspath(args.binary), tmp)
    report = {"watchers": args.watchers, "writers": args.writers, "faults": []}
    try:
        cluster.up()
        ctx = cluster.context()
        status, _ = request(ctx, LB, "POST", "/api/v1/namespaces",
                            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        checks.check("the balancer serves: namespace created", status == 201, status)
        # Every replica publishes the PKI's CA (--root-ca-file) as kube-root-ca.crt.
        with open(os.path.join(cluster.pki, "ca.crt")) as f:
            pki_ca = f.read()

        def root_ca():
            code, cm = request(ctx, LB, "GET", f"/api/v1/namespaces/{NS}/configmaps/kube-root-ca.crt")
            return code == 200 and cm.get("data") == {"ca.crt": pki_ca}
        try:
            published = wait_until(root_ca, 15)
        except Exception:  # noqa: BLE001 - reported as a failed check
            published = False
        checks.check("kube-root-ca.crt holds the PKI's CA in a new namespace", published)
        watchers = Watchers(ctx, args.watchers)
        watchers.start()
        writers = Writers(ctx, args.writers, args.write_period)
        writers.start()
        readers = Readers(ctx, 1, args.write_period * 2)
        readers.start()
        time.sleep(2)  # a baseline before the first fault

        def fault(name, do, undo, hold):
            start = time.monotonic()
            print(f"--- {name}", flush=True)
            do()
            time.sleep(hold)
            undo()
            # Recovered: a write acknowledged after the repair.
            repaired = time.monotonic()
            wait_until(lambda: any(t > repaired for t, _, _ in writers.acked[-5:]), 60)
            end = time.monotonic() + 1
            time.sleep(1)
            with writers.lock:
                window = [(t, ok) for t, ok, _ in writers.attempts if start <= t <= end]
                failures = collections.Counter(how for t, ok, how in writers.attempts
                                               if start <= t <= end and not ok)
                oks = [t for t, _, _ in writers.acked if start - 5 <= t <= end]
            with readers.lock:
                reads = [ok for t, ok in readers.attempts if start <= t <= end]
            gaps = [b - a for a, b in zip(oks, oks[1:])]
            before = [t for t in oks if t < start]
            first_after = next((t for t in oks if t >= start), None)
            entry = {"fault": name, "seconds": round(end - start, 2),
                     "writes": len(window), "succeeded": sum(1 for _, ok in window if ok),
                     "availability": round(sum(1 for _, ok in window if ok) / max(1, len(window)), 4),
                     "longest_gap_s": round(max(gaps) if gaps else 0, 3),
                     "unclean_stream_ends": sum(1 for w in watchers.watchers
                                                for t in w.unclean if start <= t <= end),
                     "failures": dict(failures),
                     "reads": len(reads),
                     "read_availability": round(sum(reads) / max(1, len(reads)), 4),
                     "relists": sum(1 for w in watchers.watchers
                                    for t in w.relist_times if start <= t <= end)}
            if before and first_after is not None:
                entry["first_write_after_s"] = round(first_after - start, 3)
            report["faults"].append(entry)
            print(f"    {entry}", flush=True)
            return entry

        fault("kill -9 a kwatch replica",
              lambda: cluster.run("kill", "kwatch-1"),
              lambda: cluster.run("start", "kwatch-1"), args.fault_time)
        graceful = fault("SIGTERM a kwatch replica (graceful)",
                         lambda: cluster.run("stop", "kwatch-2"),
                         lambda: cluster.run("start", "kwatch-2"), args.fault_time)
        leader = cluster.leader() or 1
        fault(f"kill -9 the etcd leader (etcd-{leader})",
              lambda: cluster.run("kill", f"etcd-{leader}"),
              lambda: cluster.run("start", f"etcd-{leader}"), args.fault_time)
        leader = cluster.leader() or 1
        follower = 1 + leader % 3
        fault(f"stop an etcd follower (etcd-{follower})",
              lambda: cluster.run("stop", f"etcd-{follower}"),
              lambda: cluster.run("start", f"etcd-{follower}"), args.fault_time)

        def all_etcd(action):
            for i in range(1, 4):
                cluster.run(action, f"etcd-{i}")
        outage = fault(f"stop all of etcd for {args.etcd_outage:g} s", lambda: all_etcd("stop"),
                       lambda: all_etcd("start"), args.etcd_outage)

        def compact():
            r = cluster.etcdctl("endpoint", "status", "-w", "json", endpoints=etcd_endpoint(1))
            rev = json.loads(r.stdout)[0]["Status"]["header"]["revision"]
            cluster.etcdctl("compact", str(rev - 5))
        fault("compact etcd to 5 revisions ago", compact, lambda: None, args.fault_time)

        writers.finish()
        readers.finish()
        truth = None
        for _ in range(50):
            truth = cluster.state()
            if truth is not None:
                break
            time.sleep(0.2)
        acked = list(writers.acked)
        checks.check("writes were acknowledged throughout", len(acked) > 50, len(acked))
        last = max(rv for _, _, rv in acked)

        def mirrors_equal():
            with watchers.lock:
                return all(w.mirror == truth for w in watchers.watchers)
        settled = wait_until(mirrors_equal, 60)
        with watchers.lock:
            wrong = [w.index for w in watchers.watchers if w.mirror != truth]
        checks.check(f"every watcher's mirror equals etcd key by key ({len(truth)} objects)",
                     settled, f"{len(wrong)} differ, e.g. watcher {wrong[:3]}")
        watchers.finish()
        violations = [(w.index, v) for w in watchers.watchers for v in w.violations]
        checks.check("no watcher saw an event out of order or twice", not violations, violations[:5])
        missing = 0
        for w in watchers.watchers:
            for _, _, rv in acked:
                if rv not in w.seen and not any(r >= rv for r in w.relists[1:]):
                    missing += 1
        checks.check("every acknowledged write was seen by every watcher (or covered by its re-list)",
                     missing == 0, f"{missing} (watcher, write) pairs missing")

        def replica_equal(i):
            try:
                status, lst = request(ctx, replica_addr(i), "GET", f"{CMS}?resourceVersion=0")
            except (OSError, http.client.HTTPException):
                return False
            return status == 200 and {it["metadata"]["name"]: int(it["metadata"]["resourceVersion"])
                                      for it in lst["items"]} == truth
        for i in range(1, 4):
            checks.check(f"kwatch-{i}'s cache equals etcd key by key",
                         wait_until(lambda: replica_equal(i), 30))
        checks.check("during the graceful stop no write failed",
                     graceful["succeeded"] == graceful["writes"],
                     f"{graceful['writes'] - graceful['succeeded']} failed")
        # No replica is ready then: the balancer falls back to the live ones, which answer.
        checks.check("with etcd down everywhere, failed writes got a Status, not a cut connection",
                     outage["failures"].get("connection", 0) == 0, outage["failures"])
        checks.check("with etcd down everywhere, lists from the caches (resourceVersion=0) "
                     "were still served", outage["read_availability"] == 1.0,
                     f"{outage['read_availability']:.1%} of {outage['reads']}")
        checks.check("no watcher had to re-list after the etcd outage (the caches kept their "
                     "windows)", outage["relists"] == 0, outage["relists"])
        checks.check("during the graceful stop no watch stream ended uncleanly",
                     graceful["unclean_stream_ends"] == 0, graceful["unclean_stream_ends"])
        report["writes_acknowledged"] = len(acked)
        report["last_revision"] = last
        report["reconnects"] = sum(w.reconnects for w in watchers.watchers)
        report["relists"] = sum(len(w.relists) - 1 for w in watchers.watchers)
        report["redelivered_after_relist"] = sum(w.redelivered for w in watchers.watchers)
        report["unclean_stream_ends"] = sum(len(w.unclean) for w in watchers.watchers)
        print(json.dumps({k: v for k, v in report.items() if k != "faults"}), flush=True)
        if args.report:
            with open(args.report, "w") as f:
                json.dump(report, f, indent=1)
        failed = checks.failed > 0
    finally:
        subprocess.run([sys.executable, CLUSTER, "--dir", tmp, "down"], env=cluster.env,
                       capture_output=True, timeout=120)
        if failed:
            print(f"logs kept in {tmp}/logs")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"{checks.passed} passed, {checks.failed} failed")
    sys.exit(1 if checks.failed else 0)


if __name__ == "__main__":
    main()
