"""API Priority and Fairness as clients and cluster admins meet it: kube's bootstrap FlowSchemas and
PriorityLevelConfigurations are there at start, every response names the matched objects by UID
(X-Kubernetes-PF-FlowSchema-UID, -PriorityLevel-UID), a FlowSchema an admin adds takes its
users' requests to its own priority level, where they are refused with 429 past that level's
seats while other users and system:masters are served; a FlowSchema naming a missing level says
so in its Dangling condition; the debug dumps answer admins only; the mandatory objects' specs
are restored and deleted suggested ones come back when the server starts; the flags keep kube's
meaning (--enable-priority-and-fairness=false: no classification; the two in-flight limits must
leave some seats). kwatch's own annotation flowcontrol.kwatch.io/cpu-priority=low sends a level's
connections to threads at nice 19, over HTTP and HTTPS, keep-alive and pipelined requests moving
between them and the I/O threads as each request's level says.

Usage: priority_and_fairness_test.py <path to kwatch-apiserver>
"""
import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading

from harness import Checks, Server, TempDir, parse_metrics, wait_for

GROUP = "/apis/flowcontrol.apiserver.k8s.io/v1"
SUGGESTED_SCHEMAS = {"exempt", "probes", "system-leader-election", "system-node-high",
                     "system-nodes", "kube-controller-manager", "kube-scheduler",
                     "kube-system-service-accounts", "service-accounts", "global-default",
                     "catch-all"}
LEVELS = {"exempt", "catch-all", "system", "node-high", "leader-election", "workload-high",
          "workload-low", "global-default"}
TOO_MANY = "Too many requests, please try again later."


def call(port, method, path, token=None, body=None):
    """(status, headers dict, body bytes)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        conn.request(method, path, body=json.dumps(body) if body is not None else None,
                     headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
    finally:
        conn.close()


def get_json(port, path, token="admin-token"):
    status, _, data = call(port, "GET", path, token)
    return status, (json.loads(data) if data else None)


def metric(port, name, **labels):
    """The sum of name's samples with these labels, read as system:masters; None: no sample."""
    _, _, data = call(port, "GET", "/metrics", "admin-token")
    values = [v for n, lbl, v in parse_metrics(data.decode())
              if n == name and all(lbl.get(k) == str(w) for k, w in labels.items())]
    return sum(values) if values else None


def uid_of(port, resource, name):
    status, obj = get_json(port, f"{GROUP}/{resource}/{name}")
    return obj["metadata"]["uid"] if status == 200 else None


def names(port, resource):
    status, obj = get_json(port, f"{GROUP}/{resource}")
    return {o["metadata"]["name"] for o in obj.get("items", [])} if status == 200 else set()


def dangling(port, name):
    status, obj = get_json(port, f"{GROUP}/flowschemas/{name}")
    if status != 200:
        return None
    for c in obj.get("status", {}).get("conditions", []):
        if c.get("type") == "Dangling":
            return c
    return None


def check_bootstrap(t, port):
    wait_for(lambda: SUGGESTED_SCHEMAS <= names(port, "flowschemas") and
             LEVELS <= names(port, "prioritylevelconfigurations"),
             what="kube's bootstrap FlowSchemas and PriorityLevelConfigurations")
    t.check("kube's mandatory and suggested FlowSchemas exist",
            SUGGESTED_SCHEMAS == names(port, "flowschemas"), names(port, "flowschemas"))
    t.check("... and PriorityLevelConfigurations", LEVELS == names(port, "prioritylevelconfigurations"))
    _, catch_all = get_json(port, f"{GROUP}/prioritylevelconfigurations/catch-all")
    t.check("catch-all is kube's: Limited, 5 shares, Reject, annotated for auto-update",
            catch_all["spec"]["type"] == "Limited" and
            catch_all["spec"]["limited"]["nominalConcurrencyShares"] == 5 and
            catch_all["spec"]["limited"]["limitResponse"]["type"] == "Reject" and
            catch_all["metadata"]["annotations"].get("apf.kubernetes.io/autoupdate-spec") == "true",
            catch_all)
    wait_for(lambda: (dangling(port, "global-default") or {}).get("reason") == "Found",
             what="the Dangling condition of global-default")
    c = dangling(port, "global-default")
    t.check("a FlowSchema whose level exists: Dangling False, Found, kube's message",
            c["status"] == "False" and c["message"] ==
            'This FlowSchema references the PriorityLevelConfiguration object named '
            '"global-default" and it exists', c)


def check_headers(t, port):
    status, headers, _ = call(port, "GET", "/api/v1/namespaces/default/configmaps", "bob-token")
    t.check("bob's request goes to global-default: its FlowSchema and level UIDs in the headers",
            status == 200 and
            headers.get("x-kubernetes-pf-flowschema-uid") == uid_of(port, "flowschemas", "global-default") and
            headers.get("x-kubernetes-pf-prioritylevel-uid") ==
            uid_of(port, "prioritylevelconfigurations", "global-default"), headers)
    _, headers, _ = call(port, "DELETE", "/api/v1/namespaces/default/configmaps/none", "admin-token")
    t.check("system:masters goes to exempt",
            headers.get("x-kubernetes-pf-flowschema-uid") == uid_of(port, "flowschemas", "exempt") and
            headers.get("x-kubernetes-pf-prioritylevel-uid") ==
            uid_of(port, "prioritylevelconfigurations", "exempt"), headers)
    _, headers, _ = call(port, "GET", "/readyz")
    t.check("an anonymous probe goes to probes (exempt)",
            headers.get("x-kubernetes-pf-flowschema-uid") == uid_of(port, "flowschemas", "probes"), headers)


def flood(port, token, path, threads, rounds):
    results = []
    lock = threading.Lock()
    barrier = threading.Barrier(threads)

    def run():
        barrier.wait()
        for _ in range(rounds):
            r = call(port, "GET", path, token)
            with lock:
                results.append(r)
    workers = [threading.Thread(target=run) for _ in range(threads)]
    for w in workers:
        w.start()
    return workers, results


def check_own_level(t, server, port):
    tiny = {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
            "metadata": {"name": "tiny"},
            "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 1,
                                                    "lendablePercent": 0, "borrowingLimitPercent": 0,
                                                    "limitResponse": {"type": "Reject"}}}}
    schema = {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
              "metadata": {"name": "alice-tiny"},
              "spec": {"priorityLevelConfiguration": {"name": "tiny"}, "matchingPrecedence": 500,
                       "distinguisherMethod": {"type": "ByUser"},
                       "rules": [{"subjects": [{"kind": "User", "user": {"name": "alice"}}],
                                  "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"],
                                                     "resources": ["*"], "namespaces": ["*"],
                                                     "clusterScope": True}]}]}}
    s1, _, b1 = call(port, "POST", f"{GROUP}/prioritylevelconfigurations", "admin-token", tiny)
    s2, _, b2 = call(port, "POST", f"{GROUP}/flowschemas", "admin-token", schema)
    t.check("an admin adds a priority level and a FlowSchema", s1 == 201 and s2 == 201, (b1[:300], b2[:300]))
    fs_uid = uid_of(port, "flowschemas", "alice-tiny")
    wait_for(lambda: call(port, "GET", "/api/v1/namespaces/default/configmaps?limit=1", "alice-token")[1]
             .get("x-kubernetes-pf-flowschema-uid") == fs_uid,
             what="alice's requests to be classified by the new FlowSchema")
    t.check("alice's requests now go to alice-tiny", True)
    # A list of 400 objects of 2 kB costs 9 seats (a seat per 100 kB); "tiny" has
    # ceil(600 / 246) = 3: one runs at a time, the others are refused at once (a Reject level does
    # not queue).
    workers, results = flood(port, "alice-token", "/api/v1/namespaces/default/configmaps", 8, 10)
    bob = [call(port, "GET", "/api/v1/namespaces/default/configmaps?limit=5", "bob-token")[0]
           for _ in range(30)]
    admin = [call(port, "GET", "/api/v1/namespaces/default/configmaps?limit=5", "admin-token")[0]
             for _ in range(30)]
    for w in workers:
        w.join()
    refused = [r for r in results if r[0] == 429]
    t.check("alice past her level's seats: 429", refused and all(r[0] in (200, 429) for r in results),
            sorted({r[0] for r in results}))
    if refused:
        status, headers, body = refused[0]
        obj = json.loads(body)
        t.check("the 429 is a TooManyRequests Status with Retry-After and the PF headers",
                obj.get("reason") == "TooManyRequests" and obj.get("message") == TOO_MANY and
                int(headers.get("retry-after", "0")) >= 1 and
                headers.get("x-kubernetes-pf-flowschema-uid") == fs_uid, (headers, obj))
    t.check("bob, at another level, is served throughout", set(bob) == {200}, bob)
    t.check("system:masters is served throughout", set(admin) == {200}, admin)
    rejected = metric(port, "apiserver_flowcontrol_rejected_requests_total", flow_schema="alice-tiny",
                             priority_level="tiny", reason="concurrency-limit")
    t.check("apiserver_flowcontrol_rejected_requests_total counts them",
            rejected == len(refused), (rejected, len(refused)))
    dispatched = metric(port, "apiserver_flowcontrol_dispatched_requests_total",
                               flow_schema="alice-tiny", priority_level="tiny")
    t.check("apiserver_flowcontrol_dispatched_requests_total counts the others",
            dispatched is not None and dispatched >= len(results) - len(refused), dispatched)
    nominal = metric(port, "apiserver_flowcontrol_nominal_limit_seats", priority_level="tiny")
    t.check("the level's nominal seats: ceil(600 * 1 / 246) = 3", nominal == 3, nominal)


def niced_threads(pid):
    """{thread id: CPU ticks (user + system)} of the server's threads at nice 19."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        # After the name: state is field 3, so utime (14), stime (15), nice (19) are these.
        if int(fields[16]) == 19:
            out[tid] = int(fields[11]) + int(fields[12])
    return out


def exchange_pipelined(sock, requests):
    """Sends every request in one write, then reads the answers in order: [(status, body)]."""
    sock.sendall(b"".join(requests))
    out = []
    with sock.makefile("rb") as f:
        for _ in requests:
            status = int(f.readline().split()[1])
            headers = {}
            while (line := f.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                headers[name.strip().lower()] = value.strip()
            out.append((status, f.read(int(headers.get("content-length", "0")))))
    return out


def cms(body):
    """How many of the test's 400 ConfigMaps a list holds (kube-root-ca.crt is there too)."""
    return sum(i["metadata"]["name"].startswith("cm-") for i in json.loads(body)["items"])


def get_request(path, token):
    return (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
            "\r\n").encode()


def check_low_cpu_priority(t, server, port):
    level = {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
             "metadata": {"name": "background",
                          "annotations": {"flowcontrol.kwatch.io/cpu-priority": "low"}},
             "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 5,
                                                     "limitResponse": {"type": "Queue", "queuing": {
                                                         "queues": 4, "handSize": 2,
                                                         "queueLengthLimit": 50}}}}}
    schema = {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
              "metadata": {"name": "carol-background"},
              "spec": {"priorityLevelConfiguration": {"name": "background"}, "matchingPrecedence": 400,
                       "distinguisherMethod": {"type": "ByUser"},
                       "rules": [{"subjects": [{"kind": "User", "user": {"name": "carol"}}],
                                  "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"],
                                                     "resources": ["*"], "namespaces": ["*"],
                                                     "clusterScope": True}]}]}}
    s1, _, b1 = call(port, "POST", f"{GROUP}/prioritylevelconfigurations", "admin-token", level)
    s2, _, b2 = call(port, "POST", f"{GROUP}/flowschemas", "admin-token", schema)
    t.check("a level annotated flowcontrol.kwatch.io/cpu-priority=low, and carol's FlowSchema to it",
            s1 == 201 and s2 == 201, (b1[:300], b2[:300]))
    level_uid = uid_of(port, "prioritylevelconfigurations", "background")
    wait_for(lambda: call(port, "GET", "/api/v1/namespaces/default/configmaps?limit=1", "carol-token")[1]
             .get("x-kubernetes-pf-prioritylevel-uid") == level_uid,
             what="carol's requests to go to the background level")
    pid = server.proc.pid
    before = niced_threads(pid)
    t.check("the server runs one low-priority thread at nice 19 (half of --io-threads=2)",
            len(before) == 1, before)
    lists = "/api/v1/namespaces/default/configmaps"

    def ticks():
        return sum(niced_threads(pid).values())

    def list_many(token, n):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        ok = 0
        for _ in range(n):
            conn.request("GET", lists, headers={"Authorization": f"Bearer {token}"})
            resp = conn.getresponse()
            body = resp.read()
            ok += resp.status == 200 and cms(body) == 400
        conn.close()
        return ok
    start = ticks()
    served = list_many("bob-token", 150)
    bob_ticks = ticks() - start
    start = ticks()
    served_carol = list_many("carol-token", 150)
    carol_ticks = ticks() - start
    t.check("150 lists of 800 kB each for bob and for carol, all whole", served == 150 and
            served_carol == 150, (served, served_carol))
    t.check("carol's lists were written by the nice 19 thread (its CPU time grew), bob's were not",
            carol_ticks >= 5 and bob_ticks <= 2, (carol_ticks, bob_ticks))

    # One connection, requests of both levels pipelined: each answered in order, whole.
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        answers = exchange_pipelined(sock, [
            get_request(lists, "carol-token"),
            get_request(f"{lists}/cm-7", "bob-token"),
            get_request(lists + "?limit=3", "carol-token"),
            get_request(f"{lists}/cm-9", "bob-token")])
    ok = [a[0] for a in answers] == [200] * 4 and \
        cms(answers[0][1]) == 400 and \
        json.loads(answers[1][1])["metadata"]["name"] == "cm-7" and \
        len(json.loads(answers[2][1])["items"]) == 3 and \
        json.loads(answers[3][1])["metadata"]["name"] == "cm-9"
    t.check("pipelined requests of both levels on one connection: every answer in order, whole",
            ok, [(a[0], a[1][:80]) for a in answers])

    # Over TLS, a kept-alive connection alternating between the levels.
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    conn = http.client.HTTPSConnection("127.0.0.1", server.secure_port, context=context, timeout=30)
    seen = []
    for i in range(12):
        token = "carol-token" if i % 2 == 0 else "bob-token"
        conn.request("GET", f"{lists}/cm-{i}", headers={"Authorization": f"Bearer {token}"})
        resp = conn.getresponse()
        body = resp.read()
        seen.append(resp.status == 200 and json.loads(body)["metadata"]["name"] == f"cm-{i}")
    conn.close()
    t.check("HTTPS: one kept-alive connection moving between the levels answers every request",
            all(seen), seen)


def check_dangling(t, port):
    schema = {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
              "metadata": {"name": "orphan"},
              "spec": {"priorityLevelConfiguration": {"name": "missing"}, "matchingPrecedence": 600,
                       "rules": [{"subjects": [{"kind": "User", "user": {"name": "bob"}}],
                                  "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}}
    call(port, "POST", f"{GROUP}/flowschemas", "admin-token", schema)
    wait_for(lambda: (dangling(port, "orphan") or {}).get("status") == "True",
             what="the Dangling condition of a FlowSchema naming a missing level")
    c = dangling(port, "orphan")
    t.check("a FlowSchema naming a missing level: Dangling True, NotFound, kube's message",
            c["reason"] == "NotFound" and c["message"] ==
            'This FlowSchema references the PriorityLevelConfiguration object named "missing" but '
            'there is no such object' and c.get("lastTransitionTime"), c)
    _, headers, _ = call(port, "GET", "/version", "bob-token")
    t.check("... and is not used", headers.get("x-kubernetes-pf-flowschema-uid") !=
            uid_of(port, "flowschemas", "orphan"), headers)
    level = {"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "PriorityLevelConfiguration",
             "metadata": {"name": "missing"},
             "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 5,
                                                     "limitResponse": {"type": "Queue", "queuing": {
                                                         "queues": 4, "handSize": 2, "queueLengthLimit": 10}}}}}
    call(port, "POST", f"{GROUP}/prioritylevelconfigurations", "admin-token", level)
    wait_for(lambda: (dangling(port, "orphan") or {}).get("status") == "False",
             what="the Dangling condition to clear")
    fs_uid = uid_of(port, "flowschemas", "orphan")
    wait_for(lambda: call(port, "GET", "/version", "bob-token")[1].get("x-kubernetes-pf-flowschema-uid") ==
             fs_uid, what="bob's non-resource requests to go to orphan")
    t.check("once the level exists: Dangling False and the FlowSchema is used", True)


def check_dumps(t, port):
    status, _, body = call(port, "GET", "/debug/api_priority_and_fairness/dump_priority_levels",
                           "admin-token")
    text = body.decode()
    t.check("dump_priority_levels: kube's columns, a row per level",
            status == 200 and text.startswith("PriorityLevelName, ActiveQueues, IsIdle, IsQuiescing,") and
            "\ntiny," in text and "\nworkload-low," in text, text[:400])
    status, _, body = call(port, "GET", "/debug/api_priority_and_fairness/dump_queues", "admin-token")
    t.check("dump_queues: a row per queue", status == 200 and
            body.decode().count("\nworkload-low,") == 128, body[:300])
    status, _, body = call(port, "GET",
                           "/debug/api_priority_and_fairness/dump_requests?includeRequestDetails=1",
                           "admin-token")
    t.check("dump_requests with details shows the dumping request itself",
            status == 200 and "UserName," in body.decode() and "admin" in body.decode(), body[:400])
    status, _, _ = call(port, "GET", "/debug/api_priority_and_fairness/dump_priority_levels", "bob-token")
    t.check("the dumps are refused to a user without the non-resource permission", status == 403, status)


def check_restart_restores(t, server, port):
    # The mandatory objects' specs are fixed (kube 1.34 validation); a user may still delete
    # them, delete a suggested one, or opt a suggested one out of updates.
    _, catch_all = get_json(port, f"{GROUP}/prioritylevelconfigurations/catch-all")
    catch_all["spec"]["limited"]["nominalConcurrencyShares"] = 99
    status, _, body = call(port, "PUT", f"{GROUP}/prioritylevelconfigurations/catch-all",
                           "admin-token", catch_all)
    t.check("the mandatory catch-all level's spec cannot be changed (422)",
            status == 422 and b"must equal the fixed value" in body, body[:300])
    s1, _, _ = call(port, "DELETE", f"{GROUP}/flowschemas/catch-all", "admin-token")
    s2, _, _ = call(port, "DELETE", f"{GROUP}/prioritylevelconfigurations/workload-low", "admin-token")
    # The server writes service-accounts' Dangling condition now that its level is gone: a
    # read-modify-write may meet a conflict and is done again, as clients do.
    def opt_out():
        _, accounts = get_json(port, f"{GROUP}/flowschemas/service-accounts")
        accounts["metadata"]["annotations"]["apf.kubernetes.io/autoupdate-spec"] = "false"
        accounts["spec"]["matchingPrecedence"] = 8000
        status, _, body = call(port, "PUT", f"{GROUP}/flowschemas/service-accounts", "admin-token",
                               accounts)
        return None if status == 409 else (status, body)
    s3, b3 = wait_for(opt_out, what="an update without conflict")
    t.check("a user deletes a mandatory and a suggested object and opts one out",
            (s1, s2, s3) == (200, 200, 200), (s1, s2, s3, b3[:200]))
    # Meanwhile the catch-all FlowSchema still serves: kube's mandatory objects are used even
    # when not stored.
    status, _, _ = call(port, "GET", "/api/v1/namespaces/default/configmaps?limit=1", "bob-token")
    t.check("requests are still classified without a stored catch-all", status == 200, status)
    # A kept-alive connection idle on the low-priority threads does not hold up shutdown.
    idle = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    idle.request("GET", "/api/v1/namespaces/default/configmaps/cm-1",
                 headers={"Authorization": "Bearer carol-token"})
    first = idle.getresponse()
    first.read()
    proc = server.proc
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        code = "still running after 20 s"
    t.check("with a connection idle on the low-priority threads, SIGTERM ends the server cleanly",
            first.status == 200 and code == 0, (first.status, code, server.read_log()[-800:]))
    idle.close()
    server.stop()
    server.start()
    port = server.port
    wait_for(lambda: "workload-low" in names(port, "prioritylevelconfigurations") and
             "catch-all" in names(port, "flowschemas"),
             what="the deleted objects to come back")
    t.check("at start-up the deleted mandatory and suggested objects are created again", True)
    _, accounts = get_json(port, f"{GROUP}/flowschemas/service-accounts")
    t.check("... and an object annotated autoupdate-spec=false keeps its user's spec",
            accounts["spec"]["matchingPrecedence"] == 8000, accounts["spec"])
    return port


def main():
    binary = sys.argv[1]
    t = Checks()
    with TempDir() as tmp:
        tokens = os.path.join(tmp, "tokens.csv")
        with open(tokens, "w") as f:
            f.write('admin-token,admin,1,"system:masters"\nalice-token,alice,2\nbob-token,bob,3\n'
                    'carol-token,carol,4\n')
        server = Server(binary, data_dir=os.path.join(tmp, "data"), https=True,
                        extra_args=[f"--token-auth-file={tokens}", "--authorization-mode=RBAC",
                                    "--anonymous-auth=true"]).start()
        port = server.port
        try:
            # alice and bob may read configmaps and see /version.
            binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                       "metadata": {"name": "readers"},
                       "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                   "name": "view"},
                       "subjects": [{"kind": "User", "name": "alice"}, {"kind": "User", "name": "bob"},
                                    {"kind": "User", "name": "carol"}]}
            call(port, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", "admin-token", binding)
            for i in range(400):
                call(port, "POST", "/api/v1/namespaces/default/configmaps", "admin-token",
                     {"metadata": {"name": f"cm-{i}"}, "data": {"v": "x" * 2000}})
            wait_for(lambda: call(port, "GET", "/api/v1/namespaces/default/configmaps?limit=1",
                                  "alice-token")[0] == 200, what="alice's permission")
            check_bootstrap(t, port)
            check_headers(t, port)
            check_own_level(t, server, port)
            check_low_cpu_priority(t, server, port)
            check_dangling(t, port)
            check_dumps(t, port)
            port = check_restart_restores(t, server, port)
            t.check("the server is alive", server.alive())
        finally:
            server.stop()

        off = Server(binary, extra_args=["--enable-priority-and-fairness=false",
                                         "--low-priority-threads=0"]).start()
        try:
            t.check("--low-priority-threads=0: no thread at nice 19", not niced_threads(off.proc.pid),
                    niced_threads(off.proc.pid))
            _, headers, _ = call(off.port, "GET", "/api/v1/namespaces/default/configmaps")
            t.check("--enable-priority-and-fairness=false: no classification headers",
                    "x-kubernetes-pf-flowschema-uid" not in headers, headers)
        finally:
            off.stop()
        p = subprocess.run([binary, "--port=0", "--secure-port=0", "--max-requests-inflight=0",
                            "--max-mutating-requests-inflight=0"], capture_output=True, text=True,
                           timeout=30)
        t.check("no seats at all with priority and fairness on: the server refuses to start",
                p.returncode != 0 and "must be positive when --enable-priority-and-fairness is true" in
                p.stdout + p.stderr, (p.returncode, (p.stdout + p.stderr)[-300:]))
    t.finish()


if __name__ == "__main__":
    main()
