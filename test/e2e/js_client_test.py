"""The official JavaScript client (@kubernetes/client-node 1.x) against kwatch over HTTPS with a
bearer token and the generated CA: an informer lists and watches configmaps while the script
writes them, its cache ends equal to the server's, and RBAC refuses what the token may not do;
server-side apply; admission policies refusing and mutating its writes.

Needs node and npm (the package comes from npm; the test is skipped, exit 77, where neither the
npm cache nor the registry has it).

Usage: js_client_test.py <path to kwatch-apiserver>
"""
import json
import os
import shutil
import subprocess
import sys

from harness import Checks, Server, TempDir, wait_for
import pki

HERE = os.path.dirname(os.path.abspath(__file__))

AR = "/apis/admissionregistration.k8s.io"
_RULES = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
           "resources": ["configmaps"]}]
POLICIES = [
    (AR + "/v1/validatingadmissionpolicies", {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "owners.example.com"},
        "spec": {"matchConstraints": {"resourceRules": _RULES},
                 "validations": [{"expression": "has(object.data) && 'owner' in object.data",
                                  "message": "every config map names an owner"}]}}),
    (AR + "/v1/validatingadmissionpolicybindings", {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "owners"},
        "spec": {"policyName": "owners.example.com", "validationActions": ["Deny"],
                 "matchResources": {"namespaceSelector": {"matchLabels": {
                     "kubernetes.io/metadata.name": "jsns"}}}}}),
    (AR + "/v1beta1/mutatingadmissionpolicies", {
        "apiVersion": "admissionregistration.k8s.io/v1beta1", "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": "checked.example.com"},
        "spec": {"matchConstraints": {"resourceRules": _RULES}, "reinvocationPolicy": "Never",
                 "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {
                     "expression": "Object{metadata: Object.metadata{labels: {'checked-by': 'policy'}}}"}}]}}),
    (AR + "/v1beta1/mutatingadmissionpolicybindings", {
        "apiVersion": "admissionregistration.k8s.io/v1beta1", "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": "checked"},
        "spec": {"policyName": "checked.example.com",
                 "matchResources": {"namespaceSelector": {"matchLabels": {
                     "kubernetes.io/metadata.name": "jsns"}}}}}),
]


def main():
    binary = sys.argv[1]
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        print("skipped: node and npm are not installed")
        sys.exit(77)
    t = Checks()
    with TempDir() as tmp:
        js = os.path.join(tmp, "js")
        os.makedirs(js)
        shutil.copy(os.path.join(HERE, "js", "informer.mjs"), js)
        shutil.copy(os.path.join(HERE, "js", "apply.mjs"), js)
        shutil.copy(os.path.join(HERE, "js", "policies.mjs"), js)
        p = subprocess.run([npm, "install", "--prefer-offline", "--no-audit", "--no-fund",
                            "--loglevel=error", "@kubernetes/client-node@1"],
                           cwd=js, capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            print(f"skipped: npm cannot install @kubernetes/client-node: {p.stderr[-300:]}")
            sys.exit(77)
        tokens = os.path.join(tmp, "tokens.csv")
        with open(tokens, "w") as f:
            f.write('admin-token,admin,1,"system:masters"\njs-token,js-user,3\n')
        server = Server(binary, https=True,
                        extra_args=[f"--cert-dir={tmp}/certs", f"--token-auth-file={tokens}",
                                    "--authorization-mode=RBAC", "--anonymous-auth=false"]).start()
        port = server.secure_port
        try:
            status, body = server.request("POST", "/api/v1/namespaces", {"metadata": {"name": "jsns"}},
                                          headers={"Authorization": "Bearer admin-token"})
            t.check("admin creates jsns", status == 201, body)
            status, body = server.request("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/jsns/rolebindings", {
                "metadata": {"name": "js-edit"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
                "subjects": [{"kind": "User", "name": "js-user", "apiGroup": "rbac.authorization.k8s.io"}]},
                headers={"Authorization": "Bearer admin-token"})
            t.check("admin binds edit in jsns", status == 201, body)
            cfg = pki.kubeconfig(os.path.join(tmp, "kubeconfig"), port, os.path.join(tmp, "certs", "ca.crt"),
                                 token="js-token")
            p = subprocess.run([node, "informer.mjs", cfg, "jsns"], cwd=js, capture_output=True, text=True,
                               timeout=120)
            try:
                out = json.loads(p.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                out = {}
            t.check("the informer ran over HTTPS with a token", p.returncode == 0 and out.get("done"),
                    (p.stdout + p.stderr)[-800:])
            # kube-root-ca.crt is in every namespace, as on kube: not the informer's business here.
            seen = [tuple(e) for e in out.get("seen", []) if e[1] != "kube-root-ca.crt"]
            t.check("it saw every add, the update and the delete, in order",
                    seen == [("add", "js-0", "1"), ("add", "js-1", "1"), ("add", "js-2", "1"),
                             ("update", "js-1", "2"), ("delete", "js-2", None)], seen)
            status, body = server.request("GET", "/api/v1/namespaces/jsns/configmaps",
                                          headers={"Authorization": "Bearer admin-token"})
            names = sorted(c["metadata"]["name"] for c in body["items"])
            t.check("its cache equals the server's list", out.get("cached") == names, (out.get("cached"), names))
            t.check("no watch errors", out.get("errors") == [], out.get("errors"))
            t.check("RBAC refuses the token elsewhere (403)", out.get("forbidden") == 403, out.get("forbidden"))

            p = subprocess.run([node, "apply.mjs", cfg, "jsns"], cwd=js, capture_output=True, text=True,
                               timeout=120)
            try:
                applied = json.loads(p.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                applied = {}
            t.check("server-side apply from the JavaScript client records its field manager",
                    p.returncode == 0 and applied.get("managers") == [["js-app", "Apply"]],
                    (p.stdout + p.stderr)[-800:])
            t.check("a conflicting apply is a 409 to it", applied.get("conflict") == 409, applied)
            t.check("and force takes the field", applied.get("forced") == {"k": "changed"}, applied)

            # Admission policies: the admin installs them, the JavaScript client meets them.
            admin = {"Authorization": "Bearer admin-token"}
            for path, obj in POLICIES:
                status, body = server.request("POST", path, obj, headers=admin)
                t.check(f"admin creates {obj['kind']} {obj['metadata']['name']}", status == 201, body)

            def policies_in_force():
                status, body = server.request(
                    "POST", "/api/v1/namespaces/jsns/configmaps?dryRun=All",
                    {"metadata": {"name": "probe"}}, headers=admin)
                return status == 422
            wait_for(policies_in_force, 10, "the policies to take effect")
            p = subprocess.run([node, "policies.mjs", cfg, "jsns"], cwd=js, capture_output=True,
                               text=True, timeout=120)
            try:
                met = json.loads(p.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                met = {}
            t.check("a write the policy refuses is a 422 with its message to the JavaScript client",
                    met.get("refused") == 422 and "ValidatingAdmissionPolicy 'owners.example.com' "
                    "with binding 'owners' denied request: every config map names an owner"
                    in met.get("message", ""), (p.stdout + p.stderr)[-800:])
            t.check("the object it creates carries the mutating policy's label",
                    met.get("labels") == {"checked-by": "policy"}, met)
        finally:
            server.stop()
    t.finish()


if __name__ == "__main__":
    main()
