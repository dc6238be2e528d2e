"""ServiceAccount tokens as kube-apiserver issues and checks them, and the reviews built on them:
`kubectl create token`, a ServiceAccount bound to `view` in its namespace (lists and watches
configmaps there, 403 for secrets and other namespaces, `kubectl auth can-i` agreeing), tokens
refused once their account or bound pod is deleted or re-created, forged, expired, foreign or
wrongly aimed tokens (401), TokenReview, SubjectAccessReview, LocalSubjectAccessReview,
impersonation (kubectl --as) and no escalation through a namespace admin. The server runs with
the operator's own signing key (--service-account-signing-key-file/--service-account-key-file).

Usage: service_account_test.py <path to kwatch-apiserver>
"""
import base64
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
import warnings

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from harness import Checks, Server, TempDir, wait_for
import pki

ISSUER = "https://kwatch.test"


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def forge(key, claims, kid=None):
    """An RS256 JWT signed with `key` (whatever the server thinks of it)."""
    header = {"alg": "RS256"}
    if kid:
        header["kid"] = kid
    text = b64(json.dumps(header).encode()) + "." + b64(json.dumps(claims).encode())
    sig = key.sign(text.encode(), padding.PKCS1v15(), hashes.SHA256())
    return text + "." + b64(sig)


def claims_for(ns, name, uid, audiences=(ISSUER,), lifetime=600, issuer=ISSUER, issued=None):
    now = int(time.time()) if issued is None else issued
    return {"aud": list(audiences), "exp": now + lifetime, "iat": now, "nbf": now, "iss": issuer,
            "jti": str(uuid.uuid4()), "sub": f"system:serviceaccount:{ns}:{name}",
            "kubernetes.io": {"namespace": ns, "serviceaccount": {"name": name, "uid": uid}}}


def main():
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    binary = sys.argv[1]
    t = Checks()
    with TempDir() as tmp:
        clients = pki.CA(tmp, "client-ca")
        admin_cert = clients.client("admin", cn="kwatch-admin", orgs=["system:masters"])
        alice_cert = clients.client("alice", cn="alice")
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        key_file = os.path.join(tmp, "sa.key")
        with open(key_file, "wb") as f:
            f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))
        pub_file = os.path.join(tmp, "sa.pub")
        with open(pub_file, "wb") as f:
            f.write(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                  serialization.PublicFormat.SubjectPublicKeyInfo))
        stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        server = Server(binary, data_dir=tmp + "/data", https=True,
                        extra_args=[f"--cert-dir={tmp}/certs",
                                    f"--client-ca-file={clients.cert_file}",
                                    f"--service-account-issuer={ISSUER}",
                                    f"--service-account-signing-key-file={key_file}",
                                    f"--service-account-key-file={pub_file}",
                                    "--service-account-max-token-expiration=2h",
                                    "--authorization-mode=RBAC", "--anonymous-auth=false"]).start()
        port = server.secure_port
        ca = os.path.join(tmp, "certs", "ca.crt")
        admin = pki.HttpsClient(port, ca, cert=admin_cert)
        try:
            for obj_path, obj in [("/api/v1/namespaces", {"metadata": {"name": "team"}}),
                                  ("/api/v1/namespaces/team/serviceaccounts", {"metadata": {"name": "robot"}}),
                                  ("/api/v1/namespaces/team/configmaps", {"metadata": {"name": "settings"}}),
                                  ("/api/v1/namespaces/team/secrets", {"metadata": {"name": "hidden"}})]:
                status, body = admin.call("POST", obj_path, obj)
                t.check(f"admin creates {obj_path}", status == 201, body)
            status, body = admin.call("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/team/rolebindings", {
                "metadata": {"name": "robot-view"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
                "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": "team"}]})
            t.check("admin binds view to the ServiceAccount in its namespace", status == 201, body)

            kubectl = shutil.which("kubectl")
            t.check("kubectl is installed (scripts/install-deps.sh)", kubectl is not None)
            admin_cfg = pki.kubeconfig(os.path.join(tmp, "admin.kubeconfig"), port, ca, *admin_cert)
            p = subprocess.run([kubectl, "--kubeconfig", admin_cfg, "-n", "team", "create", "token",
                                "robot"], capture_output=True, text=True, timeout=60)
            token = p.stdout.strip()
            t.check("kubectl create token", p.returncode == 0 and token.count(".") == 2, p.stderr)
            header = json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))
            claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
            t.check("the token is RS256 with a key id, kube's claims", header.get("alg") == "RS256" and
                    header.get("kid") and claims["iss"] == ISSUER and claims["aud"] == [ISSUER] and
                    claims["sub"] == "system:serviceaccount:team:robot" and
                    3590 <= claims["exp"] - claims["iat"] <= 3610 and
                    claims["kubernetes.io"]["serviceaccount"]["name"] == "robot", (header, claims))

            # The issuer's discovery documents, readable by every ServiceAccount: the JWK set
            # verifies the token kubectl got.
            reader = pki.HttpsClient(port, ca, token=token)
            status, config = reader.call("GET", "/.well-known/openid-configuration")
            t.check("OpenID configuration names the issuer and its JWK set", status == 200 and
                    config.get("issuer") == ISSUER and config.get("jwks_uri") == ISSUER + "/openid/v1/jwks" and
                    config.get("id_token_signing_alg_values_supported") == ["RS256"], config)
            status, jwks = reader.call("GET", "/openid/v1/jwks")
            jwk = [k for k in jwks.get("keys", []) if k.get("kid") == header.get("kid")] if status == 200 else []
            verified = False
            if jwk:
                n = int.from_bytes(base64.urlsafe_b64decode(jwk[0]["n"] + "=="), "big")
                e = int.from_bytes(base64.urlsafe_b64decode(jwk[0]["e"] + "=="), "big")
                signed, sig = token.rsplit(".", 1)
                try:
                    rsa.RSAPublicNumbers(e, n).public_key().verify(
                        base64.urlsafe_b64decode(sig + "=="), signed.encode(), padding.PKCS1v15(), hashes.SHA256())
                    verified = True
                except Exception as err:  # noqa: BLE001 - reported below
                    verified = repr(err)
            t.check("the JWK set's key (by kid) verifies the token", verified is True, (status, jwks, verified))
            status, body = pki.HttpsClient(port, ca).call("GET", "/openid/v1/jwks")
            t.check("... and needs credentials", status == 401, status)

            robot_cfg = pki.kubeconfig(os.path.join(tmp, "robot.kubeconfig"), port, ca, token=token)

            def robot(*args):
                return subprocess.run([kubectl, "--kubeconfig", robot_cfg, *args], capture_output=True,
                                      text=True, timeout=60)
            p = robot("auth", "whoami", "-o", "json")
            info = json.loads(p.stdout)["status"]["userInfo"] if p.returncode == 0 else {}
            t.check("kubectl auth whoami with the token", info.get("username") == "system:serviceaccount:team:robot"
                    and info.get("groups") == ["system:serviceaccounts", "system:serviceaccounts:team",
                                               "system:authenticated"], p.stdout + p.stderr)
            wait_for(lambda: robot("-n", "team", "get", "configmaps").returncode == 0, timeout=2,
                     what="the binding to take effect")
            p = robot("-n", "team", "get", "configmaps", "-o", "name")
            t.check("the ServiceAccount lists configmaps in its namespace", "configmap/settings" in p.stdout,
                    p.stdout + p.stderr)
            # kube-root-ca.crt, published in every namespace as kube-controller-manager publishes
            # it: an in-cluster client reads it with its token and trusts the server by it.
            def root_ca():
                p = robot("-n", "team", "get", "configmap", "kube-root-ca.crt", "-o", "json")
                return json.loads(p.stdout) if p.returncode == 0 else None
            try:
                published = wait_for(root_ca, timeout=10, what="kube-root-ca.crt in team")
            except AssertionError as e:
                published = {"error": str(e)}
            with open(ca) as f:
                serving_ca = f.read()
            t.check("kube-root-ca.crt holds the CA of the serving certificate, with kube's description",
                    published.get("data") == {"ca.crt": serving_ca} and
                    published["metadata"]["annotations"].get("kubernetes.io/description", "").startswith(
                        "Contains a CA bundle that can be used to verify the kube-apiserver"), published)
            in_cluster_ca = os.path.join(tmp, "in-cluster-ca.crt")
            with open(in_cluster_ca, "w") as f:
                f.write(published.get("data", {}).get("ca.crt", ""))
            in_cluster_cfg = pki.kubeconfig(os.path.join(tmp, "in-cluster.kubeconfig"), port,
                                            in_cluster_ca, token=token)
            p = subprocess.run([kubectl, "--kubeconfig", in_cluster_cfg, "-n", "team", "get",
                                "configmaps", "-o", "name"], capture_output=True, text=True, timeout=60)
            t.check("... and verifies the server for a client that trusts only it",
                    p.returncode == 0 and "configmap/kube-root-ca.crt" in p.stdout, p.stdout + p.stderr)
            p = robot("-n", "team", "delete", "configmap", "kube-root-ca.crt")
            t.check("view may not delete it", p.returncode != 0 and "Forbidden" in p.stderr, p.stderr)
            status, body = admin.call("DELETE", "/api/v1/namespaces/team/configmaps/kube-root-ca.crt")
            t.check("admin deletes it", status == 200, body)
            try:
                again = wait_for(lambda: (root_ca() or {}).get("metadata", {}).get("uid") not in
                                 (None, published.get("metadata", {}).get("uid")) and root_ca(),
                                 timeout=10, what="kube-root-ca.crt made again")
            except AssertionError as e:
                again = {"error": str(e)}
            t.check("... and it is made again", again.get("data") == {"ca.crt": serving_ca}, again)

            sa = pki.HttpsClient(port, ca, token=token)
            status, _ = sa.call("GET", "/api/v1/namespaces/team/configmaps?watch=1&timeoutSeconds=1")
            t.check("... and watches them", status == 200, status)
            p = robot("-n", "team", "get", "secrets")
            t.check("403 for secrets in its namespace", p.returncode != 0 and "Forbidden" in p.stderr and
                    'User "system:serviceaccount:team:robot" cannot list resource "secrets"' in p.stderr,
                    p.stderr)
            p = robot("-n", "default", "get", "configmaps")
            t.check("403 for configmaps in another namespace", p.returncode != 0 and
                    'in the namespace "default"' in p.stderr, p.stderr)
            answers = [robot("auth", "can-i", "list", "configmaps", "-n", "team").stdout.strip(),
                       robot("auth", "can-i", "list", "secrets", "-n", "team").stdout.strip(),
                       robot("auth", "can-i", "list", "configmaps", "-n", "default").stdout.strip()]
            t.check("kubectl auth can-i: yes in its namespace, no for secrets and elsewhere",
                    answers == ["yes", "no", "no"], answers)

            status, body = sa.call("POST", "/api/v1/namespaces/team/serviceaccounts/robot/token", {"spec": {}})
            t.check("TokenRequest needs create serviceaccounts/token (view lacks it): 403", status == 403 and
                    'cannot create resource "serviceaccounts/token"' in body.get("message", ""), body)

            # Discovery names the reviews and the token subresource, as kubectl api-resources shows them.
            status, body = admin.call("GET", "/apis/authentication.k8s.io/v1")
            t.check("discovery: authentication.k8s.io/v1 serves tokenreviews and selfsubjectreviews",
                    status == 200 and {r["name"] for r in body["resources"]} >= {"tokenreviews", "selfsubjectreviews"},
                    body)
            status, body = admin.call("GET", "/apis/authorization.k8s.io/v1")
            t.check("discovery: authorization.k8s.io/v1 serves the four access reviews", status == 200 and
                    {r["name"] for r in body["resources"]} == {"subjectaccessreviews", "localsubjectaccessreviews",
                                                               "selfsubjectaccessreviews", "selfsubjectrulesreviews"},
                    body)
            status, body = admin.call("GET", "/api/v1")
            token_entry = [r for r in body.get("resources", []) if r["name"] == "serviceaccounts/token"]
            t.check("discovery: serviceaccounts/token is a TokenRequest subresource", token_entry and
                    token_entry[0]["kind"] == "TokenRequest" and token_entry[0]["verbs"] == ["create"], token_entry)

            # Reviews.
            status, body = admin.call("POST", "/apis/authentication.k8s.io/v1/tokenreviews",
                                      {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                                       "spec": {"token": token}})
            t.check("TokenReview: authenticated, the account's user and uid", status == 201 and
                    body["status"]["authenticated"] is True and
                    body["status"]["user"]["username"] == "system:serviceaccount:team:robot" and
                    body["status"]["user"]["uid"] == claims["kubernetes.io"]["serviceaccount"]["uid"] and
                    body["status"]["audiences"] == [ISSUER], body)
            status, body = admin.call("POST", "/apis/authentication.k8s.io/v1/tokenreviews",
                                      {"spec": {"token": token, "audiences": ["vault"]}})
            t.check("TokenReview for another audience: not authenticated, says why", status == 201 and
                    body["status"]["authenticated"] is False and "audience" in body["status"].get("error", ""),
                    body)
            status, body = admin.call("POST", "/apis/authentication.k8s.io/v1/tokenreviews", {"spec": {}})
            t.check("TokenReview without a token: 400", status == 400, body)
            # JWS is base64url: the same token in the standard alphabet is no token.
            standard = token.replace("-", "+").replace("_", "/")
            if standard != token:
                status, body = pki.HttpsClient(port, ca, token=standard).call(
                    "GET", "/api/v1/namespaces/team/configmaps")
                t.check("the token re-encoded in standard base64 ('+', '/') is 401", status == 401, body)
            status, body = admin.call("POST", "/api/v1/namespaces/team/pods", {
                "metadata": {"name": "runs-as-default"},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
            t.check("admin creates a pod running as the default account", status == 201, body)
            status, body = admin.call("POST", "/api/v1/namespaces/team/serviceaccounts/robot/token", {
                "spec": {"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "runs-as-default"}}})
            t.check("TokenRequest binding robot's token to a pod running as another account: 400",
                    status == 400 and "pod running with different serviceaccount name" in body.get("message", ""),
                    body)
            status, body = sa.call("POST", "/apis/authentication.k8s.io/v1/tokenreviews", {"spec": {"token": token}})
            t.check("TokenReview needs create tokenreviews (403 for the robot)", status == 403, body)
            sar = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                   "spec": {"user": "system:serviceaccount:team:robot",
                            "groups": ["system:serviceaccounts", "system:authenticated"],
                            "resourceAttributes": {"namespace": "team", "verb": "list", "resource": "configmaps"}}}
            status, body = admin.call("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", sar)
            t.check("SubjectAccessReview: allowed for the robot's configmaps", status == 201 and
                    body["kind"] == "SubjectAccessReview" and body["status"]["allowed"] is True, body)
            sar["spec"]["resourceAttributes"]["resource"] = "secrets"
            status, body = admin.call("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", sar)
            t.check("SubjectAccessReview: denied for its secrets", status == 201 and
                    body["status"]["allowed"] is False, body)
            status, body = admin.call("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                                      {"spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}})
            t.check("SubjectAccessReview without user or group: 422", status == 422 and
                    "at least one of user or group" in body.get("message", ""), body)
            status, body = admin.call("POST", "/apis/authorization.k8s.io/v1/namespaces/team/localsubjectaccessreviews",
                                      {"spec": {"user": "system:serviceaccount:team:robot",
                                                "resourceAttributes": {"verb": "get", "resource": "configmaps"}}})
            t.check("LocalSubjectAccessReview takes its namespace", status == 201 and
                    body["kind"] == "LocalSubjectAccessReview" and
                    body["spec"]["resourceAttributes"]["namespace"] == "team" and
                    body["status"]["allowed"] is True, body)
            status, body = admin.call("POST", "/apis/authorization.k8s.io/v1/namespaces/team/localsubjectaccessreviews",
                                      {"spec": {"user": "x", "resourceAttributes": {"namespace": "other", "verb": "get",
                                                                                    "resource": "pods"}}})
            t.check("LocalSubjectAccessReview for another namespace: 400", status == 400, body)

            # Impersonation.
            p = subprocess.run([kubectl, "--kubeconfig", admin_cfg, "auth", "can-i", "list", "secrets", "-n", "team",
                                "--as=system:serviceaccount:team:robot"], capture_output=True, text=True, timeout=60)
            t.check("kubectl auth can-i --as answers for the impersonated account", p.stdout.strip() == "no",
                    p.stdout + p.stderr)
            p = subprocess.run([kubectl, "--kubeconfig", admin_cfg, "get", "configmaps", "-n", "team",
                                "--as=system:serviceaccount:team:robot", "-o", "name"],
                               capture_output=True, text=True, timeout=60)
            t.check("kubectl --as acts as the account", "configmap/settings" in p.stdout, p.stdout + p.stderr)
            alice = pki.HttpsClient(port, ca, cert=alice_cert)
            status, body = alice.call("GET", "/api/v1/namespaces/team/configmaps",
                                      headers={"Impersonate-User": "kwatch-admin"})
            t.check("impersonation without the impersonate verb: 403 naming it", status == 403 and
                    'cannot impersonate resource "users"' in body.get("message", ""), body)
            status, body = admin.call("GET", "/api/v1/namespaces/team/configmaps",
                                      headers={"Impersonate-Group": "system:masters"})
            t.check("a group without a user to impersonate: 400", status == 400, body)

            # No escalation: a namespace admin cannot bind cluster-admin.
            status, body = admin.call("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/team/rolebindings", {
                "metadata": {"name": "robot-admin"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
                "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": "team"}]})
            wait_for(lambda: sa.call("GET", "/api/v1/namespaces/team/secrets")[0] == 200, timeout=2,
                     what="the admin binding")
            status, body = sa.call("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/team/rolebindings", {
                "metadata": {"name": "grab"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": "team"}]})
            t.check("a namespace admin cannot grant itself cluster-admin", status == 403, body)

            # Forged, foreign, expired and misdirected tokens.
            uid = claims["kubernetes.io"]["serviceaccount"]["uid"]
            bad = {
                "signed by another key": forge(stranger, claims_for("team", "robot", uid)),
                "from another issuer": forge(key, claims_for("team", "robot", uid, issuer="https://evil")),
                "for another audience": forge(key, claims_for("team", "robot", uid, audiences=["vault"])),
                "expired": forge(key, claims_for("team", "robot", uid, issued=int(time.time()) - 7200)),
                "for an account that never existed": forge(key, claims_for("team", "ghost", uid)),
                "with a wrong uid": forge(key, claims_for("team", "robot", str(uuid.uuid4()))),
                "with a tampered payload": token.split(".")[0] + "." + b64(json.dumps(
                    dict(claims, sub="system:serviceaccount:kube-system:robot")).encode()) + "." + token.split(".")[2],
                "not a JWT": "a.b",
            }
            for what, bad_token in bad.items():
                status, body = pki.HttpsClient(port, ca, token=bad_token).call("GET", "/api/v1/namespaces/team/configmaps")
                t.check(f"a token {what}: 401 Unauthorized", status == 401 and
                        isinstance(body, dict) and body.get("reason") == "Unauthorized", (status, body))
            status, _ = pki.HttpsClient(port, ca, token=forge(key, claims_for("team", "robot", uid))).call(
                "GET", "/api/v1/namespaces/team/configmaps")
            t.check("a token this key signs for the live account works (the checks above are real)",
                    status == 200, status)

            # Bound to a pod: dies with the pod.
            status, pod = admin.call("POST", "/api/v1/namespaces/team/pods", {
                "metadata": {"name": "worker"},
                "spec": {"serviceAccountName": "robot", "containers": [{"name": "c", "image": "busybox"}]}})
            t.check("admin creates a pod", status == 201, pod)
            status, body = admin.call("POST", "/api/v1/namespaces/team/serviceaccounts/robot/token", {
                "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": {"expirationSeconds": 600,
                         "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "worker"}}})
            t.check("TokenRequest bound to the pod", status == 201 and body["status"]["token"] and
                    body["spec"]["boundObjectRef"]["uid"] == pod["metadata"]["uid"], body)
            bound = pki.HttpsClient(port, ca, token=body["status"]["token"])
            t.check("the bound token works while the pod lives",
                    bound.call("GET", "/api/v1/namespaces/team/configmaps")[0] == 200)
            status, body = admin.call("POST", "/api/v1/namespaces/team/serviceaccounts/robot/token", {
                "spec": {"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "worker",
                                            "uid": str(uuid.uuid4())}}})
            t.check("TokenRequest naming the wrong pod uid: 409", status == 409, body)
            status, body = admin.call("POST", "/api/v1/namespaces/team/serviceaccounts/robot/token",
                                      {"spec": {"expirationSeconds": 60}})
            t.check("TokenRequest under ten minutes: 422", status == 422 and
                    "may not specify a duration less than 10 minutes" in body.get("message", ""), body)
            status, body = admin.call("POST", "/api/v1/namespaces/team/serviceaccounts/robot/token",
                                      {"spec": {"expirationSeconds": 86400}})
            long_claims = json.loads(base64.urlsafe_b64decode(body["status"]["token"].split(".")[1] + "==")) \
                if status == 201 else {}
            t.check("a day asked, two hours given (--service-account-max-token-expiration=2h)", status == 201 and
                    body["spec"]["expirationSeconds"] == 7200 and long_claims["exp"] - long_claims["iat"] == 7200,
                    body)
            status, body = admin.call("POST", "/api/v1/namespaces/team/serviceaccounts/ghost/token", {"spec": {}})
            t.check("TokenRequest for a missing account: 404", status == 404, body)
            admin.call("DELETE", "/api/v1/namespaces/team/pods/worker")
            wait_for(lambda: bound.call("GET", "/api/v1/namespaces/team/configmaps")[0] == 401, timeout=3,
                     what="the bound token to stop working")
            t.check("the bound token stops working when the pod is deleted", True)

            # Deleted and re-created: the old token is dead.
            admin.call("DELETE", "/api/v1/namespaces/team/serviceaccounts/robot")
            wait_for(lambda: sa.call("GET", "/api/v1/namespaces/team/configmaps")[0] == 401, timeout=3,
                     what="the token of a deleted account to stop working")
            t.check("a deleted account's token: 401", True)
            status, _ = admin.call("POST", "/api/v1/namespaces/team/serviceaccounts", {"metadata": {"name": "robot"}})
            status, body = sa.call("GET", "/api/v1/namespaces/team/configmaps")
            t.check("a re-created account does not revive the old token", status == 401, (status, body))
            status, body = admin.call("POST", "/apis/authentication.k8s.io/v1/tokenreviews", {"spec": {"token": token}})
            t.check("TokenReview says why", status == 201 and body["status"]["authenticated"] is False and
                    "does not match" in body["status"].get("error", ""), body)

            # The Python client with a token and CA verification.
            try:
                from kubernetes import client as kclient
                status, body = admin.call("POST", "/api/v1/namespaces/team/serviceaccounts/robot/token", {"spec": {}})
                conf = kclient.Configuration()
                conf.host = f"https://127.0.0.1:{port}"
                conf.ssl_ca_cert = ca
                conf.api_key = {"authorization": "Bearer " + body["status"]["token"]}
                api = kclient.CoreV1Api(kclient.ApiClient(conf))
                names = [c.metadata.name for c in api.list_namespaced_config_map("team").items]
                t.check("Python client with a ServiceAccount token and a verified CA", "settings" in names, names)
            except ImportError:
                t.check("python3-kubernetes is installed (scripts/install-deps.sh)", False)
            t.check("the server is alive", server.alive())
        finally:
            server.stop()
    t.finish()


if __name__ == "__main__":
    main()
