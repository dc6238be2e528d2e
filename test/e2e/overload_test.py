"""Overload protection as kube-apiserver's max-in-flight filter applies it (API Priority and
Fairness off, --enable-priority-and-fairness=false; test/e2e/priority_and_fairness_test.py covers it
on): past
--max-requests-inflight a read gets 429 TooManyRequests with Retry-After and a Status (writes past
--max-mutating-requests-inflight wait in the queue for a seat instead), system:masters and health probes are never refused, watches are not
counted once they stream, and --max-watches-per-user caps one user's open watches (a closed one
frees its slot). kubectl rides through 429s by retrying.

Usage: overload_test.py <path to kwatch-apiserver>
"""
import http.client
import json
import os
import shutil
import subprocess
import sys
import threading
import time

from harness import Checks, Server, TempDir, WatchStream, wait_for


def call(port, method, path, token, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, resp.getheader("Retry-After"), data
    finally:
        conn.close()


def settled_call(port, method, path, token):
    """A call that may meet the in-flight limit for a moment: a slot is given back only after
    its response is written, so with a limit of 1 the previous request of this very test can
    still hold it when the next one arrives. Retries that 429 (and only that one) briefly."""
    deadline = time.monotonic() + 5
    while True:
        status, retry_after, body = call(port, method, path, token)
        in_flight = status == 429 and b"Too many requests, please try again later." in body
        if not in_flight or time.monotonic() > deadline:
            return status, retry_after, body
        time.sleep(0.02)


def hammer(port, token, method, path, body_fn, threads, per_thread):
    """Runs requests from many threads at once; returns every (status, retry_after, body)."""
    results = []
    lock = threading.Lock()
    start = threading.Barrier(threads)

    def run(n):
        start.wait()
        for i in range(per_thread):
            r = call(port, method, path, token, body_fn(n, i) if body_fn else None)
            with lock:
                results.append(r)
    workers = [threading.Thread(target=run, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return results


def main():
    binary = sys.argv[1]
    t = Checks()
    with TempDir() as tmp:
        tokens = os.path.join(tmp, "tokens.csv")
        with open(tokens, "w") as f:
            f.write('admin-token,admin,1,"system:masters"\nalice-token,alice,2\n')
        server = Server(binary, extra_args=[f"--token-auth-file={tokens}",
                                            "--enable-priority-and-fairness=false",
                                            "--max-requests-inflight=1",
                                            "--max-mutating-requests-inflight=1",
                                            "--max-watches-per-user=3"]).start()
        port = server.port
        try:
            # Enough objects that a list takes a while, so requests overlap.
            for i in range(400):
                status, _, body = call(port, "POST", "/api/v1/namespaces/default/configmaps", "admin-token",
                                       {"metadata": {"name": f"cm-{i}"}, "data": {"v": "x" * 2000}})
                if status != 201:
                    t.check("admin fills the store", False, body[:200])
                    break
            results = hammer(port, "alice-token", "GET", "/api/v1/namespaces/default/configmaps", None, 8, 12)
            refused = [r for r in results if r[0] == 429]
            t.check("reads past --max-requests-inflight are refused with 429", refused and
                    all(r[0] in (200, 429) for r in results), sorted({r[0] for r in results}))
            if refused:
                status, retry_after, body = refused[0]
                status_obj = json.loads(body)
                t.check("429 is a TooManyRequests Status with Retry-After: 1", retry_after == "1" and
                        status_obj.get("reason") == "TooManyRequests" and status_obj.get("code") == 429 and
                        status_obj.get("details", {}).get("retryAfterSeconds") == 1 and
                        status_obj.get("message") == "Too many requests, please try again later.", (retry_after, status_obj))
            ok = [r for r in results if r[0] == 200]
            t.check("... and the others are served", len(ok) > 0, len(ok))

            # system:masters and probes go through while alice keeps the limit busy.
            stop = threading.Event()
            background = []

            def keep_busy():
                while not stop.is_set():
                    background.append(call(port, "GET", "/api/v1/namespaces/default/configmaps", "alice-token")[0])
            busy = [threading.Thread(target=keep_busy) for _ in range(4)]
            for b in busy:
                b.start()
            admin_results = [call(port, "GET", "/api/v1/namespaces/default/configmaps", "admin-token")[0]
                             for _ in range(20)]
            probe_results = [call(port, "GET", "/readyz", "alice-token")[0] for _ in range(20)]
            stop.set()
            for b in busy:
                b.join()
            t.check("system:masters is never refused", set(admin_results) == {200}, admin_results)
            t.check("health probes are never refused", set(probe_results) == {200}, probe_results)
            t.check("the limit was busy meanwhile", 429 in background, sorted(set(background)))

            writes = hammer(port, "alice-token", "POST", "/api/v1/namespaces/default/configmaps",
                            lambda n, i: {"metadata": {"name": f"w-{n}-{i}"}}, 8, 6)
            t.check("writes past --max-mutating-requests-inflight wait in the queue for a seat: "
                    "every one created", all(r[0] == 201 for r in writes), sorted({r[0] for r in writes}))
            created = sum(1 for r in writes if r[0] == 201)
            status, _, body = call(port, "GET", "/api/v1/namespaces/default/configmaps?labelSelector=", "admin-token")
            names = {c["metadata"]["name"] for c in json.loads(body)["items"]}
            t.check("every write answered 201 is stored, no refused one is",
                    sum(1 for n in names if n.startswith("w-")) == created, (created, len(names)))

            kubectl = shutil.which("kubectl")
            if kubectl:
                cfg = os.path.join(tmp, "kubeconfig")
                with open(cfg, "w") as f:
                    f.write(f"""apiVersion: v1
kind: Config
clusters: [{{name: k, cluster: {{server: "http://127.0.0.1:{port}"}}}}]
contexts: [{{name: k, context: {{cluster: k, user: u}}}}]
current-context: k
users: [{{name: u, user: {{token: alice-token}}}}]
""")
                # A paced load: the slot is often busy, so kubectl meets 429s, but not always.
                stop.clear()

                def paced():
                    while not stop.wait(0.05):
                        call(port, "GET", "/api/v1/namespaces/default/configmaps", "alice-token")
                busy = [threading.Thread(target=paced)]
                for b in busy:
                    b.start()
                p = subprocess.run([kubectl, "--kubeconfig", cfg, "get", "configmaps", "-o", "name"],
                                   capture_output=True, text=True, timeout=120)
                stop.set()
                for b in busy:
                    b.join()
                t.check("kubectl retries 429 and gets its answer", p.returncode == 0 and "configmap/cm-0" in p.stdout,
                        p.stderr[-500:])

            # Watches: three per user, a fourth refused, a closed one frees its slot.
            headers = {"Authorization": "Bearer alice-token"}
            watches = []
            deadline = time.monotonic() + 10
            while len(watches) < 3 and time.monotonic() < deadline:
                # A watch can meet the in-flight limit for a moment too (see settled_call).
                w = WatchStream(server, "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=0",
                                headers=headers)
                if w.status == 200:
                    watches.append(w)
                else:
                    w.close()
            t.check("three watches of one user are open", len(watches) == 3, len(watches))
            status, retry_after, body = settled_call(port, "GET", "/api/v1/configmaps?watch=1", "alice-token")
            t.check("a fourth watch of the same user: 429 naming the flag", status == 429 and retry_after == "1" and
                    "--max-watches-per-user" in json.loads(body).get("message", ""), (status, body[:300]))
            status, _, _ = call(port, "GET", "/api/v1/configmaps?watch=1&timeoutSeconds=1", "admin-token")
            t.check("another user's watches are not affected", status == 200, status)
            status, _, _ = settled_call(port, "GET", "/api/v1/namespaces/default/configmaps?limit=1",
                                        "alice-token")
            t.check("open watches do not count as requests in flight", status == 200, status)
            watches.pop().close()
            wait_for(lambda: settled_call(port, "GET", "/api/v1/configmaps?watch=1&timeoutSeconds=1",
                                          "alice-token")[0] == 200, what="a closed watch to free its slot")
            t.check("a closed watch frees its slot", True)
            for w in watches:
                w.close()
            t.check("the server is alive", server.alive())
        finally:
            server.stop()
    t.finish()


if __name__ == "__main__":
    main()
