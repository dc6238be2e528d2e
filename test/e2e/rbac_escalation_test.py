"""Privilege escalation through RBAC writes, tried as an attacker would with kubectl --as from an
admin kubeconfig (the checks then run for the low-privileged user), and refused as
kube-apiserver refuses it:
- binding the aggregated admin/edit/view roles (stored with the rules they aggregate, as the
  aggregation controller writes them) is checked against what they grant;
- a user-made ClusterRole's aggregationRule needs every permission (create, update, patch and
  server-side apply);
- binding a role that does not exist yet needs `bind` on it;
- every write of roles, cluster roles and both binding kinds (create, replace, patch, apply
  --server-side) is checked on the object that would be stored;
- an admission policy may name params (paramKind, paramRef) only for a user who may read them
  (a messageExpression could otherwise copy a Secret into an error message).

Usage: rbac_escalation_test.py <path to kwatch-apiserver>
"""
import json
import os
import shutil
import subprocess
import sys

from harness import Checks, Server, TempDir, wait_for, SKIP


def kubeconfig(path, server, tmp):
    with open(path, "w") as f:
        f.write(f"""apiVersion: v1
kind: Config
clusters: [{{name: k, cluster: {{server: "https://127.0.0.1:{server.secure_port}", certificate-authority: "{tmp}/certs/ca.crt"}}}}]
contexts: [{{name: k, context: {{cluster: k, user: admin}}}}]
current-context: k
users: [{{name: admin, user: {{token: admin-token}}}}]
""")


def main():
    binary = sys.argv[1]
    kubectl = shutil.which("kubectl")
    if not kubectl:
        print("kubectl is not installed")
        sys.exit(SKIP)
    t = Checks()
    with TempDir() as tmp:
        tokens = os.path.join(tmp, "tokens.csv")
        with open(tokens, "w") as f:
            f.write('admin-token,admin,1,"system:masters"\n')
        server = Server(binary, https=True,
                        extra_args=[f"--token-auth-file={tokens}", "--authorization-mode=RBAC",
                                    "--anonymous-auth=false", f"--cert-dir={tmp}/certs"]).start()
        config = os.path.join(tmp, "kubeconfig")
        kubeconfig(config, server, tmp)
        env = dict(os.environ, KUBECONFIG=config, HOME=tmp)

        def kc(*args, stdin=None):
            p = subprocess.run([kubectl, *args], input=stdin, capture_output=True, text=True,
                               env=env, timeout=60)
            return p.returncode, p.stdout + p.stderr

        def ok(what, *args, stdin=None):
            code, out = kc(*args, stdin=stdin)
            if code != 0:
                raise AssertionError(f"{what}: {out}")
            return out

        try:
            aggregated_roles(t, kc, ok)
            aggregation_rule(t, kc, ok)
            missing_roles(t, kc, ok)
            every_write(t, kc, ok)
            policy_params(t, kc, ok)
            policy_authorizer(t, kc, ok)
            t.check("server alive", server.alive())
        finally:
            server.stop()
    t.finish()


def granted(kc, user, verb, resource, namespace=None):
    """Waits until a binding just made takes effect for `user` (authorization follows the RBAC
    caches within ~100 ms, as kube's follows its informers)."""
    ns = ["-n", namespace] if namespace else []
    # stdout comes first (kubectl warns on stderr that a cluster resource has no namespace).
    wait_for(lambda: kc(f"--as={user}", *ns, "auth", "can-i", verb, resource)[1].startswith("yes"),
             what=f"{user} may {verb} {resource}")


def refused(code, out):
    return code != 0 and "attempting to grant RBAC permissions not currently held" in out


def aggregated_roles(t, kc, ok):
    ok("namespace", "create", "ns", "team")
    ok("secret", "-n", "team", "create", "secret", "generic", "db", "--from-literal=password=hunter2")
    ok("role", "-n", "team", "create", "role", "rb-creator", "--verb=create",
       "--resource=rolebindings.rbac.authorization.k8s.io")
    ok("binding", "-n", "team", "create", "rolebinding", "bob-rb", "--role=rb-creator", "--user=bob")
    granted(kc, "bob", "create", "rolebindings.rbac.authorization.k8s.io", "team")

    # The aggregation controller writes what admin gathers into it, as on kube.
    def admin_rules():
        code, out = kc("get", "clusterrole", "admin", "-o", "json")
        return json.loads(out).get("rules") or [] if code == 0 else []
    wait_for(lambda: any("secrets" in r.get("resources", []) for r in admin_rules()),
             what="admin's aggregated rules to be stored")
    t.check("clusterrole admin is stored with the rules it aggregates",
            any("rolebindings" in r.get("resources", []) for r in admin_rules()), admin_rules()[:3])
    code, out = kc("get", "clusterrole", "view", "-o", "yaml")
    t.check("clusterrole view shows configmaps", code == 0 and "configmaps" in out, out[:400])

    for role in ("admin", "edit", "view"):
        code, out = kc("--as=bob", "-n", "team", "create", "rolebinding", f"bob-{role}",
                       f"--clusterrole={role}", "--user=bob")
        t.check(f"binding {role} to himself with only create on rolebindings is 403", refused(code, out), out)
    code, out = kc("--as=bob", "-n", "team", "get", "secret", "db", "-o", "jsonpath={.data.password}")
    t.check("the secret stays unreadable to him", code != 0 and "forbidden" in out, out)

    ok("crb creator", "create", "clusterrole", "crb-creator", "--verb=create",
       "--resource=clusterrolebindings.rbac.authorization.k8s.io")
    ok("crb", "create", "clusterrolebinding", "carol-crb", "--clusterrole=crb-creator", "--user=carol")
    granted(kc, "carol", "create", "clusterrolebindings.rbac.authorization.k8s.io")
    code, out = kc("--as=carol", "create", "clusterrolebinding", "carol-edit", "--clusterrole=edit",
                   "--user=carol")
    t.check("a ClusterRoleBinding of edit with only create on clusterrolebindings is 403",
            refused(code, out) and 'Resources:["secrets"]' in out, out)
    code, out = kc("--as=carol", "get", "secrets", "-A")
    t.check("cluster-wide secrets stay unreadable to her", code != 0, out)

    # Who holds what a role grants may bind it.
    ok("bob admin", "-n", "team", "create", "rolebinding", "dave-admin", "--clusterrole=admin", "--user=dave")
    granted(kc, "dave", "create", "rolebindings.rbac.authorization.k8s.io", "team")
    code, out = kc("--as=dave", "-n", "team", "create", "rolebinding", "erin-edit", "--clusterrole=edit",
                   "--user=erin")
    t.check("a namespace admin may bind edit in that namespace", code == 0, out)


AGGREGATING = """apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: gatherer
aggregationRule:
  clusterRoleSelectors:
  - matchLabels:
      kubernetes.io/bootstrapping: rbac-defaults
rules: []
"""


def aggregation_rule(t, kc, ok):
    ok("cr writer", "create", "clusterrole", "cr-writer", "--verb=get,list,create,update,patch",
       "--resource=clusterroles.rbac.authorization.k8s.io,clusterrolebindings.rbac.authorization.k8s.io")
    ok("cr writer binding", "create", "clusterrolebinding", "frank-cr", "--clusterrole=cr-writer",
       "--user=frank")
    granted(kc, "frank", "create", "clusterroles.rbac.authorization.k8s.io")
    message = "must have cluster-admin privileges to use the aggregationRule"
    code, out = kc("--as=frank", "create", "-f", "-", stdin=AGGREGATING)
    t.check("create: a ClusterRole with an aggregationRule is 403", code != 0 and message in out, out)
    code, out = kc("--as=frank", "apply", "--server-side", "-f", "-", stdin=AGGREGATING)
    t.check("server-side apply: the same 403", code != 0 and message in out, out)
    # A plain role he may make, then tries to turn into a gatherer.
    ok("plain", "--as=frank", "create", "-f", "-",
       stdin=AGGREGATING.replace("aggregationRule:\n  clusterRoleSelectors:\n  - matchLabels:\n"
                                 "      kubernetes.io/bootstrapping: rbac-defaults\n", ""))
    code, out = kc("--as=frank", "patch", "clusterrole", "gatherer", "--type=merge", "-p",
                   json.dumps({"aggregationRule": {"clusterRoleSelectors": [
                       {"matchLabels": {"kubernetes.io/bootstrapping": "rbac-defaults"}}]}}))
    t.check("patch: adding an aggregationRule is 403", code != 0 and message in out, out)
    code, out = kc("--as=frank", "replace", "-f", "-", stdin=AGGREGATING)
    t.check("update (replace): the same 403", code != 0 and message in out, out)
    ok("bind", "--as=frank", "create", "clusterrolebinding", "frank-gatherer", "--clusterrole=gatherer",
       "--user=frank")
    code, out = kc("--as=frank", "auth", "can-i", "*", "*", "-A")
    t.check("he cannot do everything afterwards", out.strip() == "no", out)
    # Who holds every permission may (the admin here).
    code, out = kc("apply", "--server-side", "-f", "-", stdin=AGGREGATING.replace("gatherer", "gatherer2"))
    t.check("system:masters may set an aggregationRule", code == 0, out)


def missing_roles(t, kc, ok):
    code, out = kc("--as=bob", "-n", "team", "create", "rolebinding", "later", "--role=not-yet", "--user=bob")
    t.check("binding a Role that does not exist is 404 naming it", code != 0 and
            'roles.rbac.authorization.k8s.io "not-yet" not found' in out, out)
    code, out = kc("--as=bob", "-n", "team", "create", "rolebinding", "later", "--clusterrole=not-yet",
                   "--user=bob")
    t.check("binding a ClusterRole that does not exist is 404 naming it", code != 0 and
            'clusterroles.rbac.authorization.k8s.io "not-yet" not found' in out, out)
    code, out = kc("-n", "team", "create", "role", "not-yet", "--verb=*", "--resource=secrets")
    code, out = kc("--as=bob", "-n", "team", "get", "secrets")
    t.check("...so no binding waits for the role to be created", code != 0, out)
    # With `bind` on that role, binding it ahead of time is allowed, as in kube.
    ok("binder", "-n", "team", "create", "role", "binder", "--verb=create",
       "--resource=rolebindings.rbac.authorization.k8s.io")
    ok("bind verb", "-n", "team", "patch", "role", "binder", "--type=json", "-p", json.dumps([
        {"op": "add", "path": "/rules/-", "value": {"apiGroups": ["rbac.authorization.k8s.io"],
                                                    "resources": ["roles"], "verbs": ["bind"],
                                                    "resourceNames": ["planned"]}}]))
    ok("binder binding", "-n", "team", "create", "rolebinding", "gina-binder", "--role=binder", "--user=gina")
    granted(kc, "gina", "create", "rolebindings.rbac.authorization.k8s.io", "team")
    code, out = kc("--as=gina", "-n", "team", "create", "rolebinding", "ahead", "--role=planned",
                   "--user=gina")
    t.check("with bind on it, a role not yet created may be bound", code == 0, out)


def every_write(t, kc, ok):
    """Roles, ClusterRoles, RoleBindings and ClusterRoleBindings, each created, replaced, patched
    and applied server-side by a user who may write all four but holds only get on configmaps."""
    ok("ns", "create", "ns", "writes")
    ok("writer role", "create", "clusterrole", "rbac-writer", "--verb=get,list,create,update,patch",
       "--resource=roles.rbac.authorization.k8s.io,clusterroles.rbac.authorization.k8s.io,"
       "rolebindings.rbac.authorization.k8s.io,clusterrolebindings.rbac.authorization.k8s.io,configmaps")
    ok("writer binding", "create", "clusterrolebinding", "hank-writer", "--clusterrole=rbac-writer",
       "--user=hank")
    granted(kc, "hank", "create", "clusterrolebindings.rbac.authorization.k8s.io")
    ok("secret reader", "create", "clusterrole", "secret-reader", "--verb=get", "--resource=secrets")
    ok("cm reader", "create", "clusterrole", "cm-reader", "--verb=get", "--resource=configmaps")

    def role(kind, rules, ns="writes", name="r1"):
        meta = {"name": name}
        if kind == "Role":
            meta["namespace"] = ns
        return json.dumps({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind,
                           "metadata": meta, "rules": rules})

    cm = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]
    secrets = [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]
    for kind, resource in (("Role", "role"), ("ClusterRole", "clusterrole")):
        ns_args = ["-n", "writes"] if kind == "Role" else []
        code, out = kc("--as=hank", *ns_args, "create", "-f", "-", stdin=role(kind, secrets, name="big"))
        t.check(f"{kind} create holding more than the writer: 403", refused(code, out), out)
        code, out = kc("--as=hank", *ns_args, "apply", "--server-side", "-f", "-",
                       stdin=role(kind, secrets, name="big"))
        t.check(f"{kind} server-side apply (create) holding more: 403", refused(code, out), out)
        ok(f"{kind} small", "--as=hank", *ns_args, "create", "-f", "-", stdin=role(kind, cm))
        code, out = kc("--as=hank", *ns_args, "replace", "-f", "-", stdin=role(kind, cm + secrets))
        t.check(f"{kind} update growing past the writer: 403", refused(code, out), out)
        code, out = kc("--as=hank", *ns_args, "patch", resource, "r1", "--type=json", "-p",
                       json.dumps([{"op": "add", "path": "/rules/-", "value": secrets[0]}]))
        t.check(f"{kind} JSON patch growing past the writer: 403", refused(code, out), out)
        code, out = kc("--as=hank", *ns_args, "patch", resource, "r1", "--type=merge", "-p",
                       json.dumps({"rules": secrets}))
        t.check(f"{kind} merge patch past the writer: 403", refused(code, out), out)
        code, out = kc("--as=hank", *ns_args, "apply", "--server-side", "--force-conflicts", "-f", "-",
                       stdin=role(kind, cm + secrets))
        t.check(f"{kind} server-side apply (update) past the writer: 403", refused(code, out), out)
        code, out = kc("--as=hank", *ns_args, "patch", resource, "r1", "--type=merge", "-p",
                       json.dumps({"metadata": {"labels": {"tier": "a"}}}))
        t.check(f"{kind} a change within what the writer holds applies", code == 0, out)

    def binding(kind, role_name, user, name="b1"):
        meta = {"name": name}
        if kind == "RoleBinding":
            meta["namespace"] = "writes"
        return json.dumps({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta,
                           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                       "name": role_name},
                           "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                                         "name": user}]})

    for kind, resource in (("RoleBinding", "rolebinding"), ("ClusterRoleBinding", "clusterrolebinding")):
        ns_args = ["-n", "writes"] if kind == "RoleBinding" else []
        code, out = kc("--as=hank", *ns_args, "create", "-f", "-", stdin=binding(kind, "secret-reader", "hank"))
        t.check(f"{kind} create of a role the writer does not hold: 403", refused(code, out), out)
        code, out = kc("--as=hank", *ns_args, "apply", "--server-side", "-f", "-",
                       stdin=binding(kind, "secret-reader", "hank"))
        t.check(f"{kind} server-side apply (create) of it: 403", refused(code, out), out)
        ok(f"{kind} within", "--as=hank", *ns_args, "create", "-f", "-", stdin=binding(kind, "cm-reader", "ivy"))
        # The admin binds secret-reader to someone; the writer then tries to add himself.
        ok(f"{kind} admin's", *ns_args, "create", "-f", "-",
           stdin=binding(kind, "secret-reader", "jill", name="b2"))
        code, out = kc("--as=hank", *ns_args, "replace", "-f", "-",
                       stdin=binding(kind, "secret-reader", "hank", name="b2"))
        t.check(f"{kind} update adding himself to a binding of what he lacks: 403", refused(code, out), out)
        code, out = kc("--as=hank", *ns_args, "patch", resource, "b2", "--type=json", "-p", json.dumps(
            [{"op": "add", "path": "/subjects/-",
              "value": {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "hank"}}]))
        t.check(f"{kind} JSON patch adding himself: 403", refused(code, out), out)
        code, out = kc("--as=hank", *ns_args, "apply", "--server-side", "--force-conflicts", "-f", "-",
                       stdin=binding(kind, "secret-reader", "hank", name="b2"))
        t.check(f"{kind} server-side apply (update) adding himself: 403", refused(code, out), out)
        code, out = kc("--as=hank", *ns_args, "patch", resource, "b1", "--type=merge", "-p",
                       json.dumps({"metadata": {"labels": {"tier": "a"}}}))
        t.check(f"{kind} a change of a binding he may make applies", code == 0, out)
    code, out = kc("--as=hank", "-n", "writes", "get", "secrets")
    t.check("after all of it he still cannot read secrets", code != 0, out)



PARAM_POLICY = """apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: leak.example.com
spec:
  paramKind: {apiVersion: v1, kind: %s}
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["configmaps"]
  validations:
  - expression: "false"
    messageExpression: "string(params.data)"
"""

PARAM_BINDING = """apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: leak
spec:
  policyName: leak.example.com
  validationActions: [Deny]
  paramRef: {name: db, namespace: team, parameterNotFoundAction: Deny}
"""


def policy_params(t, kc, ok):
    ok("policy writer role", "create", "clusterrole", "policy-writer", "--verb=create,get,update",
       "--resource=validatingadmissionpolicies.admissionregistration.k8s.io,"
       "validatingadmissionpolicybindings.admissionregistration.k8s.io")
    ok("policy writer binding", "create", "clusterrolebinding", "mallory-policies",
       "--clusterrole=policy-writer", "--user=mallory")
    granted(kc, "mallory", "create", "validatingadmissionpolicies.admissionregistration.k8s.io")
    code, out = kc("--as=mallory", "create", "-f", "-", stdin=PARAM_POLICY % "Secret")
    t.check("a policy whose params are Secrets needs get on every Secret",
            code != 0 and 'spec.paramKind: Forbidden: user &{mallory  [system:authenticated] map[]} '
            'must have "get" permission on all objects of the referenced paramKind (kind=Secret, '
            'apiVersion=v1)' in out, out)
    ok("config map reader", "create", "clusterrole", "cm-getter", "--verb=get", "--resource=configmaps")
    ok("config map reader binding", "create", "clusterrolebinding", "mallory-cm",
       "--clusterrole=cm-getter", "--user=mallory")
    granted(kc, "mallory", "get", "configmaps")
    code, out = kc("--as=mallory", "create", "-f", "-", stdin=PARAM_POLICY % "ConfigMap")
    t.check("a policy whose params she may read is created", code == 0, out)
    # An admin turns the policy to Secrets; her binding would still read one.
    ok("admin's policy", "apply", "-f", "-", stdin=PARAM_POLICY % "Secret")
    code, out = kc("--as=mallory", "create", "-f", "-", stdin=PARAM_BINDING)
    t.check("a binding whose paramRef names a Secret she may not read is refused",
            code != 0 and 'spec.paramRef: Forbidden: user &{mallory  [system:authenticated] map[]} '
            'does not have "get" permission on the object referenced by paramRef' in out, out)
    ok("admin's binding", "create", "-f", "-", stdin=PARAM_BINDING.replace("name: leak\n", "name: leak-admin\n"))
    ok("policy removed", "delete", "validatingadmissionpolicy", "leak.example.com")



AUTHZ_POLICY = """apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: secret-readers-only.example.com
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["configmaps"]
  validations:
  - expression: "authorizer.group('').resource('secrets').namespace(request.namespace).check('list').allowed()"
    messageExpression: "request.userInfo.username + ' may not list secrets here'"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: secret-readers-only
spec:
  policyName: secret-readers-only.example.com
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels: {authz: checked}
"""


def policy_authorizer(t, kc, ok):
    ok("namespace", "create", "ns", "vault")
    ok("label", "label", "ns", "vault", "authz=checked")
    ok("cm writer", "-n", "vault", "create", "role", "cm-writer", "--verb=create",
       "--resource=configmaps")
    ok("cm writer binding", "-n", "vault", "create", "rolebinding", "oscar-cm",
       "--role=cm-writer", "--user=oscar")
    granted(kc, "oscar", "create", "configmaps", "vault")
    ok("policy", "apply", "-f", "-", stdin=AUTHZ_POLICY)

    def refused_by_policy():
        code, out = kc("--as=oscar", "-n", "vault", "create", "configmap", "probe")
        return code != 0 and "oscar may not list secrets here" in out
    wait_for(refused_by_policy, what="the authorizer policy to take effect")
    t.check("authorizer refuses a user who may not list secrets there", True)
    ok("secret lister", "-n", "vault", "create", "role", "secret-lister", "--verb=list",
       "--resource=secrets")
    ok("secret lister binding", "-n", "vault", "create", "rolebinding", "oscar-secrets",
       "--role=secret-lister", "--user=oscar")
    granted(kc, "oscar", "list", "secrets", "vault")
    code, out = kc("--as=oscar", "-n", "vault", "create", "configmap", "allowed")
    t.check("authorizer allows him once RBAC does", code == 0, out)


if __name__ == "__main__":
    main()
