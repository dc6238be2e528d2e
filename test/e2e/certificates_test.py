"""CertificateSigningRequests as a user meets them: a key and request made with openssl, sent with
kubectl, approved and denied with `kubectl certificate`, signed by kwatch's signer
(--cluster-signing-cert-file, the CA kwatch also trusts for clients), and the certificate then
used to authenticate; kube's refusals (a request for system:masters, a duration under ten
minutes, approval through /status, approval without `approve` on the signer) and the signer's
(a kubelet certificate with a wrong subject fails).

Usage: certificates_test.py <path to kwatch-apiserver>
"""
import base64
import json
import os
import shutil
import subprocess
import sys

from harness import SKIP, Checks, Server, TempDir, wait_for


def run(*args, **kw):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=60, **kw)


def make_request(tmp, name, subject, key_type="ec"):
    """A key and a PKCS#10 request (PEM) for `subject`, made with the openssl command."""
    key = os.path.join(tmp, f"{name}.key")
    csr = os.path.join(tmp, f"{name}.csr")
    if key_type == "ec":
        run("openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key)
    else:
        run("openssl", "genrsa", "-out", key, "2048")
    run("openssl", "req", "-new", "-key", key, "-subj", subject, "-out", csr)
    with open(csr, "rb") as f:
        return key, f.read()


def csr_manifest(name, request_pem, signer="kubernetes.io/kube-apiserver-client",
                 usages=("client auth",), expiration=None):
    spec = {"request": base64.b64encode(request_pem).decode(), "signerName": signer,
            "usages": list(usages)}
    if expiration is not None:
        spec["expirationSeconds"] = expiration
    return json.dumps({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
                       "metadata": {"name": name}, "spec": spec})


def main():
    binary = sys.argv[1]
    kubectl = shutil.which("kubectl")
    if not kubectl or not shutil.which("openssl"):
        print("kubectl or openssl is not installed")
        sys.exit(SKIP)
    t = Checks()
    with TempDir() as tmp:
        # The cluster's signing CA, which kwatch also trusts for client certificates.
        ca_key, ca_crt = os.path.join(tmp, "signer.key"), os.path.join(tmp, "signer.crt")
        run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key,
            "-out", ca_crt, "-days", "30", "-subj", "/CN=kwatch-test-signer")
        tokens = os.path.join(tmp, "tokens.csv")
        with open(tokens, "w") as f:
            f.write('admin-token,admin,1,"system:masters"\n'
                    'approver-token,approver,2\n')
        server = Server(binary, https=True, extra_args=[
            f"--token-auth-file={tokens}", "--authorization-mode=RBAC", "--anonymous-auth=false",
            f"--cert-dir={tmp}/certs", f"--client-ca-file={ca_crt}",
            f"--cluster-signing-cert-file={ca_crt}", f"--cluster-signing-key-file={ca_key}",
            "--cluster-signing-duration=720h"]).start()
        try:
            checks(t, server, tmp, kubectl)
            t.check("server alive", server.alive())
        finally:
            server.stop()
    t.finish()


def kubeconfig(path, server, tmp, user):
    with open(path, "w") as f:
        f.write(f"""apiVersion: v1
kind: Config
clusters: [{{name: k, cluster: {{server: "https://127.0.0.1:{server.secure_port}", certificate-authority: "{tmp}/certs/ca.crt"}}}}]
contexts: [{{name: k, context: {{cluster: k, user: u}}}}]
current-context: k
users: [{{name: u, user: {user}}}]
""")
    return path


def checks(t, server, tmp, kubectl):
    admin = kubeconfig(os.path.join(tmp, "admin.kubeconfig"), server, tmp, "{token: admin-token}")

    def kc(*args, stdin=None, config=admin):
        p = subprocess.run([kubectl, *args], input=stdin, capture_output=True, text=True,
                           env=dict(os.environ, KUBECONFIG=config, HOME=tmp), timeout=60)
        return p.returncode, p.stdout + p.stderr

    def get(name):
        code, out = kc("get", "csr", name, "-o", "json")
        return json.loads(out) if code == 0 else {}

    # Create, list, approve: the signer issues a client certificate within seconds.
    key, request = make_request(tmp, "alice", "/CN=alice/O=developers")
    code, out = kc("create", "-f", "-", stdin=csr_manifest("alice", request, expiration=3600))
    t.check("kubectl creates a CertificateSigningRequest", code == 0, out)
    csr = get("alice")
    t.check("the requester is recorded from who asked", csr.get("spec", {}).get("username") == "admin"
            and "system:masters" in csr.get("spec", {}).get("groups", []), json.dumps(csr)[:400])
    t.check("it starts without status", csr.get("status") == {}, json.dumps(csr.get("status")))
    code, out = kc("get", "csr")
    header = out.splitlines()[0].split() if out else []
    t.check("kubectl get csr shows kube's columns",
            header == ["NAME", "AGE", "SIGNERNAME", "REQUESTOR", "REQUESTEDDURATION", "CONDITION"]
            and "Pending" in out and "60m" in out, out)
    code, out = kc("certificate", "approve", "alice")
    t.check("kubectl certificate approve", code == 0 and "approved" in out, out)
    try:
        wait_for(lambda: get("alice").get("status", {}).get("certificate"), timeout=10,
                 what="the certificate")
    except AssertionError as e:
        t.check("the signer issues the certificate", False, str(e))
        return
    csr = get("alice")
    approved = [c for c in csr["status"].get("conditions", []) if c.get("type") == "Approved"]
    t.check("the approval is kubectl's, with kube's timestamps",
            approved and approved[0].get("reason") == "KubectlApprove"
            and approved[0].get("lastTransitionTime") and approved[0].get("lastUpdateTime"),
            json.dumps(csr["status"])[:400])
    code, out = kc("get", "csr", "alice")
    t.check("its condition reads Approved,Issued", "Approved,Issued" in out, out)
    cert = os.path.join(tmp, "alice.crt")
    with open(cert, "wb") as f:
        f.write(base64.b64decode(csr["status"]["certificate"]))
    text = run("openssl", "x509", "-in", cert, "-noout", "-subject", "-issuer", "-dates", "-ext",
               "extendedKeyUsage,basicConstraints").stdout
    t.check("the certificate is the request's subject, issued by the signer, for clients",
            "CN = alice" in text and "kwatch-test-signer" in text and "TLS Web Client" in text
            and "CA:FALSE" in text, text)
    verify = run("openssl", "verify", "-CAfile", os.path.join(tmp, "signer.crt"), cert)
    t.check("it verifies against the signing CA", verify.returncode == 0, verify.stdout + verify.stderr)
    # The certificate authenticates: kwatch trusts the signer for clients.
    alice = kubeconfig(os.path.join(tmp, "alice.kubeconfig"), server, tmp,
                       f'{{client-certificate: "{cert}", client-key: "{key}"}}')
    code, out = kc("auth", "whoami", "-o", "json", config=alice)
    who = json.loads(out) if code == 0 else {}
    user = who.get("status", {}).get("userInfo", {})
    t.check("the signed certificate authenticates as its subject",
            user.get("username") == "alice" and "developers" in user.get("groups", []), out)

    # Denial: no certificate.
    _, request = make_request(tmp, "bob", "/CN=bob")
    kc("create", "-f", "-", stdin=csr_manifest("bob", request))
    code, out = kc("certificate", "deny", "bob")
    t.check("kubectl certificate deny", code == 0 and "denied" in out, out)
    code, out = kc("get", "csr", "bob")
    t.check("a denied request reads Denied and gets nothing", "Denied" in out and "Issued" not in out, out)
    # kubectl refuses on its own; the server does too, for a client that tries anyway.
    bob = get("bob")
    bob["status"]["conditions"].append({"type": "Approved", "status": "True", "reason": "Both"})
    path = os.path.join(tmp, "bob.json")
    with open(path, "w") as f:
        json.dump(bob, f)
    code, out = kc("replace", "--raw",
                   "/apis/certificates.k8s.io/v1/certificatesigningrequests/bob/approval", "-f", path)
    t.check("a denied request cannot be approved as well", code != 0
            and "Approved and Denied conditions are mutually exclusive" in out, out)

    # kube's refusals.
    _, request = make_request(tmp, "root", "/CN=root/O=system:masters")
    code, out = kc("create", "-f", "-", stdin=csr_manifest("root", request))
    t.check("no request for system:masters to the client signer", code != 0 and
            "use of kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed"
            in out, out)
    _, request = make_request(tmp, "short", "/CN=short")
    code, out = kc("create", "-f", "-", stdin=csr_manifest("short", request, expiration=60))
    t.check("a duration under ten minutes is invalid", code != 0 and
            "spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 600 "
            "seconds (10 minutes)" in out, out)
    code, out = kc("create", "-f", "-", stdin=csr_manifest("nousage", request, usages=()))
    t.check("usages are required", code != 0 and "usages must be provided" in out, out)
    code, out = kc("create", "-f", "-", stdin=csr_manifest("garbage", b"not a request"))
    t.check("a request that is no PKCS#10 is invalid", code != 0 and
            "PEM block type must be CERTIFICATE REQUEST" in out, out)
    code, out = kc("create", "-f", "-", stdin=csr_manifest("badsigner", request, signer="nodomain"))
    t.check("a signer name needs a domain and a path", code != 0 and
            "must be a fully qualified domain and path of the form 'example.com/signer-name'" in out,
            out)

    # Approval goes through /approval only, and needs `approve` on the signer.
    _, request = make_request(tmp, "carol", "/CN=carol")
    kc("create", "-f", "-", stdin=csr_manifest("carol", request))
    carol = get("carol")
    carol["status"] = {"conditions": [{"type": "Approved", "status": "True", "reason": "Sneaky"}]}
    code, out = kc("replace", "--subresource=status", "-f", "-", stdin=json.dumps(carol))
    t.check("the status subresource cannot approve", code != 0 and
            'updates may not add a condition of type "Approved"' in out, out)
    code, out = kc("apply", "-f", "-", stdin="""apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: csr-approver}
rules:
- apiGroups: [certificates.k8s.io]
  resources: [certificatesigningrequests, certificatesigningrequests/approval]
  verbs: [get, list, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: csr-approver}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: csr-approver}
subjects: [{kind: User, name: approver, apiGroup: rbac.authorization.k8s.io}]
""")
    t.check("a role to update approvals is bound", code == 0, out)
    approver = kubeconfig(os.path.join(tmp, "approver.kubeconfig"), server, tmp,
                          "{token: approver-token}")
    # The authorizer follows bindings through the watch caches: wait until it has this one.
    try:
        wait_for(lambda: kc("get", "csr", "carol", config=approver)[0] == 0, timeout=10,
                 what="the approver's binding to take effect")
    except AssertionError as e:
        t.check("the approver's binding takes effect", False, str(e))
    code, out = kc("certificate", "approve", "carol", config=approver)
    t.check("approving needs `approve` on the signer", code != 0 and
            'user not permitted to approve requests with signerName "kubernetes.io/kube-apiserver-client"'
            in out, out)
    code, out = kc("apply", "-f", "-", stdin="""apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: csr-signer-approver}
rules:
- apiGroups: [certificates.k8s.io]
  resources: [signers]
  resourceNames: ["kubernetes.io/*"]
  verbs: [approve]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: csr-signer-approver}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: csr-signer-approver}
subjects: [{kind: User, name: approver, apiGroup: rbac.authorization.k8s.io}]
""")
    # The policy follows the bindings' watch: wait for the grant to take effect.
    last = {}

    def approved_by_approver():
        last["code"], last["out"] = kc("certificate", "approve", "carol", config=approver)
        return last["code"] == 0

    try:
        wait_for(approved_by_approver, timeout=10, what="the approval")
        t.check("`approve` on the signer's domain is enough", True)
    except AssertionError:
        t.check("`approve` on the signer's domain is enough", False, last.get("out"))

    # Setting a certificate through /status needs `sign` on the signer.
    _, request = make_request(tmp, "dave", "/CN=dave")
    kc("create", "-f", "-", stdin=csr_manifest("dave", request))
    kc("apply", "-f", "-", stdin="""apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: csr-status-writer}
rules:
- apiGroups: [certificates.k8s.io]
  resources: [certificatesigningrequests/status]
  verbs: [update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: csr-status-writer}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: csr-status-writer}
subjects: [{kind: User, name: approver, apiGroup: rbac.authorization.k8s.io}]
""")
    dave = get("dave")
    with open(os.path.join(tmp, "signer.crt"), "rb") as f:
        dave["status"] = {"certificate": base64.b64encode(f.read()).decode()}
    forged = os.path.join(tmp, "dave.json")
    with open(forged, "w") as f:
        json.dump(dave, f)
    status_path = "/apis/certificates.k8s.io/v1/certificatesigningrequests/dave/status"

    def refused_to_sign():
        last["code"], last["out"] = kc("replace", "--raw", status_path, "-f", forged,
                                       config=approver)
        return 'user not permitted to sign requests with signerName' in last["out"]

    try:
        wait_for(refused_to_sign, timeout=10, what="the sign refusal")
        t.check("setting a certificate needs `sign` on the signer", last["code"] != 0, last["out"])
    except AssertionError:
        t.check("setting a certificate needs `sign` on the signer", False, last.get("out"))

    # The kubelet signer refuses a subject that is no node's.
    _, request = make_request(tmp, "kubelet", "/CN=not-a-node/O=system:nodes")
    kc("create", "-f", "-", stdin=csr_manifest(
        "kubelet", request, signer="kubernetes.io/kube-apiserver-client-kubelet",
        usages=("digital signature", "client auth")))
    kc("certificate", "approve", "kubelet")
    try:
        wait_for(lambda: any(c.get("type") == "Failed"
                             for c in get("kubelet").get("status", {}).get("conditions", [])),
                 timeout=10, what="the Failed condition")
        failed = [c for c in get("kubelet")["status"]["conditions"] if c["type"] == "Failed"][0]
        t.check("the kubelet signer fails it in kube's words",
                failed.get("reason") == "SignerValidationFailure" and failed.get("message") ==
                "subject common name does not begin with system:node:", json.dumps(failed))
    except AssertionError as e:
        t.check("the kubelet signer fails it in kube's words", False, str(e))
    _, request = make_request(tmp, "node1", "/CN=system:node:node1/O=system:nodes", key_type="rsa")
    kc("create", "-f", "-", stdin=csr_manifest(
        "node1", request, signer="kubernetes.io/kube-apiserver-client-kubelet",
        usages=("digital signature", "key encipherment", "client auth")))
    kc("certificate", "approve", "node1")
    try:
        wait_for(lambda: get("node1").get("status", {}).get("certificate"), timeout=10,
                 what="the kubelet certificate")
        t.check("a node's request is signed", True)
    except AssertionError as e:
        t.check("a node's request is signed", False, str(e))


if __name__ == "__main__":
    main()
