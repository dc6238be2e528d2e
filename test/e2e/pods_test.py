"""Pod subresources as a scheduler, kubectl and users reach them: pods/binding (placement, the
PodScheduled condition, 409 for a placed pod, 422 for a bad target), pods/ephemeralcontainers
(`kubectl debug`: only additions, nothing else of the pod changes), and the subresources a
kubelet would serve (`kubectl logs`, `exec`, `port-forward`, node and service proxies), which
answer with a Status saying why they cannot be served; pods/eviction (`kubectl drain`): pending
pods go at once, running ones only as their PodDisruptionBudget allows, the budget's status
spent and the refusals 429 with the budget named.

Usage: pods_test.py <path to kwatch-apiserver>
"""

from harness import kubectl_runner, run_suite

PODS = "/api/v1/namespaces/default/pods"


def pod(name):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "app", "image": "nginx"}]}}


def binding(t, server):
    server.request("POST", PODS, body=pod("unplaced"))
    body = {"apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": "unplaced", "annotations": {"scheduler/why": "test"}},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"}}
    status, out = server.request("POST", PODS + "/unplaced/binding?fieldManager=my-scheduler",
                                 body=body)
    t.check("a binding answers 201 Success", status == 201 and out.get("status") == "Success",
            (status, out))
    status, p = server.request("GET", PODS + "/unplaced")
    conditions = {c["type"]: c for c in p.get("status", {}).get("conditions", [])}
    t.check("the pod is on the node", p["spec"].get("nodeName") == "node-1", p["spec"])
    t.check("with the binding's annotations",
            p["metadata"].get("annotations", {}).get("scheduler/why") == "test", p["metadata"])
    t.check("and PodScheduled True", conditions.get("PodScheduled", {}).get("status") == "True",
            conditions)
    managers = [(e["manager"], e.get("subresource")) for e in p["metadata"]["managedFields"]]
    t.check("recorded under the binding subresource", ("my-scheduler", "binding") in managers,
            managers)
    status, err = server.request("POST", PODS + "/unplaced/binding", body=body)
    t.check("binding a placed pod: 409", status == 409 and err.get("message") ==
            'Operation cannot be fulfilled on pods/binding "unplaced": pod unplaced is already '
            'assigned to node "node-1"', (status, err))
    server.request("POST", PODS, body=pod("other"))
    bad = dict(body, metadata={"name": "other"}, target={"kind": "Pod", "name": ""})
    status, err = server.request("POST", PODS + "/other/binding", body=bad)
    fields = [c.get("field") for c in err.get("details", {}).get("causes", [])]
    t.check("a target that is not a named Node: 422", status == 422 and
            fields == ["target.kind", "target.name"], (status, err))
    status, err = server.request("POST", PODS + "/missing/binding",
                                 body=dict(body, metadata={"name": "missing"}))
    t.check("binding a missing pod: 404", status == 404, (status, err))
    status, err = server.request("POST", PODS + "/other/binding", body=body)
    t.check("a binding named for another pod: 400", status == 400, (status, err))
    status, err = server.request("GET", PODS + "/other/binding")
    t.check("only POST binds", status == 405, (status, err))
    # The legacy collection: the binding names the pod.
    legacy = PODS.rsplit("/", 1)[0] + "/bindings"
    server.request("POST", PODS, body=pod("legacy"))
    status, out = server.request("POST", legacy, body=dict(body, metadata={"name": "legacy"}))
    status2, p = server.request("GET", PODS + "/legacy")
    t.check("POST .../bindings binds the pod the binding names",
            status == 201 and out.get("status") == "Success"
            and p["spec"].get("nodeName") == "node-1", (status, out, p.get("spec")))
    status, err = server.request("POST", legacy, body=dict(body, metadata={"name": "missing"}))
    t.check("... a missing pod: 404", status == 404, (status, err))
    status, err = server.request("GET", legacy)
    t.check("... and only POST", status == 405, (status, err))


def ephemeral(t, server, kc):
    server.request("POST", PODS, body=pod("debugged"))
    if kc is not None:
        code, out = kc("debug", "debugged", "--image=busybox", "--container=debugger")
        t.check("kubectl debug adds an ephemeral container", code == 0, out)
    else:
        patch = {"spec": {"ephemeralContainers": [{"name": "debugger", "image": "busybox"}]}}
        status, out = server.request("PATCH", PODS + "/debugged/ephemeralcontainers", body=patch,
                                     headers={"Content-Type": "application/strategic-merge-patch+json"})
        t.check("an ephemeral container is added", status == 200, (status, out))
    status, p = server.request("GET", PODS + "/debugged/ephemeralcontainers")
    names = [c["name"] for c in p["spec"].get("ephemeralContainers", [])]
    t.check("GET ephemeralcontainers shows the pod with it", status == 200 and names == ["debugger"],
            (status, names))
    p["spec"]["ephemeralContainers"] = []
    status, err = server.request("PUT", PODS + "/debugged/ephemeralcontainers", body=p)
    t.check("removing one: 422", status == 422 and "may not be removed" in err.get("message", ""),
            (status, err))
    status, p = server.request("GET", PODS + "/debugged")
    p["spec"]["ephemeralContainers"].append({"name": "app", "image": "x", "ports": [{"containerPort": 1}]})
    p["spec"]["containers"][0]["image"] = "changed"
    status, err = server.request("PUT", PODS + "/debugged/ephemeralcontainers", body=p)
    message = err.get("message", "") if isinstance(err, dict) else ""
    t.check("a duplicate name and ports: 422 naming both", status == 422 and
            "Duplicate value" in message and "cannot be set for an Ephemeral Container" in message,
            (status, err))
    p["spec"]["ephemeralContainers"][-1] = {"name": "second", "image": "busybox"}
    status, out = server.request("PUT", PODS + "/debugged/ephemeralcontainers", body=p)
    t.check("the subresource changes nothing else of the pod", status == 200 and
            out["spec"]["containers"][0]["image"] == "nginx" and
            len(out["spec"]["ephemeralContainers"]) == 2, (status, out))
    status, p = server.request("GET", PODS + "/debugged")
    p["spec"]["ephemeralContainers"] = []
    status, out = server.request("PUT", PODS + "/debugged", body=p)
    t.check("a pod update keeps the ephemeral containers", status == 200 and
            len(out["spec"].get("ephemeralContainers", [])) == 2, (status, out))


def without_kubelet(t, server, kc):
    for path in ["/unplaced/log", "/unplaced/exec?command=ls", "/unplaced/portforward",
                 "/unplaced/attach", "/unplaced/proxy"]:
        status, err = server.request("GET", PODS + path)
        t.check(f"pods{path.split('?')[0][9:]}: 503 saying there is no kubelet", status == 503 and
                err.get("reason") == "ServiceUnavailable" and "without kubelets" in err["message"],
                (status, err))
    status, err = server.request("GET", PODS + "/other/log")
    t.check("logs of a pod without a node: 400 as kube says it", status == 400 and
            err.get("message") == "pod other does not have a host assigned", (status, err))
    status, err = server.request("GET", PODS + "/nothing/log")
    t.check("logs of a missing pod: 404", status == 404, (status, err))
    server.request("POST", "/api/v1/nodes", body={"apiVersion": "v1", "kind": "Node",
                                                  "metadata": {"name": "node-1"}})
    status, err = server.request("GET", "/api/v1/nodes/node-1/proxy")
    t.check("a node proxy: 503", status == 503, (status, err))
    if kc is None:
        return
    code, out = kc("logs", "unplaced")
    t.check("kubectl logs fails with the reason", code != 0 and "without kubelets" in out, out)
    code, out = kc("exec", "unplaced", "--", "ls")
    t.check("kubectl exec fails with an error, no hang", code != 0, out)


def running(server, name, labels, ready=True):
    """A pod placed on node-1 and Running (as a kubelet reports it), Ready or not."""
    body = pod(name)
    body["metadata"]["labels"] = labels
    body["spec"]["nodeName"] = "node-1"
    status, created = server.request("POST", PODS, body=body)
    assert status == 201, created
    created["status"] = {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True" if ready else "False"}]}
    status, out = server.request("PUT", f"{PODS}/{name}/status", body=created)
    assert status == 200, out


def evict(server, name, dry_run=False, body_name=None):
    query = "?dryRun=All" if dry_run else ""
    return server.request("POST", f"{PODS}/{name}/eviction{query}", body={
        "apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": body_name or name, "namespace": "default"}})


def gone(server, name):
    status, p = server.request("GET", f"{PODS}/{name}")
    return status == 404 or "deletionTimestamp" in p.get("metadata", {})


def budget_status(server, name, **status):
    path = f"/apis/policy/v1/namespaces/default/poddisruptionbudgets/{name}"
    _, budget = server.request("GET", path)
    budget["status"].update(status)
    code, out = server.request("PUT", path + "/status", body=budget)
    assert code == 200, out
    return path


def eviction(t, server, kc):
    status, resources = server.request("GET", "/api/v1")
    entry = [r for r in resources.get("resources", []) if r["name"] == "pods/eviction"]
    t.check("discovery lists pods/eviction as policy/v1 Eviction, create", entry == [{
        "name": "pods/eviction", "singularName": "", "namespaced": True, "group": "policy",
        "version": "v1", "kind": "Eviction", "verbs": ["create"]}], entry)
    server.request("POST", PODS, body=pod("pending"))
    status, out = evict(server, "pending", body_name="other")
    t.check("an eviction named for another pod: 400", status == 400 and out.get("message") ==
            "name in URL does not match name in Eviction object", (status, out))
    status, out = evict(server, "pending")
    t.check("a pending pod is evicted: 201 Success", status == 201 and
            out.get("status") == "Success", (status, out))
    t.check("and deleted", gone(server, "pending"))
    status, out = evict(server, "pending")
    t.check("evicting a missing pod: 404", status == 404, (status, out))

    status, out = server.request("POST", "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
                                 body={"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                                       "metadata": {"name": "web-pdb"},
                                       "spec": {"minAvailable": 1,
                                                "selector": {"matchLabels": {"app": "web"}}}})
    t.check("a budget for app=web", status == 201, (status, out))
    running(server, "web-1", {"app": "web"})
    running(server, "web-2", {"app": "web"})
    running(server, "loner", {"app": "other"})
    status, out = evict(server, "loner")
    t.check("a running pod no budget covers is evicted", status == 201 and gone(server, "loner"),
            (status, out))
    status, out = evict(server, "web-1")
    causes = out.get("details", {}).get("causes", [])
    t.check("a budget no controller has observed yet: 429 naming it", status == 429 and
            out.get("message") == "Cannot evict pod as it would violate the pod's disruption budget."
            and causes == [{"reason": "DisruptionBudget", "message":
                            "The disruption budget web-pdb is still being processed by the server."}]
            and out["details"].get("retryAfterSeconds") == 10, (status, out))
    t.check("and the pod stays", not gone(server, "web-1"))

    path = budget_status(server, "web-pdb", observedGeneration=1, disruptionsAllowed=1,
                         currentHealthy=2, desiredHealthy=1, expectedPods=2)
    status, out = evict(server, "web-1", dry_run=True)
    _, budget = server.request("GET", path)
    t.check("a dry-run eviction succeeds and changes nothing", status == 201 and
            not gone(server, "web-1") and budget["status"]["disruptionsAllowed"] == 1,
            (status, out, budget["status"]))
    status, out = evict(server, "web-1")
    _, budget = server.request("GET", path)
    st = budget["status"]
    condition = [c for c in st.get("conditions", []) if c["type"] == "DisruptionAllowed"]
    t.check("a budget with a disruption left: the pod is evicted", status == 201 and
            gone(server, "web-1"), (status, out))
    t.check("the budget spent, the pod in disruptedPods, DisruptionAllowed False",
            st["disruptionsAllowed"] == 0 and "web-1" in st.get("disruptedPods", {}) and
            len(condition) == 1 and condition[0]["status"] == "False" and
            condition[0]["reason"] == "InsufficientPods", st)
    status, out = evict(server, "web-2")
    t.check("no disruption left: 429 with the budget's numbers", status == 429 and
            out["details"]["causes"][0]["message"] ==
            "The disruption budget web-pdb needs 1 healthy pods and has 2 currently" and
            not gone(server, "web-2"), (status, out))

    running(server, "web-3", {"app": "web"}, ready=False)
    status, out = evict(server, "web-3")
    t.check("an unready pod while the budget is healthy: evicted without spending it",
            status == 201 and gone(server, "web-3"), (status, out))
    budget_status(server, "web-pdb", disruptionsAllowed=-1)
    status, out = evict(server, "web-2")
    t.check("a negative budget: 403", status == 403 and out.get("message") ==
            'poddisruptionbudget.policy "web-pdb" is forbidden: pdb disruptions allowed is negative',
            (status, out))
    server.request("POST", "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
                   body={"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                         "metadata": {"name": "web-pdb-2"},
                         "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}})
    status, out = evict(server, "web-2")
    t.check("two budgets for one pod: refused", status == 500 and "more than one" in
            out.get("message", ""), (status, out))
    if kc is None:
        return
    server.request("POST", PODS, body=pod("drained"))
    server.request("POST", PODS + "/drained/binding", body={
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "drained"},
        "target": {"kind": "Node", "name": "node-2"}})
    server.request("POST", "/api/v1/nodes", body={"apiVersion": "v1", "kind": "Node",
                                                  "metadata": {"name": "node-2"}})
    code, out = kc("drain", "node-2", "--force", "--timeout=1s")
    t.check("kubectl drain evicts the node's pod (protobuf Eviction)",
            "evicting pod default/drained" in out and gone(server, "drained"), out)
    code, out = kc("get", "node", "node-2", "-o", "jsonpath={.spec.unschedulable}")
    t.check("and cordons the node", out == "true", out)


CRONJOB = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "nightly"},
           "spec": {"schedule": "@daily", "jobTemplate": {"spec": {"backoffLimit": 0, "template": {
               "spec": {"restartPolicy": "Never",
                        "tolerations": [{"key": "k", "operator": "Exists"}],
                        "volumes": [{"name": "v", "emptyDir": {"sizeLimit": "1Gi"}},
                                    {"name": "c", "configMap": {"name": "x", "defaultMode": 420}}],
                        "containers": [{"name": "c", "image": "busybox",
                                        "resources": {"limits": {"cpu": "500m"}},
                                        "volumeMounts": [{"name": "v", "mountPath": "/v"}],
                                        "livenessProbe": {"exec": {"command": ["true"]},
                                                          "periodSeconds": 5},
                                        "securityContext": {"runAsUser": 0,
                                                            "privileged": False}}]}}}}}}


def typed_clients(t, server, kc):
    """kubectl's typed commands send protobuf: whole pod specs must arrive intact."""
    if kc is None:
        return
    code, out = kc("debug", "node/node-1", "--image=busybox", "--profile=general", "--", "true")
    _, pods = server.request("GET", PODS)
    debuggers = [p for p in pods.get("items", []) if p["metadata"]["name"].startswith("node-debugger-")]
    spec = debuggers[0]["spec"] if debuggers else {}
    t.check("kubectl debug node/...: its pod created (protobuf, with a host volume)",
            code == 0 and spec.get("nodeName") == "node-1" and
            spec.get("volumes", [{}])[0].get("hostPath", {}).get("path") == "/" and
            spec.get("hostNetwork") is True, (out, spec))
    status, out = server.request("POST", "/apis/batch/v1/namespaces/default/cronjobs", body=CRONJOB)
    t.check("a cron job with a full pod template", status == 201, out)
    code, out = kc("create", "job", "from-nightly", "--from=cronjob/nightly")
    _, job = server.request("GET", "/apis/batch/v1/namespaces/default/jobs/from-nightly")
    _, cron = server.request("GET", "/apis/batch/v1/namespaces/default/cronjobs/nightly")
    want = cron.get("spec", {}).get("jobTemplate", {}).get("spec", {})
    got = job.get("spec", {}) if isinstance(job, dict) else {}
    t.check("kubectl create job --from=cronjob: the template arrives whole (protobuf)",
            code == 0 and got.get("template", {}).get("spec") == want.get("template", {}).get("spec")
            and got.get("backoffLimit") == 0, (out, got, want))


def quantities(t, server, kc):
    """Resource quantities are stored as kube stores them (resource.Quantity's canonical form),
    whoever writes them; a malformed one is Go's decoding error."""
    manifest = """apiVersion: v1
kind: Pod
metadata: {name: sized, namespace: default}
spec:
  containers:
  - name: app
    image: nginx
    resources:
      requests: {cpu: "0.5", memory: 1024Mi, ephemeral-storage: 1.5Gi}
      limits: {cpu: 1, memory: 2000000000}
  volumes:
  - name: scratch
    emptyDir: {sizeLimit: 2048Ki}
"""
    if kc is not None:
        code, out = kc("apply", "-f", "-", stdin=manifest)
        t.check("kubectl apply of a pod with quantities", code == 0, out)
    else:
        server.request("POST", PODS, body={
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sized"},
            "spec": {"containers": [{"name": "app", "image": "nginx", "resources": {
                "requests": {"cpu": "0.5", "memory": "1024Mi", "ephemeral-storage": "1.5Gi"},
                "limits": {"cpu": 1, "memory": 2000000000}}}],
                "volumes": [{"name": "scratch", "emptyDir": {"sizeLimit": "2048Ki"}}]}})
    _, got = server.request("GET", PODS + "/sized")
    resources = got.get("spec", {}).get("containers", [{}])[0].get("resources", {})
    t.check("stored as kube stores them: 500m, 1Gi, 1536Mi, \"1\", 2G",
            resources == {"requests": {"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "1536Mi"},
                          "limits": {"cpu": "1", "memory": "2G"}}, resources)
    t.check("... a volume's sizeLimit too (2Mi)",
            got.get("spec", {}).get("volumes", [{}])[0].get("emptyDir") == {"sizeLimit": "2Mi"},
            got.get("spec", {}).get("volumes"))
    status, out = server.request("POST", "/api/v1/namespaces/default/resourcequotas", body={
        "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "bad"},
        "spec": {"hard": {"cpu": "two"}}})
    t.check("a malformed quantity is a 400 in kube's words", status == 400 and
            out.get("message") == 'ResourceQuota in version "v1" cannot be handled as a '
            "ResourceQuota: quantities must match the regular expression "
            "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'", (status, out))
    status, out = server.request("POST", "/api/v1/namespaces/default/resourcequotas", body={
        "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "good"},
        "spec": {"hard": {"cpu": "1000m", "pods": "10", "requests.storage": "1e3",
                          "memory": "100u"}}})
    t.check("... a ResourceQuota's hard limits canonical (1, 10, 1e3), rounded up to "
            "milli-units as a ResourceList's (100u: 1m)", status == 201 and
            out.get("spec", {}).get("hard") == {"cpu": "1", "pods": "10", "requests.storage": "1e3",
                                                "memory": "1m"}, (status, out))


def main():
    def checks(t, server, tmp):
        kc = kubectl_runner(server, tmp)
        binding(t, server)
        ephemeral(t, server, kc)
        without_kubelet(t, server, kc)
        eviction(t, server, kc)
        typed_clients(t, server, kc)
        quantities(t, server, kc)
    run_suite(checks)

if __name__ == "__main__":
    main()
