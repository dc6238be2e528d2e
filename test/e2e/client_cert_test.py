"""X.509 client certificates as kube-apiserver takes them (--client-ca-file): CN is the user, O
the groups; a certificate from another CA, expired, not yet valid or not for client auth is a
401, even when anonymous requests are allowed; a certificate without a CN names nobody; a bad
certificate does not hide a good bearer token. kubectl and the Python client with a certificate,
the server started with the secure defaults (HTTPS only, RBAC, no anonymous access).

Usage: client_cert_test.py <path to kwatch-apiserver>
"""
import json
import os
import shutil
import subprocess
import sys
import warnings

from cryptography.x509.oid import ExtendedKeyUsageOID

from harness import Checks, Server, TempDir
import pki


def call(port, ca, path, cert=None, token=None, method="GET", body=None):
    return pki.HttpsClient(port, ca, cert, token).call(method, path, body)


def whoami(port, ca, cert=None, token=None):
    status, body = call(port, ca, "/apis/authentication.k8s.io/v1/selfsubjectreviews", cert, token,
                        "POST", {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    if status != 201:
        return status, body
    info = body["status"]["userInfo"]
    return status, (info.get("username"), info.get("groups"))


def main():
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    binary = sys.argv[1]
    t = Checks()
    with TempDir() as tmp:
        clients = pki.CA(tmp, "client-ca")
        other = pki.CA(tmp, "other-ca")
        admin = clients.client("admin", cn="kwatch-admin", orgs=["system:masters"])
        dev = clients.client("dev", cn="dev", orgs=["team-a", "team-b"])
        tokens = os.path.join(tmp, "tokens.csv")
        with open(tokens, "w") as f:
            f.write('ops-token,ops,7,"system:masters"\n')
        # The defaults under test: only the flags a user must give, then plain HTTP off again.
        server = Server(binary, data_dir=tmp + "/data", https=True,
                        extra_args=[f"--cert-dir={tmp}/certs",
                                    f"--client-ca-file={clients.cert_file}",
                                    f"--token-auth-file={tokens}",
                                    "--authorization-mode=RBAC", "--anonymous-auth=false"]).start()
        port = server.secure_port
        ca = os.path.join(tmp, "certs", "ca.crt")
        try:
            status, who = whoami(port, ca, admin)
            t.check("CN is the user, O the groups, plus system:authenticated",
                    who == ("kwatch-admin", ["system:masters", "system:authenticated"]), (status, who))
            status, who = whoami(port, ca, dev)
            t.check("several O values are several groups",
                    who == ("dev", ["team-a", "team-b", "system:authenticated"]), (status, who))
            status, body = call(port, ca, "/api/v1/namespaces/default/secrets", dev)
            t.check("an authenticated user without bindings gets 403 naming it",
                    status == 403 and 'User "dev" cannot list resource "secrets"' in body.get("message", ""),
                    body)
            status, body = call(port, ca, "/api/v1/namespaces/default/secrets", admin)
            t.check("system:masters may list secrets", status == 200, status)

            status, body = call(port, ca, "/api/v1/namespaces")
            t.check("no credentials and --anonymous-auth=false: 401 Unauthorized Status",
                    status == 401 and body.get("kind") == "Status" and body.get("reason") == "Unauthorized",
                    body)
            status, body = call(port, ca, "/readyz")
            t.check("health probes stay anonymous with --anonymous-auth=false", status == 200, body)
            status, body = call(port, ca, "/readyz/etcd")
            t.check("a single check, which tells why it fails, is not anonymous: 401",
                    status == 401, (status, body))
            status, body = call(port, ca, "/readyz/watch-caches", dev)
            t.check("... and needs a grant for its path: 403 for a user without bindings",
                    status == 403, (status, body))
            status, body = call(port, ca, "/readyz/watch-caches", admin)
            t.check("... which system:masters has", status == 200 and body == "ok", (status, body))
            status, body = call(port, ca, "/readyz", token="not-a-token")
            t.check("a probe with a bad token is still a 401", status == 401, body)
            bad = {
                "a certificate from another CA": other.client("stranger", cn="kwatch-admin",
                                                             orgs=["system:masters"]),
                "an expired certificate": clients.client("expired", cn="kwatch-admin",
                                                         orgs=["system:masters"],
                                                         valid_from_minutes=-120, valid_for_minutes=60),
                "a certificate not valid yet": clients.client("future", cn="kwatch-admin",
                                                              orgs=["system:masters"],
                                                              valid_from_minutes=60),
                "a certificate only for servers": clients.client(
                    "server-only", cn="kwatch-admin", orgs=["system:masters"],
                    usages=(ExtendedKeyUsageOID.SERVER_AUTH,)),
                "a certificate without a CN": clients.client("anonymous", orgs=["system:masters"]),
            }
            for what, cert in bad.items():
                status, body = call(port, ca, "/api/v1/namespaces", cert)
                t.check(f"{what}: 401", status == 401 and body.get("reason") == "Unauthorized",
                        (status, body))
            status, who = whoami(port, ca, bad["an expired certificate"], token="ops-token")
            t.check("a bad certificate does not hide a good token", who == (
                "ops", ["system:masters", "system:authenticated"]), (status, who))
            status, who = whoami(port, ca, dev, token="ops-token")
            t.check("a good certificate is taken before a token, as kube does", status == 201 and
                    who[0] == "dev", (status, who))
            t.check("the server is alive after bad certificates", server.alive())

            kubectl = shutil.which("kubectl")
            if kubectl:
                cfg = pki.kubeconfig(os.path.join(tmp, "admin.kubeconfig"), port, ca, *admin)
                env = dict(os.environ, KUBECONFIG=cfg)

                def run(*args):
                    return subprocess.run([kubectl, *args], env=env, capture_output=True,
                                          text=True, timeout=60)
                p = run("auth", "whoami", "-o", "json")
                t.check("kubectl auth whoami with a client certificate", p.returncode == 0 and
                        json.loads(p.stdout)["status"]["userInfo"]["username"] == "kwatch-admin",
                        p.stdout + p.stderr)
                p = run("create", "namespace", "certs")
                t.check("kubectl creates with a client certificate", p.returncode == 0, p.stderr)
                p = run("get", "namespaces", "-o", "name")
                t.check("kubectl lists with a client certificate", "namespace/certs" in p.stdout,
                        p.stdout + p.stderr)
                cfg = pki.kubeconfig(os.path.join(tmp, "expired.kubeconfig"), port, ca,
                                     *bad["an expired certificate"])
                p = subprocess.run([kubectl, "get", "ns"], env=dict(os.environ, KUBECONFIG=cfg),
                                   capture_output=True, text=True, timeout=60)
                t.check("kubectl with an expired certificate: must be logged in (401)",
                        p.returncode != 0 and "Unauthorized" in p.stderr, p.stderr)
            else:
                t.check("kubectl is installed (scripts/install-deps.sh)", False)

            try:
                from kubernetes import client as kclient
                conf = kclient.Configuration()
                conf.host = f"https://127.0.0.1:{port}"
                conf.ssl_ca_cert = ca
                conf.cert_file, conf.key_file = dev
                api = kclient.CoreV1Api(kclient.ApiClient(conf))
                try:
                    api.list_namespaced_secret("default")
                    t.check("Python client: 403 for dev's secrets", False)
                except kclient.ApiException as e:
                    t.check("Python client: 403 for dev's secrets", e.status == 403, e.status)
                conf.cert_file, conf.key_file = admin
                api = kclient.CoreV1Api(kclient.ApiClient(conf))
                names = [n.metadata.name for n in api.list_namespace().items]
                t.check("Python client with the admin certificate", "default" in names, names)
            except ImportError:
                t.check("python3-kubernetes is installed (scripts/install-deps.sh)", False)
        finally:
            server.stop()
    t.finish()


if __name__ == "__main__":
    main()
