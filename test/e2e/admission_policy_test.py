"""ValidatingAdmissionPolicy as a cluster administrator meets it: policies and bindings applied with
kubectl, params from ConfigMaps, writes refused with kube's words, warned about (kubectl prints
`Warning:`), audited (the audit log's validation_failure annotation), match conditions,
variables, namespace selectors and namespaceObject, deletes judged on the object that goes,
failurePolicy on expressions that fail, and a change of policy taking effect while writes go on.
The Python client sees the refusal as a Status.

Usage: admission_policy_test.py <path to kwatch-apiserver>
"""
import json
import os
import sys
import time

from harness import BackgroundWrites, Checks, Server, TempDir, check_flood, kubectl_runner, wait_for

POLICY = """apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: replica-limit.example.com
spec:
  failurePolicy: Fail
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules:
    - apiGroups: ["apps"]
      apiVersions: ["v1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["deployments"]
  variables:
  - name: replicas
    expression: "has(object.spec.replicas) ? object.spec.replicas : 1"
  validations:
  - expression: "variables.replicas <= int(params.data.maxReplicas)"
    messageExpression: "'replicas ' + string(variables.replicas) + ' is over the limit of ' + params.data.maxReplicas + ' in ' + namespaceObject.metadata.name"
    reason: Forbidden
  auditAnnotations:
  - key: replicas
    valueExpression: "'asked for ' + string(variables.replicas)"
"""

BINDING = """apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: replica-limit-{env}
spec:
  policyName: replica-limit.example.com
  validationActions: {actions}
  paramRef:
    name: replica-limit
    parameterNotFoundAction: {missing}
  matchResources:
    namespaceSelector:
      matchLabels: {{env: {env}}}
"""

DELETE_GUARD = """apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: keep-protected.example.com
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["DELETE"]
      resources: ["configmaps"]
  matchConditions:
  - name: only-protected
    expression: "has(oldObject.metadata.labels) && 'protected' in oldObject.metadata.labels"
  validations:
  - expression: >-
      request.userInfo.username == 'nobody-at-all' ||
      (has(request.options.propagationPolicy) && request.options.propagationPolicy == 'Orphan')
    message: "protected config maps stay"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: keep-protected
spec:
  policyName: keep-protected.example.com
  validationActions: [Deny]
"""

BROKEN = """apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: broken.example.com
spec:
  failurePolicy: {failure}
  matchConstraints:
    resourceRules:
    - apiGroups: ["*"]
      apiVersions: ["*"]
      operations: ["*"]
      resources: ["*"]
  validations:
  - expression: "object.metadata.name.size() > 0 && object.spec.nothing == 1"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: broken
spec:
  policyName: broken.example.com
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels: {{env: broken}}
"""


MUTATING = """apiVersion: admissionregistration.k8s.io/v1beta1
kind: MutatingAdmissionPolicy
metadata:
  name: team-label.example.com
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["configmaps"]
  matchConditions:
  - name: unlabelled
    expression: "!has(object.metadata.labels) || !('team' in object.metadata.labels)"
  failurePolicy: Fail
  reinvocationPolicy: Never
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: "Object{metadata: Object.metadata{labels: {'team': namespaceObject.metadata.name + '-team'}}}"
  - patchType: JSONPatch
    jsonPatch:
      expression: "[JSONPatch{op: 'add', path: '/metadata/annotations', value: {'example.com/labelled-by': 'policy'}}]"
---
apiVersion: admissionregistration.k8s.io/v1beta1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: team-label
spec:
  policyName: team-label.example.com
  matchResources:
    namespaceSelector:
      matchLabels: {env: mutate}
"""


def labelled_namespace(kc, name, env):
    kc("create", "namespace", name)
    kc("label", "namespace", name, f"env={env}", "--overwrite")


def deployment_yaml(name, ns, replicas):
    return f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: {ns}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec: {{containers: [{{name: c, image: nginx}}]}}
"""


def checks_of(t, server, tmp, audit_path):
    kc = kubectl_runner(server, tmp)
    if kc is None:
        t.check("kubectl is installed", False)
        return
    labelled_namespace(kc, "prod", "prod")
    labelled_namespace(kc, "dev", "dev")
    labelled_namespace(kc, "lab", "lab")
    code, out = kc("apply", "-f", "-", stdin=POLICY + "---\n" +
                   BINDING.format(env="prod", actions="[Deny]", missing="Deny") + "---\n" +
                   BINDING.format(env="dev", actions="[Warn, Audit]", missing="Allow"))
    t.check("the policy and its bindings are applied", code == 0, out)
    code, out = kc("get", "validatingadmissionpolicies")
    t.check("kubectl lists the policy with its columns",
            code == 0 and "VALIDATIONS" in out and "PARAMKIND" in out and "v1/ConfigMap" in out, out)
    code, out = kc("get", "validatingadmissionpolicybindings")
    t.check("kubectl lists the bindings with their columns",
            code == 0 and "POLICYNAME" in out and "*/replica-limit" in out, out)

    # The status controller type-checks the expressions against the schema of deployments.
    typo = POLICY.replace("replica-limit.example.com", "typo.example.com").replace(
        "variables.replicas <= int(params.data.maxReplicas)",
        "object.spec.replica <= int(params.data.maxReplicas)")

    def type_checked():
        c, o = kc("get", "validatingadmissionpolicy", "typo.example.com", "-o", "json")
        return json.loads(o).get("status", {}) if c == 0 else {}
    code, out = kc("apply", "-f", "-", stdin=typo)
    wait_for(lambda: type_checked().get("observedGeneration") == 1, 10,
             "the status of the policy to be written")
    status = type_checked()
    warnings = status.get("typeChecking", {}).get("expressionWarnings", [])
    t.check("a typo in a field name is reported in status.typeChecking",
            len(warnings) == 1 and warnings[0]["fieldRef"] == "spec.validations[0].expression"
            and warnings[0]["warning"].startswith("apps/v1, Kind=Deployment: compilation failed: "
                                                  "ERROR: <input>:1:12: undefined field 'replica'"),
            json.dumps(status))
    wait_for(lambda: "observedGeneration" in json.loads(
        kc("get", "validatingadmissionpolicy", "replica-limit.example.com", "-o", "json")[1]).get(
        "status", {}), 10, "the status of the clean policy")
    code, out = kc("get", "validatingadmissionpolicy", "replica-limit.example.com", "-o",
                   "jsonpath={.status.typeChecking}")
    t.check("a policy without mistakes has no warnings", code == 0 and out.strip() == "{}", out)
    kc("delete", "validatingadmissionpolicy", "typo.example.com")

    # prod's binding denies when the param is missing; dev's allows.
    def denied_without_params():
        c, o = kc("create", "-f", "-", stdin=deployment_yaml("early", "prod", 1))
        return c != 0 and "no params found" in o
    wait_for(denied_without_params, 10, "the policy to take effect")
    code, out = kc("create", "-f", "-", stdin=deployment_yaml("early", "prod", 1))
    # 422 Invalid with the message as its one cause, which kubectl prints after an empty field.
    t.check("a missing param under Deny refuses the write",
            code != 0 and 'The deployments "early" is invalid: : ValidatingAdmissionPolicy '
            "'replica-limit.example.com' with binding 'replica-limit-prod' denied request: failed "
            "to configure binding: no params found for policy binding with `Deny` "
            "parameterNotFoundAction" in out, out)
    code, out = kc("create", "-f", "-", stdin=deployment_yaml("early", "dev", 9))
    t.check("a missing param under Allow lets the write through", code == 0, out)

    for ns in ("prod", "dev"):
        kc("create", "configmap", "replica-limit", "-n", ns, "--from-literal=maxReplicas=3")
    code, out = kc("create", "-f", "-", stdin=deployment_yaml("web", "prod", 2))
    t.check("a deployment within the limit is created", code == 0, out)
    code, out = kc("create", "-f", "-", stdin=deployment_yaml("big", "prod", 5))
    t.check("a deployment over the limit is refused with the messageExpression",
            code != 0 and "Error from server (Forbidden)" in out and
            'deployments.apps "big" is forbidden: ValidatingAdmissionPolicy '
            "'replica-limit.example.com' with binding 'replica-limit-prod' denied request: "
            "replicas 5 is over the limit of 3 in prod" in out, out)
    code, out = kc("scale", "deployment", "web", "-n", "prod", "--replicas=7")
    t.check("the scale subresource is not the deployments resource the rule names", code == 0, out)
    code, out = kc("patch", "deployment", "web", "-n", "prod", "--type=merge", "-p",
                   json.dumps({"spec": {"replicas": 8}}))
    t.check("an update over the limit is refused", code != 0 and "replicas 8 is over" in out, out)
    code, out = kc("create", "-f", "-", stdin=deployment_yaml("big", "lab", 50))
    t.check("a namespace no binding selects is not judged", code == 0, out)

    code, out = kc("create", "-f", "-", stdin=deployment_yaml("big", "dev", 6))
    t.check("Warn lets the write through and kubectl shows the warning",
            code == 0 and "Warning: Validation failed for ValidatingAdmissionPolicy "
            "'replica-limit.example.com' with binding 'replica-limit-dev': replicas 6 is over "
            "the limit of 3 in dev" in out, out)

    def audited():
        # The last create of a deployment in dev: "big".
        found = None
        try:
            with open(audit_path) as f:
                for line in f:
                    event = json.loads(line)
                    ref = event.get("objectRef", {})
                    if (event.get("verb") == "create" and ref.get("resource") == "deployments"
                            and ref.get("namespace") == "dev"
                            and event.get("responseStatus", {}).get("code") == 201):
                        found = event.get("annotations", {})
        except FileNotFoundError:
            pass
        return found
    wait_for(lambda: audited() is not None, 10, "the audit event of the warned create")
    annotations = audited() or {}
    failures = json.loads(annotations.get("validation.policy.admission.k8s.io/validation_failure", "[]"))
    t.check("Audit records the failure in the audit event",
            failures == [{"message": "replicas 6 is over the limit of 3 in dev",
                          "policy": "replica-limit.example.com", "binding": "replica-limit-dev",
                          "expressionIndex": 0, "validationActions": ["Warn", "Audit"]}],
            json.dumps(annotations))
    t.check("the policy's audit annotation is recorded under its name",
            annotations.get("replica-limit.example.com/replicas") == "asked for 6",
            json.dumps(annotations))

    # A policy's change takes effect within a second while writes go on.
    writes = BackgroundWrites(server, "/api/v1/namespaces/lab/configmaps",
                              lambda prefix, n: {"apiVersion": "v1", "kind": "ConfigMap",
                                                 "metadata": {"name": f"{prefix}{n}",
                                                              "labels": {"protected": "x"}}})
    with writes:
        began = time.monotonic()
        code, out = kc("apply", "-f", "-", stdin=DELETE_GUARD)
        t.check("a delete guard is applied while writes go on", code == 0, out)

        def guarded():
            # A dry run: admission judges it, nothing is deleted.
            status, body = server.request("DELETE",
                                          "/api/v1/namespaces/lab/configmaps/w0?dryRun=All")
            return status == 422
        wait_for(guarded, 5, "the delete guard to take effect")
        took = time.monotonic() - began
    results = writes.statuses
    print(f"the delete guard took effect after {took * 1000:.0f} ms; {len(results)} writes meanwhile")
    t.check("the policy takes effect within a second of the change", took < 1.0, f"{took:.2f} s")
    t.check("the writes meanwhile all succeed", results and all(s == 201 for s in results),
            str(sorted(set(results))))
    code, out = kc("delete", "configmap", "w1", "-n", "lab")
    t.check("a delete is judged on the object that goes",
            code != 0 and "protected config maps stay" in out, out)
    code, out = kc("delete", "configmap", "w1", "-n", "lab", "--cascade=orphan")
    t.check("a delete's options are in request.options (kubectl's --cascade=orphan)",
            code == 0, out)
    kc("create", "configmap", "plain", "-n", "lab")
    code, out = kc("delete", "configmap", "plain", "-n", "lab")
    t.check("a match condition that is false skips the policy", code == 0, out)

    # Expressions that fail: Fail refuses, Ignore lets through; the policies stay editable.
    labelled_namespace(kc, "broken", "broken")
    code, out = kc("apply", "-f", "-", stdin=BROKEN.format(failure="Fail"))
    t.check("a policy whose expression fails at run time is accepted", code == 0, out)

    def refuses_broken():
        c, o = kc("create", "configmap", "x", "-n", "broken")
        return c != 0 and "resulted in error" in o
    wait_for(refuses_broken, 5, "the broken policy to take effect")
    code, out = kc("create", "configmap", "x", "-n", "broken")
    t.check("under failurePolicy Fail an expression's error refuses the write",
            code != 0 and "ValidatingAdmissionPolicy 'broken.example.com' with binding 'broken' "
            "denied request: expression 'object.metadata.name.size() > 0 && object.spec.nothing "
            "== 1' resulted in error: no such key: spec" in out, out)
    code, out = kc("apply", "-f", "-", stdin=BROKEN.format(failure="Ignore"))
    t.check("a broken policy never blocks writes to the policies themselves", code == 0, out)

    def ignored():
        c, _ = kc("create", "configmap", "y", "-n", "broken")
        return c == 0
    wait_for(ignored, 5, "failurePolicy Ignore to take effect")
    t.check("under failurePolicy Ignore the write goes through", True)

    # The Python client sees the refusal as a Status.
    try:
        from kubernetes import client as k8s
        from kubernetes.client.rest import ApiException
        cfg = k8s.Configuration()
        cfg.host = f"http://127.0.0.1:{server.port}"
        apps = k8s.AppsV1Api(k8s.ApiClient(cfg))
        body = json.loads(json.dumps({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "py", "namespace": "prod"},
            "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "py"}},
                     "template": {"metadata": {"labels": {"app": "py"}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}))
        try:
            apps.create_namespaced_deployment("prod", body)
            t.check("the Python client is refused a deployment over the limit", False, "created")
        except ApiException as e:
            status = json.loads(e.body)
            t.check("the Python client is refused with a Forbidden Status",
                    e.status == 403 and status.get("reason") == "Forbidden"
                    and status.get("details", {}).get("kind") == "deployments"
                    and status.get("details", {}).get("group") == "apps"
                    and "replicas 4 is over the limit of 3 in prod" in status.get("message", ""),
                    e.body[:400])
    except ImportError:
        t.check("python3-kubernetes is installed", False)

    # A MutatingAdmissionPolicy adds a label and an annotation before the object is stored.
    labelled_namespace(kc, "mut", "mutate")
    code, out = kc("apply", "-f", "-", stdin=MUTATING)
    t.check("a mutating policy and its binding are applied", code == 0, out)
    code, out = kc("get", "mutatingadmissionpolicies")
    t.check("kubectl lists the mutating policy", code == 0 and "MUTATIONS" in out, out)

    def labelled():
        kc("delete", "configmap", "probe", "-n", "mut", "--ignore-not-found")
        kc("create", "configmap", "probe", "-n", "mut")
        c, o = kc("get", "configmap", "probe", "-n", "mut", "-o", "json")
        return c == 0 and json.loads(o)["metadata"].get("labels", {}).get("team") == "mut-team"
    wait_for(labelled, 10, "the mutating policy to take effect")
    code, out = kc("create", "configmap", "settings", "-n", "mut", "--from-literal=a=b")
    code, out = kc("get", "configmap", "settings", "-n", "mut", "-o", "json")
    meta = json.loads(out)["metadata"] if code == 0 else {}
    t.check("the policy's label and annotation are stored with the object",
            meta.get("labels") == {"team": "mut-team"} and
            meta.get("annotations", {}).get("example.com/labelled-by") == "policy", out)
    code, out = kc("create", "configmap", "own", "-n", "mut", "--dry-run=client", "-o", "yaml")
    code, out = kc("apply", "-f", "-", stdin=out.replace("metadata:", "metadata:\n  labels: {team: mine}", 1))
    code, out = kc("get", "configmap", "own", "-n", "mut", "-o", "jsonpath={.metadata.labels.team}")
    t.check("a match condition that is false leaves the object as written",
            code == 0 and out.strip() == "mine", out)
    code, out = kc("create", "configmap", "elsewhere", "-n", "lab")
    code, out = kc("get", "configmap", "elsewhere", "-n", "lab", "-o", "json")
    t.check("a namespace the binding does not select is not mutated",
            code == 0 and "team" not in json.loads(out)["metadata"].get("labels", {}), out)

    # Removing the binding lifts the policy.
    kc("delete", "validatingadmissionpolicybinding", "replica-limit-prod")

    def lifted():
        c, _ = kc("create", "-f", "-", stdin=deployment_yaml("huge", "prod", 30))
        return c == 0
    wait_for(lifted, 5, "the policy to be lifted")
    t.check("deleting the binding lifts the policy", True)


NO_RM = """apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: no-rm.example.com
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CONNECT"]
      resources: ["pods/exec"]
  validations:
  - expression: "object.command.size() == 0 || object.command[0] != 'rm'"
    messageExpression: "'no rm in ' + request.name + ' (' + request.kind.kind + ')'"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: no-rm
spec:
  policyName: no-rm.example.com
  validationActions: [Deny]
"""


def check_connect(t, server, kc):
    """kubectl exec is a CONNECT on pods/exec: a policy judges its options before kwatch says
    that no kubelet serves it."""
    labelled_namespace(kc, "shell", "shell")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "box", "namespace": "shell"},
           "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "busybox"}]}}
    code, out = kc("apply", "-f", "-", stdin=json.dumps(pod))
    t.check("a pod to exec into is created", code == 0, out)
    code, out = kc("apply", "-f", "-", stdin=NO_RM)
    t.check("a policy on pods/exec CONNECT is applied", code == 0, out)
    path = "/api/v1/namespaces/shell/pods/box/exec?command=rm&command=-rf&stdout=true"
    wait_for(lambda: server.request("POST", path)[0] == 422, 10, "the exec policy to take effect")
    code, out = kc("exec", "-n", "shell", "box", "--", "rm", "-rf", "/")
    t.check("kubectl exec is refused by the policy, with its message",
            code != 0 and "no rm in box (PodExecOptions)" in out, out)
    code, out = kc("exec", "-n", "shell", "box", "--", "ls")
    t.check("an exec the policy allows reaches kwatch's answer that no kubelet serves it",
            code != 0 and "without kubelets" in out and "no rm" not in out, out)
    status, body = server.request("POST", path + "&dryRun=All")
    t.check("a connect's dry run is refused as kube refuses it",
            status == 400 and "dryRun is not supported" in json.dumps(body), f"{status} {body}")
    kc("delete", "validatingadmissionpolicybinding", "no-rm")


def check_costly_policy(t, server, kc):
    """A policy whose expressions spend the whole budget of each evaluation, hit by writes from
    several clients at once: every write is refused when the budget runs out, and the server
    keeps answering its health check (expensive policies are evaluated off the I/O threads)."""
    ten = "[1,2,3,4,5,6,7,8,9,10]"
    nested = (f"{ten}.all(a, {ten}.all(b, {ten}.all(c, {ten}.all(d, {ten}.all(e, "
              f"a + b + c + d + e > 0)))))")
    labelled_namespace(kc, "flood", "flood")
    policy = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
              "metadata": {"name": "costly.example.com"},
              "spec": {"matchConstraints": {"resourceRules": [{
                  "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                  "resources": ["configmaps"]}]},
                  "validations": [{"expression": nested} for _ in range(20)]}}
    binding = {"apiVersion": "admissionregistration.k8s.io/v1",
               "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "costly"},
               "spec": {"policyName": "costly.example.com", "validationActions": ["Deny"],
                        "matchResources": {"namespaceSelector": {"matchLabels": {"env": "flood"}}}}}
    for obj in (policy, binding):
        code, out = kc("apply", "-f", "-", stdin=json.dumps(obj))
        t.check(f"the costly {obj['kind']} is applied", code == 0, out)
    path = "/api/v1/namespaces/flood/configmaps"
    wait_for(lambda: server.request("POST", path + "?dryRun=All", {"metadata": {"name": "p"}})[0] == 422,
             10, "the costly policy to take effect")
    check_flood(t, server, path, lambda i, n: json.dumps({"metadata": {"name": f"f{i}-{n}"}}),
                "running out of cost budget",
                "every flooding write is refused when the policy's budget runs out")
    kc("delete", "validatingadmissionpolicybinding", "costly")


def main():
    binary = sys.argv[1]
    t = Checks()
    with TempDir() as tmp:
        audit_path = os.path.join(tmp, "audit.log")
        server = Server(binary, extra_args=(f"--audit-log-path={audit_path}",)).start()
        try:
            checks_of(t, server, tmp, audit_path)
            check_connect(t, server, kubectl_runner(server, tmp))
            check_costly_policy(t, server, kubectl_runner(server, tmp))
            t.check("server alive", server.alive())
        finally:
            server.stop()
    t.finish()


if __name__ == "__main__":
    main()
