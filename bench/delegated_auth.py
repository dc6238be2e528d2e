#!/usr/bin/env python3
"""What delegated authentication and authorization cost a request: GETs on an extension server
(B) by a user B knows itself (its token file and RBAC), against a user only the server it
delegates to (A) knows (a TokenReview and a SubjectAccessReview, answered from B's caches after
the first request, or asked every time with the caches' TTLs at 0).

    bench/delegated_auth.py [--binary build/server/kwatch-apiserver] [--requests 3000]

Two kwatch-apiservers on loopback, embedded stores in memory, RBAC on both. B runs with
--authentication-kubeconfig and --authorization-kubeconfig naming A (its account bound to
system:auth-delegator and kube's extension-apiserver-authentication-reader Role). Each phase
sends `--requests` GETs of one ConfigMap, one after another on one keep-alive connection, and
reads both servers' CPU (utime + stime) around it. Prints one JSON document.
"""
import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

from admission_webhooks import cpu_seconds  # noqa: E402
from harness import Server, TempDir, http_token_kubeconfig  # noqa: E402

PATH = "/api/v1/namespaces/default/configmaps/bench"


def binding(name, role, user, kind="ClusterRole"):
    return {"metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]}


def phase(name, a, b, token, requests):
    session = b.session()
    headers = {"Authorization": f"Bearer {token}"}
    # The caches filled, once B's policy has the binding just written (a denial it asked A
    # about meanwhile is remembered for the TTL).
    deadline = time.monotonic() + 30
    while True:
        status, body = session.request("GET", PATH, headers=headers)
        if status == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    if status != 200:
        raise SystemExit(f"{name}: {status} {body}")
    before = (cpu_seconds(a.proc.pid), cpu_seconds(b.proc.pid))
    start = time.monotonic()
    for _ in range(requests):
        status, body = session.request("GET", PATH, headers=headers)
        if status != 200:
            raise SystemExit(f"{name}: {status} {body}")
    wall = time.monotonic() - start
    cpu_a = cpu_seconds(a.proc.pid) - before[0]
    cpu_b = cpu_seconds(b.proc.pid) - before[1]
    return {"phase": name, "requests": requests,
            "requests_per_second": round(requests / wall),
            "extension_cpu_us_per_request": round(cpu_b / requests * 1e6, 1),
            "delegated_to_cpu_us_per_request": round(cpu_a / requests * 1e6, 1),
            "mean_latency_ms": round(wall / requests * 1e3, 3)}


def start_b(binary, tmp, kubeconfig, ttl, name):
    return Server(binary, data_dir=f"{tmp}/{name}", extra_args=(
        f"--token-auth-file={tmp}/b-tokens.csv", "--authorization-mode=RBAC",
        "--anonymous-auth=false", f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--authentication-token-webhook-cache-ttl={ttl}",
        f"--authorization-webhook-cache-authorized-ttl={ttl}",
        f"--authorization-webhook-cache-unauthorized-ttl={ttl}")).start()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--binary", default=os.path.join(ROOT, "build", "server", "kwatch-apiserver"))
    p.add_argument("--requests", type=int, default=3000)
    args = p.parse_args()
    results = []
    with TempDir() as tmp:
        with open(f"{tmp}/a-tokens.csv", "w") as f:
            f.write('admin-token,admin,1,"system:masters"\nalice-token,alice,2\n'
                    "delegator-token,ext-server,3\n")
        with open(f"{tmp}/b-tokens.csv", "w") as f:
            f.write('b-admin-token,b-admin,1,"system:masters"\nb-carol-token,carol,2\n')
        a = Server(args.binary, extra_args=(
            f"--token-auth-file={tmp}/a-tokens.csv", "--authorization-mode=RBAC")).start()
        bs = []
        try:
            admin = {"Authorization": "Bearer admin-token"}
            s = a.session()
            for path, body in (
                    ("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                     binding("ext-delegator", "system:auth-delegator", "ext-server")),
                    ("/apis/rbac.authorization.k8s.io/v1/namespaces/kube-system/rolebindings",
                     binding("ext-reader", "extension-apiserver-authentication-reader",
                             "ext-server", kind="Role")),
                    ("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                     binding("alice-view", "view", "alice"))):
                status, out = s.request("POST", path, body, headers=admin)
                if status != 201:
                    raise SystemExit(f"{path}: {status} {out}")
            kubeconfig = http_token_kubeconfig(f"{tmp}/delegate.kubeconfig", a.port,
                                               "delegator-token")
            for ttl, name in (("10s", "b-cached"), ("0", "b-uncached")):
                b = start_b(args.binary, tmp, kubeconfig, ttl, name)
                bs.append(b)
                bs_admin = {"Authorization": "Bearer b-admin-token"}
                sb = b.session()
                sb.request("POST", "/api/v1/namespaces/default/configmaps",
                           {"metadata": {"name": "bench"}, "data": {"k": "v"}}, headers=bs_admin)
                sb.request("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                           binding("carol-view", "view", "carol"), headers=bs_admin)
                if ttl != "0":
                    results.append(phase("local token and RBAC on B", a, b, "b-carol-token",
                                         args.requests))
                    results.append(phase("delegated, answers cached (10s)", a, b, "alice-token",
                                         args.requests))
                else:
                    results.append(phase("delegated, every request reviewed (TTLs 0)", a, b,
                                         "alice-token", max(args.requests // 3, 100)))
                b.stop()
        finally:
            for b in bs:
                b.stop()
            a.stop()
    print(json.dumps({"bench": "delegated_auth", "results": results}, indent=1))


if __name__ == "__main__":
    main()
