"""Bearer tokens and RBAC as kube-apiserver applies them: --token-auth-file users, anonymous
requests, 401 for bad credentials, 403 Forbidden in kube's words, RoleBindings taking effect
within a second, system:masters, and kubectl and the Python client with a token.

Usage: authz_test.py <path to kwatch-apiserver>
"""
import http.client
import os
import shutil
import subprocess
import sys

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
            f.write('admin-token,admin,1,"system:masters"\nalice-token,alice,2,"team-a"\n')
        server = Server(binary, data_dir=tmp + "/data", https=True,
                        extra_args=[f"--token-auth-file={tokens}", "--authorization-mode=RBAC",
                                    f"--cert-dir={tmp}/certs"]).start()
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
            status, body = call(server, "GET", "/api/v1/namespaces/kube-system/pods", "alice-token")
            t.check("a RoleBinding grants only in its namespace", status == 403 and
                    'in the namespace "kube-system"' in body.get("message", ""), body)
            status, body = call(server, "POST", "/api/v1/namespaces/default/configmaps", "alice-token",
                                {"metadata": {"name": "x"}})
            t.check("view cannot create", status == 403 and "cannot create resource" in body.get("message", ""), body)
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

            check_clients(t, server, tmp)

            status, _ = call(server, "DELETE", f"{RBAC}/namespaces/default/rolebindings/team-a-view", "admin-token")
            wait_for(lambda: call(server, "GET", "/api/v1/namespaces/default/pods", "alice-token")[0] == 403,
                     timeout=1.5, what="the removed binding to stop granting")
            t.check("removing the binding takes the access away within a second", True)
        finally:
            server.stop()
    t.finish()


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
