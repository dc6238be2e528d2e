"""Delegated authentication and authorization, as kube's extension API servers run: a second
kwatch (B) started with --authentication-kubeconfig and --authorization-kubeconfig naming the
first (A), and no --requestheader-* flags. B reads the front proxy trust A publishes
(kube-system/extension-apiserver-authentication, which its account may read only through kube's
extension-apiserver-authentication-reader Role), judges A's tokens by TokenReviews and what its
own RBAC does not allow by SubjectAccessReviews, and serves a group through A's aggregator with
A's users and A's RBAC deciding. Decisions are remembered for the TTLs given; with A down, B's
own users and probes are untouched.

Usage: delegated_auth_test.py <path to kwatch-apiserver>
"""
import http.client
import json
import os
import shutil
import ssl
import subprocess
import sys
import time

from harness import (Checks, Server, TempDir, extension_api_objects, http_token_kubeconfig,
                     json_exchange, wait_for)
from pki import CA, kubeconfig as https_kubeconfig

GROUP = "ext.example.com"
WIDGETS = f"/apis/{GROUP}/v1/namespaces/default/widgets"


def call(server, method, path, body=None, token=None):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=20)
    return json_exchange(conn, method, path, body, None, token)


def binding(name, role, user, kind="ClusterRole"):
    return {"metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]}


def kubectl_with(server, tmp, token):
    """kubectl against server's HTTPS port with a bearer token (kubectl sends credentials only
    over TLS)."""
    kubectl = shutil.which("kubectl")
    if not kubectl:
        return None
    path = https_kubeconfig(os.path.join(tmp, f"kubeconfig-{token}"), server.secure_port,
                            os.path.join(tmp, "a-certs", "ca.crt"), token=token)
    env = dict(os.environ, HOME=tmp, KUBECONFIG=path)

    def kc(*args, stdin=None):
        p = subprocess.run([kubectl, *args], input=stdin, capture_output=True, text=True,
                           env=env, timeout=60)
        return p.returncode, p.stdout + p.stderr
    return kc


def as_front_proxy(server, cert, key, path):
    """A GET on server's HTTPS port with a front proxy's certificate, naming a system:masters
    user in the request headers; the status (a new connection each time)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.load_cert_chain(cert, key)
    conn = http.client.HTTPSConnection("127.0.0.1", server.secure_port, context=context,
                                       timeout=20)
    try:
        conn.request("GET", path, headers={"X-Remote-User": "proxied-admin",
                                           "X-Remote-Group": "system:masters"})
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def message(body):
    return body.get("message", "") if isinstance(body, dict) else str(body)


def main():
    binary = sys.argv[1]
    t = Checks()
    with TempDir() as tmp:
        front_proxy_ca = CA(tmp, "front-proxy-ca")
        proxy_cert, proxy_key = front_proxy_ca.client("front-proxy-client", cn="front-proxy-client")
        a_tokens = os.path.join(tmp, "a-tokens.csv")
        with open(a_tokens, "w") as f:
            f.write('admin-token,admin,1,"system:masters"\nalice-token,alice,2,"devs"\n'
                    "bob-token,bob,3\ndelegator-token,ext-server,4\n")
        a = Server(binary, data_dir=tmp + "/a", https=True, extra_args=(
            f"--token-auth-file={a_tokens}", "--authorization-mode=RBAC",
            f"--cert-dir={tmp}/a-certs",
            "--unsafe-webhook-loopback-endpoints=true",
            f"--proxy-client-cert-file={proxy_cert}", f"--proxy-client-key-file={proxy_key}",
            f"--requestheader-client-ca-file={front_proxy_ca.cert_file}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-")).start()
        b = None
        try:
            status, roles = call(a, "GET", "/apis/rbac.authorization.k8s.io/v1/namespaces/"
                                 "kube-system/roles", token="admin-token")
            t.check("A has kube's kube-system Role extension-apiserver-authentication-reader",
                    status == 200 and "extension-apiserver-authentication-reader" in
                    [r["metadata"]["name"] for r in roles.get("items", [])], roles)
            call(a, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                 binding("ext-server-delegator", "system:auth-delegator", "ext-server"),
                 token="admin-token")
            kubeconfig = http_token_kubeconfig(os.path.join(tmp, "delegate.kubeconfig"), a.port,
                                               "delegator-token")
            b_tokens = os.path.join(tmp, "b-tokens.csv")
            with open(b_tokens, "w") as f:
                f.write('b-admin-token,b-admin,1,"system:masters"\n')
            b_args = [f"--token-auth-file={b_tokens}", "--authorization-mode=RBAC",
                      f"--cert-dir={tmp}/b-certs", f"--authentication-kubeconfig={kubeconfig}",
                      f"--authorization-kubeconfig={kubeconfig}",
                      "--authorization-webhook-cache-authorized-ttl=1s",
                      "--authorization-webhook-cache-unauthorized-ttl=1s",
                      "--authentication-token-webhook-cache-ttl=1s"]
            # Not yet allowed to read the published trust: B does not start, in kube's words.
            refused = Server(binary, data_dir=tmp + "/b0", https=True, extra_args=b_args)
            try:
                refused.start()
                started = True
            except AssertionError as e:
                started = False
                why = str(e)
            finally:
                refused.stop()
            t.check("B refuses to start while it may not read extension-apiserver-authentication, "
                    "naming the Role to bind", not started and
                    "--role=extension-apiserver-authentication-reader" in why,
                    why[-600:] if not started else "started")
            call(a, "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/kube-system/"
                 "rolebindings", binding("ext-server-reads-auth",
                                         "extension-apiserver-authentication-reader",
                                         "ext-server", kind="Role"), token="admin-token")
            # A's authorizer takes in the binding from its cache a moment later; B's one lookup
            # at start (as kube's) must come after that.
            wait_for(lambda: call(a, "GET", "/api/v1/namespaces/kube-system/configmaps/"
                                  "extension-apiserver-authentication",
                                  token="delegator-token")[0] == 200,
                     timeout=10, what="A letting ext-server read the published trust")
            b = Server(binary, data_dir=tmp + "/b", https=True, extra_args=b_args).start()
            t.check("B takes the front proxy trust A publishes",
                    "front proxies are trusted as the delegated server publishes "
                    "(allowed names: front-proxy-client)" in b.read_log(), b.read_log()[-2000:])

            status, out = call(b, "POST", "/apis/apiextensions.k8s.io/v1/"
                               "customresourcedefinitions", {
                                   "apiVersion": "apiextensions.k8s.io/v1",
                                   "kind": "CustomResourceDefinition",
                                   "metadata": {"name": f"widgets.{GROUP}"},
                                   "spec": {"group": GROUP, "scope": "Namespaced",
                                            "names": {"plural": "widgets", "kind": "Widget"},
                                            "versions": [{"name": "v1", "served": True,
                                                          "storage": True, "schema": {
                                                              "openAPIV3Schema": {
                                                                  "type": "object",
                                                                  "x-kubernetes-preserve-unknown-fields": True}}}]}},
                               token="b-admin-token")
            wait_for(lambda: call(b, "GET", WIDGETS, token="b-admin-token")[0] == 200,
                     timeout=20, what="B serves widgets")
            call(b, "POST", WIDGETS, {"apiVersion": f"{GROUP}/v1", "kind": "Widget",
                                      "metadata": {"name": "w1"}}, token="b-admin-token")
            # A's RBAC says who may read widgets, though A does not serve them.
            call(a, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", {
                "metadata": {"name": "widget-reader"},
                "rules": [{"apiGroups": [GROUP], "resources": ["widgets"],
                           "verbs": ["get", "list", "watch"]}]}, token="admin-token")
            call(a, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                 binding("alice-reads-widgets", "widget-reader", "alice"), token="admin-token")

            # A's policy takes in the new binding a moment later; B remembers a denial for 1 s.
            wait_for(lambda: call(b, "GET", WIDGETS, token="alice-token")[0] == 200, timeout=10,
                     what="alice allowed by B")
            status, out = call(b, "GET", WIDGETS, token="alice-token")
            t.check("B knows A's token of alice (a TokenReview) and lets her list what A's RBAC "
                    "allows (a SubjectAccessReview)",
                    status == 200 and [i["metadata"]["name"] for i in out.get("items", [])] ==
                    ["w1"], (status, out))
            review = {"apiVersion": "authorization.k8s.io/v1",
                      "kind": "SelfSubjectAccessReview",
                      "spec": {"resourceAttributes": {"namespace": "default", "verb": "list",
                                                      "group": GROUP, "resource": "widgets"}}}
            answers = [call(b, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                            review, token=who)[1].get("status", {})
                       for who in ("alice-token", "bob-token")]
            t.check("B's SelfSubjectAccessReviews agree: allowed for alice (A says so), not for bob",
                    answers[0].get("allowed") is True and answers[1].get("allowed") is False,
                    answers)
            status, out = call(b, "GET", WIDGETS, token="bob-token")
            t.check("... and refuses bob, whom neither allows, with a 403 in kube's words",
                    status == 403 and 'User "bob" cannot list resource "widgets" in API group '
                    '"ext.example.com" in the namespace "default"' in message(out), (status, out))
            status, out = call(b, "GET", WIDGETS, token="made-up-token")
            t.check("a token A does not know is a 401 on B", status == 401, (status, out))

            # Through A's aggregator: A proxies with X-Remote-User, B trusts A's proxy
            # certificate (from the published CA) and asks A about alice.
            kc = kubectl_with(a, tmp, "admin-token")
            as_alice = kubectl_with(a, tmp, "alice-token")
            if kc is None:
                print("SKIP: kubectl is not installed")
                sys.exit(77)
            kc("create", "namespace", "ext")
            for obj in extension_api_objects(GROUP, "v1", b.secure_port):
                code, out = kc("apply", "-f", "-", stdin=json.dumps(obj))
                t.check(f"kubectl apply of {obj['kind']} on A", code == 0, out)

            def condition():
                code, out = kc("get", "apiservice", f"v1.{GROUP}", "-o", "json")
                if code != 0:
                    return {}
                for c in json.loads(out).get("status", {}).get("conditions", []):
                    if c.get("type") == "Available":
                        return c
                return {}
            c = wait_for(lambda: (lambda c: c.get("status") == "True" and c)(condition()),
                         timeout=20, what=f"B's APIService available ({condition()})")
            t.check("B's APIService is Available: B authenticated A's discovery check by the "
                    "published front proxy CA and A allowed system:kube-aggregator",
                    bool(c), condition())
            code, out = as_alice("get", f"widgets.{GROUP}")
            t.check("kubectl get through A as alice: B asks A, which allows her",
                    code == 0 and "w1" in out, out)
            code, out = as_alice("auth", "can-i", "delete", f"widgets.{GROUP}")
            t.check("... and kubectl auth can-i on A agrees she may not delete them",
                    code != 0 and "no" in out, out)

            # Alice's grant taken away on A: B follows once its remembered decision expires.
            call(a, "DELETE", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/"
                 "alice-reads-widgets", token="admin-token")
            gone = wait_for(lambda: call(b, "GET", WIDGETS, token="alice-token")[0] == 403,
                            timeout=15, what="alice refused by B")
            t.check("revoked on A, alice is refused by B within the cache's TTL", bool(gone))

            # The front proxy CA rotated on A: B follows what A publishes while it serves. A
            # proxy certificate of the new CA, with its allowed name, is trusted within seconds;
            # one of the old CA no longer is.
            ca2 = CA(tmp, "front-proxy-ca-2")
            proxy2_cert, proxy2_key = ca2.client("front-proxy-2", cn="front-proxy-2")
            t.check("before the rotation, B trusts the published front proxy CA's certificate",
                    as_front_proxy(b, proxy_cert, proxy_key, WIDGETS) == 200)
            t.check("... and not one of the new CA", as_front_proxy(b, proxy2_cert, proxy2_key,
                                                                    WIDGETS) == 401)
            path = "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication"
            status, published = call(a, "GET", path, token="admin-token")
            with open(ca2.cert_file) as f:
                published["data"]["requestheader-client-ca-file"] = f.read()
            published["data"]["requestheader-allowed-names"] = '["front-proxy-2"]'
            status, out = call(a, "PUT", path, published, token="admin-token")
            t.check("A's published trust rotated to the new front proxy CA", status == 200,
                    (status, out))
            taken = wait_for(lambda: as_front_proxy(b, proxy2_cert, proxy2_key, WIDGETS) == 200,
                             timeout=20, what="B trusting the new front proxy CA")
            t.check("B takes the rotated front proxy CA and allowed name while serving", taken)
            t.check("... and refuses the old CA's proxy certificate",
                    as_front_proxy(b, proxy_cert, proxy_key, WIDGETS) == 401)
            t.check("B logs the change", "the trust the delegated server publishes changed "
                    "(front proxies)" in b.read_log(), b.read_log()[-1500:])
            # A CA bundle that is not one: B keeps the trust in force, and says so.
            status, published = call(a, "GET", path, token="admin-token")
            published["data"]["requestheader-client-ca-file"] = "not a certificate"
            status, out = call(a, "PUT", path, published, token="admin-token")
            refused = wait_for(lambda: "changed, and cannot be used" in b.read_log(), timeout=20,
                               what="B refusing the broken trust")
            t.check("a published CA that does not load is refused, and logged", refused)
            t.check("... and B still trusts the front proxy CA in force",
                    as_front_proxy(b, proxy2_cert, proxy2_key, WIDGETS) == 200)

            # A down: B's own users and its probes are untouched; A's tokens no longer work.
            a.stop()
            status, _ = call(b, "GET", WIDGETS, token="b-admin-token")
            t.check("with A down, B's own system:masters user is served", status == 200, status)
            start = time.monotonic()
            status, _ = call(b, "GET", "/readyz")
            t.check("... B's /readyz answers at once", status == 200 and
                    time.monotonic() - start < 1, status)
            status, out = call(b, "GET", WIDGETS, token="another-token")
            t.check("... and a token only A could judge is a 401 after kube's retries",
                    status == 401, (status, out))
            t.check("B alive", b.alive())
        finally:
            if b is not None:
                b.stop()
            a.stop()
    t.finish()


if __name__ == "__main__":
    main()
