"""kill -9 durability of the embedded store: every write the server acknowledged survives a crash.

16 writers (threads, one keep-alive HTTP connection each) create and update their own ConfigMaps
and record every acknowledged write (2xx) with its resourceVersion and content. The server is
killed with SIGKILL after a random number of acknowledged writes, restarted on the same data
directory, and every object must hold its latest acknowledged content and resourceVersion, or the
one later write of the same writer that was in flight at the kill (never acknowledged, so it may
or may not have reached the log). Ten rounds on one data directory: five with small values, five
with ~20 KB values, with a snapshot threshold low enough that snapshots are written (and old
generations removed) during every round.

Usage: durability_test.py <path to kwatch-apiserver>   (KWATCH_TEST_SEED=<n> replays a run)
"""
import http.client
import json
import os
import random
import signal
import stat
import sys
import threading
import time

from harness import SKIP, Checks, Server, TempDir, storage_backend, wait_for

NS = "durability"
CM = f"/api/v1/namespaces/{NS}/configmaps"
WRITERS = 16
OBJECTS_PER_WRITER = 4
SNAPSHOT_BYTES = 256 << 10
ROUNDS = [200] * 5 + [20 << 10] * 5  # value size of each round


def content(name, seq, size):
    """The data of write number seq of an object: different for every write, checkable."""
    unit = f"{name}:{seq};"
    return {"seq": str(seq), "pad": (unit * (size // len(unit) + 1))[:size]}


class Obj:
    """What one writer knows about one of its objects."""

    def __init__(self, name):
        self.name = name
        self.seq = 0         # the last acknowledged write's number (0: none yet)
        self.rv = None       # its resourceVersion
        self.size = 0        # its value size
        self.in_flight = None  # (seq, size) of a write that got no answer


class Writer(threading.Thread):
    def __init__(self, index, port, size, objects, stop):
        super().__init__(daemon=True)
        self.index, self.port, self.size, self.objects, self.stop = index, port, size, objects, stop
        self.acks = 0
        self.errors = []

    def request(self, conn, method, path, body):
        conn.request(method, path, body=json.dumps(body),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read() or b"null")

    def run(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        k = 0
        try:
            while not self.stop.is_set():
                o = self.objects[k % len(self.objects)]
                k += 1
                seq = o.seq + 1
                body = {"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": o.name, "namespace": NS},
                        "data": content(o.name, seq, self.size)}
                if o.rv is None:
                    method, path, want = "POST", CM, 201
                else:
                    body["metadata"]["resourceVersion"] = str(o.rv)
                    method, path, want = "PUT", f"{CM}/{o.name}", 200
                o.in_flight = (seq, self.size)
                try:
                    status, resp = self.request(conn, method, path, body)
                except (OSError, http.client.HTTPException, ValueError):
                    return  # the server is gone: this write's fate is unknown
                if status != want:
                    self.errors.append(f"{method} {o.name} seq {seq}: {status} {resp!r}"[:300])
                    return
                rv = int(resp["metadata"]["resourceVersion"])
                if o.rv is not None and rv <= o.rv:
                    self.errors.append(f"{o.name}: resourceVersion went from {o.rv} to {rv}")
                o.seq, o.rv, o.size, o.in_flight = seq, rv, self.size, None
                self.acks += 1
        finally:
            conn.close()


def kill9(server):
    server.proc.send_signal(signal.SIGKILL)
    server.proc.wait(timeout=10)
    server.log.close()
    server.proc = None


def snapshot_seqs(data_dir):
    return sorted(int(n[5:21], 16) for n in os.listdir(data_dir)
                  if n.startswith("snap-") and n.endswith(".snap"))


def verify(t, server, objects, round_no):
    """Every object holds its last acknowledged write, or the write in flight at the kill."""
    lost = []
    for o in objects:
        status, body = server.request("GET", f"{CM}/{o.name}")
        if status == 404 and o.rv is None:
            continue  # never acknowledged (a create may have been in flight)
        if status != 200:
            lost.append(f"{o.name}: GET {status}")
            continue
        rv = int(body["metadata"]["resourceVersion"])
        seq = int(body["data"].get("seq", "-1"))
        if o.rv is not None and seq == o.seq:
            if rv != o.rv or body["data"] != content(o.name, o.seq, o.size):
                lost.append(f"{o.name}: acknowledged seq {o.seq} at rv {o.rv}, found rv {rv}")
        elif o.in_flight and seq == o.in_flight[0]:
            if (o.rv is not None and rv <= o.rv) or \
                    body["data"] != content(o.name, seq, o.in_flight[1]):
                lost.append(f"{o.name}: the in-flight write {seq} is there but wrong (rv {rv})")
            # The write in flight made it: it is now the latest state the writer builds on.
            o.seq, o.rv, o.size = seq, rv, o.in_flight[1]
        else:
            lost.append(f"{o.name}: acknowledged seq {o.seq} (rv {o.rv}), found seq {seq} "
                        f"(rv {rv})")
        o.in_flight = None
    t.check(f"round {round_no}: every acknowledged write survived kill -9", not lost,
            "; ".join(lost[:5]) + (f" ... and {len(lost) - 5} more" if len(lost) > 5 else ""))


def check_modes(t, data_dir):
    bad = [f"{n} {stat.S_IMODE(os.stat(os.path.join(data_dir, n)).st_mode):o}"
           for n in os.listdir(data_dir)
           if stat.S_IMODE(os.stat(os.path.join(data_dir, n)).st_mode) != 0o600]
    mode = stat.S_IMODE(os.stat(data_dir).st_mode)
    t.check("data dir is 0700 and every file in it 0600", mode == 0o700 and not bad,
            f"dir {mode:o}, files {bad[:5]}")


def main():
    binary = sys.argv[1]
    if storage_backend() != "memory":
        print("the durability suite is about the embedded store's data directory: skipping")
        sys.exit(SKIP)
    seed = int(os.environ.get("KWATCH_TEST_SEED", random.randrange(1 << 30)))
    print(f"seed {seed}")
    rng = random.Random(seed)
    t = Checks()
    started = time.monotonic()
    with TempDir() as tmp:
        data_dir = os.path.join(tmp, "data")
        args = [f"--data-dir-snapshot-bytes={SNAPSHOT_BYTES}", "--log-level=info"]
        server = Server(binary, data_dir=data_dir, extra_args=args).start()
        try:
            server.create_namespace(NS)
            objects = [[Obj(f"w{w}-o{j}") for j in range(OBJECTS_PER_WRITER)]
                       for w in range(WRITERS)]
            everything = [o for objs in objects for o in objs]
            torn_cuts = 0
            for round_no, size in enumerate(ROUNDS, 1):
                # Kill after a random number of acknowledged writes: enough log for two or
                # more snapshots at this value size, so the kill can land anywhere among them.
                per_snapshot = SNAPSHOT_BYTES // (size + 400)
                target = rng.randint(3 * per_snapshot, 6 * per_snapshot)
                snaps_before = snapshot_seqs(data_dir)
                stop = threading.Event()
                writers = [Writer(w, server.port, size, objects[w], stop) for w in range(WRITERS)]
                for w in writers:
                    w.start()
                try:
                    wait_for(lambda: sum(w.acks for w in writers) >= target or
                             any(w.errors for w in writers) or not server.alive(),
                             timeout=60, what=f"{target} acknowledged writes")
                finally:
                    kill9(server)
                    stop.set()
                    for w in writers:
                        w.join(timeout=15)
                acks = sum(w.acks for w in writers)
                errors = [e for w in writers for e in w.errors]
                t.check(f"round {round_no}: {acks} writes of {size} bytes acknowledged, no "
                        f"errors", acks >= target and not errors, "; ".join(errors[:3]))
                snaps_after = snapshot_seqs(data_dir)
                t.check(f"round {round_no}: snapshots written during the round",
                        snaps_after and (not snaps_before or snaps_after[-1] > snaps_before[-1]),
                        f"before {snaps_before}, after {snaps_after}")
                # Two generations are kept; a kill between a new snapshot and the removal of the
                # oldest generation leaves a third until the next snapshot.
                t.check(f"round {round_no}: older snapshot generations are removed",
                        len(snaps_after) <= 3, str(snaps_after))
                try:
                    server.start()  # on the same data directory, after a crash
                except AssertionError as e:
                    t.check(f"round {round_no}: the server restarts on its data", False,
                            str(e)[-800:])
                    break
                log = server.read_log()
                torn_cuts += log.count("ends in a torn record")
                t.check(f"round {round_no}: recovery neither refused nor fell back",
                        "damaged" not in log and "FALLING BACK" not in log,
                        log[-600:])
                verify(t, server, everything, round_no)
            print(f"{torn_cuts} torn tails cut (and kept aside) over {len(ROUNDS)} kills")
            check_modes(t, data_dir)
            status, body = server.request("GET", CM)
            t.check("the list after the last restart has every object",
                    status == 200 and len(body.get("items", [])) == len(everything),
                    f"{status} {len(body.get('items', [])) if isinstance(body, dict) else body}")
        finally:
            server.stop()
    print(f"{time.monotonic() - started:.1f}s")
    t.finish()


if __name__ == "__main__":
    main()
