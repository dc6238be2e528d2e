"""Bearer tokens and RBAC as kube-apiserver applies them: --token-auth-file users, anonymous
requests, 401 for bad credentials, 403 Forbidden in kube's words, RoleBindings taking effect
within a second, system:masters, and kubectl and the Python client with a token.

Usage: authz_test.py <path to kwatch-apiserver>
"""
import http.client
import json
import os
import shutil
import ssl
import subprocess
import sys
import threading

from harness import Checks, Server, TempDir, json_exchange, wait_for

RBAC = "/apis/rbac.authorization.k8s.io/v1"


def call(server, method, path, token=None, body=None, content_type="application/json"):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    return json_exchange(conn, method, path, body, {"Content-Type": content_type}, token)


def main():
    binary = sys.argv[1]
    t = Checks()
    with TempDir() as tmp:
        tokens = os.path.join(tmp, "tokens.csv")
        with open(tokens, "w") as f:
            f.write('admin-token,admin,1,"system:masters"\nalice-token,alice,2,"team-a"\n'
                    'imp-token,imp,3,""\n')
        server = Server(binary, data_dir=tmp + "/data", https=True,
                        extra_args=[f"--token-auth-file={tokens}", "--authorization-mode=RBAC",
                                    f"--cert-dir={tmp}/certs",
                                    f"--audit-log-path={tmp}/audit.log"]).start()
        try:
            status, body = call(server, "GET", "/api/v1/namespaces/default/pods")
            t.check("anonymous: listing pods is 403 in kube's words", status == 403 and
                    body.get("message") == 'pods is forbidden: User "system:anonymous" cannot list resource '
                    '"pods" in API group "" in the namespace "default"', body)
            status, _ = call(server, "GET", "/version")
            t.check("anonymous: /version is public (system:public-info-viewer)", status == 200, status)
            status, body = call(server, "GET", "/api/v1/pods", token="not-a-token")
            t.check("an unknown token is 401", status == 401 and body.get("reason") == "Unauthorized", body)
            status, body = call(server, "GET", "/api/v1/namespaces/default/pods", token="alice-token")
            t.check("alice without bindings: 403", status == 403, body)
            status, body = call(server, "GET", "/metrics", token="alice-token")
            t.check("a non-resource path she has no rule for: 403 naming the path", status == 403 and
                    'cannot get path "/metrics"' in body.get("message", ""), body)
            status, _ = call(server, "GET", "/api/v1/namespaces/default/secrets", token="admin-token")
            t.check("system:masters may do anything", status == 200, status)
            status, body = call(server, "GET", "/api/v1/componentstatuses", token="alice-token")
            t.check("componentstatuses are authorized like any resource: 403 for alice",
                    status == 403 and body.get("message") == 'componentstatuses is forbidden: User '
                    '"alice" cannot list resource "componentstatuses" in API group "" at the cluster '
                    'scope', body)
            status, body = call(server, "GET", "/api/v1/componentstatuses/etcd-0", token="admin-token")
            t.check("and served to system:masters", status == 200 and body.get("kind") == "ComponentStatus",
                    body)

            review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                      "spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}}
            for path in ("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                         "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
                         "/apis/authentication.k8s.io/v1/selfsubjectreviews"):
                status, body = call(server, "POST", path, body=review)
                t.check(f"anonymous may not create {path.rsplit('/', 1)[1]} (system:basic-user is for "
                        "authenticated users)", status == 403, body)
            status, body = call(server, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                                token="alice-token", body=review)
            t.check("an authenticated user may ask about herself", status == 201, body)

            # Static tokens are for the API's audiences only.
            tr = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                  "spec": {"token": "alice-token", "audiences": ["vault"]}}
            status, body = call(server, "POST", "/apis/authentication.k8s.io/v1/tokenreviews", "admin-token", tr)
            t.check("TokenReview of a static token for another audience: not authenticated",
                    status == 201 and body["status"].get("authenticated") is not True, body)
            del tr["spec"]["audiences"]
            status, body = call(server, "POST", "/apis/authentication.k8s.io/v1/tokenreviews", "admin-token", tr)
            t.check("... and for the API's own: authenticated as alice", status == 201 and
                    body["status"].get("authenticated") is True and
                    body["status"]["user"]["username"] == "alice", body)

            binding = {"metadata": {"name": "team-a-view"},
                       "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
                       "subjects": [{"kind": "Group", "name": "team-a", "apiGroup": "rbac.authorization.k8s.io"}]}
            status, body = call(server, "POST", f"{RBAC}/namespaces/default/rolebindings", "admin-token", binding)
            t.check("admin binds view to alice's group in default", status == 201, body)
            wait_for(lambda: call(server, "GET", "/api/v1/namespaces/default/pods", "alice-token")[0] == 200,
                     timeout=1.5, what="the binding to take effect within a second")
            t.check("the binding takes effect within a second", True)
            status, _ = call(server, "GET", "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1",
                             "alice-token")
            t.check("view includes watch", status == 200, status)
            status, body = call(server, "GET", "/api/v1/namespaces/default/secrets", "alice-token")
            t.check("view does not include secrets", status == 403, body)
            status, body = call(server, "GET", "/api/v1/namespaces/default", "alice-token")
            t.check("view bound in a namespace may get that namespace (its namespace is itself)",
                    status == 200 and body.get("metadata", {}).get("name") == "default", body)
            status, body = call(server, "GET", "/api/v1/namespaces/kube-system", "alice-token")
            t.check("... and not another one", status == 403, body)
            status, body = call(server, "GET", "/api/v1/namespaces/default/configmaps?watch=FALSE", "alice-token")
            t.check("watch=FALSE is a list, as kube's parameter codec reads it", status == 200 and
                    body.get("kind") == "ConfigMapList", body)
            one = {"metadata": {"name": "one-secret"},
                   "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"],
                              "resourceNames": ["s1"]}]}
            status, body = call(server, "POST", f"{RBAC}/namespaces/default/roles", "admin-token", one)
            t.check("admin creates a role for one secret by name", status == 201, body)
            status, body = call(server, "POST", f"{RBAC}/namespaces/default/rolebindings", "admin-token",
                                {"metadata": {"name": "alice-one-secret"},
                                 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                             "name": "one-secret"},
                                 "subjects": [{"kind": "User", "name": "alice",
                                               "apiGroup": "rbac.authorization.k8s.io"}]})
            t.check("... bound to alice", status == 201, body)
            call(server, "POST", "/api/v1/namespaces/default/secrets", "admin-token", {"metadata": {"name": "s1"}})
            wait_for(lambda: call(server, "GET", "/api/v1/namespaces/default/secrets/s1", "alice-token")[0] == 200,
                     timeout=1.5, what="the binding to take effect")
            status, body = call(server, "GET", "/api/v1/namespaces/default/secrets?fieldSelector=metadata.name%3Ds1"
                                "&watch=1&timeoutSeconds=1", "alice-token")
            t.check("a watch of the one secret by metadata.name is allowed by resourceNames (kubectl get -w)",
                    status == 200, body)
            status, body = call(server, "GET", "/api/v1/namespaces/default/secrets?fieldSelector=metadata.name%3Ds1",
                                "alice-token")
            t.check("... so is a list of it", status == 200 and [i["metadata"]["name"] for i in body["items"]] == ["s1"],
                    body)
            status, body = call(server, "GET", "/api/v1/namespaces/default/secrets?watch=1&timeoutSeconds=1",
                                "alice-token")
            t.check("a watch of every secret is not", status == 403, body)
            call(server, "DELETE", f"{RBAC}/namespaces/default/rolebindings/alice-one-secret", "admin-token")
            status, body = call(server, "GET", "/api/v1/namespaces/kube-system/pods", "alice-token")
            t.check("a RoleBinding grants only in its namespace", status == 403 and
                    'in the namespace "kube-system"' in body.get("message", ""), body)
            status, body = call(server, "POST", "/api/v1/namespaces/default/configmaps", "alice-token",
                                {"metadata": {"name": "x"}})
            t.check("view cannot create", status == 403 and "cannot create resource" in body.get("message", ""), body)
            # The legacy bindings collection is authorized as create on bindings, before its body
            # is read (the pod it names is bound only for a user who may).
            status, body = call(server, "POST", "/api/v1/namespaces/default/bindings", "alice-token",
                                {"metadata": {"name": "any"}, "target": {"kind": "Node", "name": "n"}})
            t.check("view cannot bind a pod through bindings", status == 403 and
                    'cannot create resource "bindings"' in body.get("message", ""), body)
            status, body = call(server, "GET", "/api/v1/namespaces", "alice-token")
            t.check("cluster-scoped list: 403 at the cluster scope", status == 403 and
                    "at the cluster scope" in body.get("message", ""), body)

            # Escalation: alice may create roles in default now (edit is needed for that, so grant
            # her edit there), but not one holding more than she does.
            edit_binding = {"metadata": {"name": "alice-edit"},
                            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                        "name": "admin"},
                            "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}]}
            status, body = call(server, "POST", f"{RBAC}/namespaces/default/rolebindings", "admin-token",
                                edit_binding)
            wait_for(lambda: call(server, "GET", f"{RBAC}/namespaces/default/roles", "alice-token")[0] == 200,
                     timeout=1.5, what="admin in default")
            small = {"metadata": {"name": "cm-reader"},
                     "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}
            status, body = call(server, "POST", f"{RBAC}/namespaces/default/roles", "alice-token", small)
            t.check("a role within what the writer holds is created", status == 201, body)
            big = {"metadata": {"name": "nodes-everything"},
                   "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["*"]}]}
            status, body = call(server, "POST", f"{RBAC}/namespaces/default/roles", "alice-token", big)
            t.check("a role holding more than the writer is 403, listing what she lacks", status == 403 and
                    "is attempting to grant RBAC permissions not currently held" in body.get("message", "")
                    and 'Resources:["nodes"]' in body.get("message", ""), body)
            grab = {"metadata": {"name": "alice-admin"},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                "name": "cluster-admin"},
                    "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}]}
            status, body = call(server, "POST", f"{RBAC}/namespaces/default/rolebindings", "alice-token", grab)
            t.check("binding herself to cluster-admin is 403", status == 403 and
                    "not currently held" in body.get("message", ""), body)
            # PATCH is checked on the patched object, whatever the patch type.
            patches = [
                ("application/merge-patch+json",
                 {"rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["*"]}]}),
                ("application/json-patch+json",
                 [{"op": "add", "path": "/rules/-", "value": {"apiGroups": [""], "resources": ["nodes"],
                                                              "verbs": ["delete"]}}]),
                ("application/strategic-merge-patch+json",
                 {"rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]},
                            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]}),
            ]
            for content_type, patch in patches:
                status, body = call(server, "PATCH", f"{RBAC}/namespaces/default/roles/cm-reader", "alice-token",
                                    patch, content_type=content_type)
                t.check(f"a {content_type} that grows a role past the writer is 403", status == 403 and
                        "not currently held" in body.get("message", ""), body)
            status, body = call(server, "PATCH", f"{RBAC}/namespaces/default/roles/cm-reader", "alice-token",
                                {"rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]},
                                content_type="application/merge-patch+json")
            t.check("a patch within what the writer holds applies", status == 200 and
                    body["rules"][0]["verbs"] == ["get", "list"], body)
            status, body = call(server, "PATCH", f"{RBAC}/namespaces/default/rolebindings/alice-edit", "alice-token",
                                {"roleRef": {"name": "cluster-admin"}}, content_type="application/merge-patch+json")
            t.check("patching a binding to point at cluster-admin is refused", status in (403, 422), body)
            status, body = call(server, "PATCH", f"{RBAC}/namespaces/default/roles/cm-reader", "alice-token",
                                {"metadata": {"resourceVersion": "1"}, "rules": []},
                                content_type="application/merge-patch+json")
            t.check("a patch's resourceVersion is still a precondition (409)", status == 409, body)
            call(server, "DELETE", f"{RBAC}/namespaces/default/rolebindings/alice-edit", "admin-token")

            check_impersonation_audit(t, server, tmp)
            check_clients(t, server, tmp)
            check_start_up(t, server)

            status, _ = call(server, "DELETE", f"{RBAC}/namespaces/default/rolebindings/team-a-view", "admin-token")
            wait_for(lambda: call(server, "GET", "/api/v1/namespaces/default/pods", "alice-token")[0] == 403,
                     timeout=1.5, what="the removed binding to stop granting")
            t.check("removing the binding takes the access away within a second", True)
        finally:
            server.stop()
    t.finish()


def check_impersonation_audit(t, server, tmp):
    """The audit log names who authenticated (`user`) and whom they acted as (`impersonatedUser`),
    for allowed and refused impersonation alike."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    conn.request("GET", "/version",
                 headers={"Authorization": "Bearer admin-token", "Impersonate-User": "alice"})
    r = conn.getresponse()
    r.read()
    allowed_id = r.getheader("Audit-Id")
    t.check("admin may act as alice", r.status == 200, r.status)
    conn.request("GET", "/api/v1/namespaces/default/configmaps",
                 headers={"Authorization": "Bearer alice-token", "Impersonate-User": "admin",
                          "Impersonate-Group": "system:masters"})
    r = conn.getresponse()
    r.read()
    refused_id = r.getheader("Audit-Id")
    t.check("alice may not act as admin", r.status == 403, r.status)
    conn.close()

    def events(audit_id):
        with open(os.path.join(tmp, "audit.log")) as f:
            return [e for e in map(json.loads, f) if e.get("auditID") == audit_id]
    # Extra attributes: impersonated with `impersonate` on userextras/<key>, shown by whoami.
    status, body = json_exchange(http.client.HTTPConnection("127.0.0.1", server.port, timeout=10), "POST",
                                 "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                                 {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
                                 {"Content-Type": "application/json", "Impersonate-User": "alice",
                                  "Impersonate-Extra-Acme.com%2fProject": "p1"}, "admin-token")
    t.check("Impersonate-Extra-<key>: the user acted as has the extra (key lowercased, unescaped)",
            status == 201 and body["status"]["userInfo"].get("extra") == {"acme.com/project": ["p1"]}, body)
    role = {"metadata": {"name": "impersonate-users"},
            "rules": [{"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"]}]}
    json_exchange(http.client.HTTPConnection("127.0.0.1", server.port, timeout=10), "POST",
                  "/apis/rbac.authorization.k8s.io/v1/clusterroles", role, {"Content-Type": "application/json"},
                  "admin-token")
    json_exchange(http.client.HTTPConnection("127.0.0.1", server.port, timeout=10), "POST",
                  "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                  {"metadata": {"name": "imp"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                               "name": "impersonate-users"},
                   "subjects": [{"kind": "User", "name": "imp", "apiGroup": "rbac.authorization.k8s.io"}]},
                  {"Content-Type": "application/json"}, "admin-token")

    def imp(extra):
        headers = {"Impersonate-User": "alice"}
        if extra:
            headers["Impersonate-Extra-Scopes"] = "all"
        return json_exchange(http.client.HTTPConnection("127.0.0.1", server.port, timeout=10), "GET",
                             "/version", None, headers, "imp-token")
    wait_for(lambda: imp(False)[0] == 200, timeout=2, what="imp's binding")
    status, body = imp(True)
    t.check("an extra needs impersonate on userextras/<key> (403 naming it)", status == 403 and
            'cannot impersonate resource "userextras/scopes"' in body.get("message", ""), body)
    wait_for(lambda: events(allowed_id) and events(refused_id), what="the two audit lines")
    allowed, refused = events(allowed_id)[0], events(refused_id)[0]
    t.check("an allowed impersonation is logged with the real user and the impersonated one",
            allowed["user"]["username"] == "admin" and allowed.get("impersonatedUser", {}).get("username") == "alice",
            allowed)
    t.check("a refused impersonation is logged with the real user and whom it asked for",
            refused["user"]["username"] == "alice" and "team-a" in refused["user"].get("groups", []) and
            refused.get("impersonatedUser", {}).get("username") == "admin" and
            refused["responseStatus"]["code"] == 403, refused)


def check_start_up(t, server):
    """While a restarted server loads its RBAC policy, no request gets a 403 that is not a
    decision: system:masters is let through before RBAC is consulted, others get 503 with
    Retry-After until the policy exists (a leader-election client that gets 403 on its lock
    renewal gives up leadership)."""
    server.stop()
    seen = {"admin": [], "alice": []}
    stop = threading.Event()
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE

    def poll():
        while not stop.is_set():
            for who, token in (("admin", "admin-token"), ("alice", "alice-token")):
                try:
                    conn = http.client.HTTPSConnection("127.0.0.1", server.secure_port, timeout=2,
                                                       context=context)
                    conn.request("GET", "/api/v1/namespaces/default/configmaps",
                                 headers={"Authorization": f"Bearer {token}"})
                    r = conn.getresponse()
                    r.read()
                    seen[who].append((r.status, r.getheader("Retry-After")))
                    conn.close()
                except OSError:
                    pass  # not listening yet
    poller = threading.Thread(target=poll)
    poller.start()
    try:
        server.start()
        wait_for(lambda: sum(1 for s, _ in seen["alice"] if s == 200) >= 20, what="answers after the start")
    finally:
        stop.set()
        poller.join()
    t.check("during start-up system:masters is never refused", all(s == 200 for s, _ in seen["admin"]),
            seen["admin"][:20])
    t.check("during start-up others get 503 with Retry-After or an answer, never 403",
            all(s == 200 or (s == 503 and r == "1") for s, r in seen["alice"]), seen["alice"][:20])


def check_clients(t, server, tmp):
    kubectl = shutil.which("kubectl")
    if kubectl:
        # kubectl sends a bearer token over HTTPS only.
        kubeconfig = os.path.join(tmp, "kubeconfig-alice")
        with open(kubeconfig, "w") as f:
            f.write(f"""apiVersion: v1
kind: Config
clusters: [{{name: k, cluster: {{server: "https://127.0.0.1:{server.secure_port}", certificate-authority: "{tmp}/certs/ca.crt"}}}}]
contexts: [{{name: k, context: {{cluster: k, user: alice, namespace: default}}}}]
current-context: k
users: [{{name: alice, user: {{token: alice-token}}}}]
""")
        env = dict(os.environ, KUBECONFIG=kubeconfig, HOME=tmp)
        p = subprocess.run([kubectl, "get", "configmaps"], capture_output=True, text=True, env=env, timeout=60)
        t.check("kubectl with alice's token lists configmaps", p.returncode == 0, p.stdout + p.stderr)
        p = subprocess.run([kubectl, "get", "secrets"], capture_output=True, text=True, env=env, timeout=60)
        t.check("kubectl with alice's token is refused secrets in kube's words", p.returncode != 0 and
                'User "alice" cannot list resource "secrets"' in p.stderr, p.stderr)

        def auth(*args):
            p = subprocess.run([kubectl, "auth", *args], capture_output=True, text=True, env=env, timeout=60)
            return p.stdout.strip()
        who = auth("whoami")
        t.check("kubectl auth whoami", "alice" in who and "team-a" in who and "system:authenticated" in who, who)
        t.check("kubectl auth can-i list configmaps: yes", auth("can-i", "list", "configmaps") == "yes")
        t.check("kubectl auth can-i list secrets: no", auth("can-i", "list", "secrets") == "no")
        t.check("kubectl auth can-i in another namespace: no",
                auth("can-i", "list", "configmaps", "-n", "kube-system") == "no")
        t.check("kubectl auth can-i get /version: yes", auth("can-i", "get", "/version") == "yes")
        rules = auth("can-i", "--list")
        t.check("kubectl auth can-i --list shows view's rules", "configmaps" in rules and "secrets" not in rules,
                rules[:600])
    script = f"""
from kubernetes import client
cfg = client.Configuration()
cfg.host = "http://127.0.0.1:{server.port}"
cfg.api_key = {{"authorization": "alice-token"}}
cfg.api_key_prefix = {{"authorization": "Bearer"}}
api = client.CoreV1Api(client.ApiClient(cfg))
print("configmaps", len(api.list_namespaced_config_map("default").items) >= 0)
try:
    api.list_namespaced_secret("default")
    print("secrets allowed")
except client.exceptions.ApiException as e:
    print("secrets", e.status)
"""
    p = subprocess.run(["/usr/bin/python3", "-c", script], capture_output=True, text=True, timeout=60)
    if "No module named 'kubernetes'" in p.stderr:
        return
    t.check("the Python client with a bearer token", "configmaps True" in p.stdout and "secrets 403" in p.stdout,
            p.stdout + p.stderr[-400:])


if __name__ == "__main__":
    main()
