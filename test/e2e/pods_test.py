"""Pod subresources as a scheduler, kubectl and users reach them: pods/binding (placement, the
PodScheduled condition, 409 for a placed pod, 422 for a bad target), pods/ephemeralcontainers
(`kubectl debug`: only additions, nothing else of the pod changes), and the subresources a
kubelet would serve (`kubectl logs`, `exec`, `port-forward`, node and service proxies), which
answer with a Status saying why they cannot be served.

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


def main():
    def checks(t, server, tmp):
        kc = kubectl_runner(server, tmp)
        binding(t, server)
        ephemeral(t, server, kc)
        without_kubelet(t, server, kc)
    run_suite(checks)

if __name__ == "__main__":
    main()
