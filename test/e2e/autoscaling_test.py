"""HorizontalPodAutoscalers in autoscaling/v2 and autoscaling/v1 over one stored form:
`kubectl autoscale`, `kubectl get hpa` columns, each version reading what the other wrote (v1's
CPU target as a v2 metric, v2's other metrics kept in v1's annotations through a v1
read-modify-write), watches in each version, discovery with v2 preferred, and kube's
validation.

Usage: autoscaling_test.py <path to kwatch-apiserver>
"""
import json

from harness import WatchStream, kubectl_runner, run_suite

V1 = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers"
V2 = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers"


def target_ref(name="web"):
    return {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}


def versions(t, server):
    status, groups = server.request("GET", "/apis")
    auto = [g for g in groups.get("groups", []) if g["name"] == "autoscaling"]
    t.check("one autoscaling group with v2 preferred, then v1",
            len(auto) == 1 and [v["version"] for v in auto[0]["versions"]] == ["v2", "v1"] and
            auto[0]["preferredVersion"]["version"] == "v2", auto)
    for v in ("v1", "v2"):
        status, lst = server.request("GET", f"/apis/autoscaling/{v}")
        names = [r["name"] for r in lst.get("resources", [])]
        t.check(f"autoscaling/{v} serves horizontalpodautoscalers and its status",
                "horizontalpodautoscalers" in names and "horizontalpodautoscalers/status" in names,
                names)


def conversion(t, server):
    v1 = {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
          "metadata": {"name": "from-v1"},
          "spec": {"scaleTargetRef": target_ref(), "maxReplicas": 4,
                   "targetCPUUtilizationPercentage": 55}}
    status, out = server.request("POST", V1, body=v1)
    t.check("create in v1", status == 201 and out["apiVersion"] == "autoscaling/v1" and
            out["spec"].get("minReplicas") == 1, (status, out))
    status, got = server.request("GET", V2 + "/from-v1")
    t.check("read in v2: the CPU target is a Resource metric", status == 200 and
            got["spec"]["metrics"] == [{"type": "Resource", "resource": {
                "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 55}}}],
            got)
    v2 = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
          "metadata": {"name": "from-v2"},
          "spec": {"scaleTargetRef": target_ref(), "maxReplicas": 6,
                   "metrics": [{"type": "Pods", "pods": {"metric": {"name": "rps"},
                                "target": {"type": "AverageValue", "averageValue": "100"}}}],
                   "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}}}
    status, out = server.request("POST", V2, body=v2)
    t.check("create in v2, defaulted as kube does", status == 201 and
            out["spec"]["minReplicas"] == 1 and
            out["spec"]["behavior"]["scaleUp"]["selectPolicy"] == "Max", (status, out))
    status, old = server.request("GET", V1 + "/from-v2")
    notes = old["metadata"].get("annotations", {})
    t.check("read in v1: the other metrics ride in kube's annotation",
            status == 200 and "autoscaling.alpha.kubernetes.io/metrics" in notes and
            "targetCPUUtilizationPercentage" not in old["spec"], old)
    old["spec"]["maxReplicas"] = 8
    status, out = server.request("PUT", V1 + "/from-v2", body=old)
    status, got = server.request("GET", V2 + "/from-v2")
    t.check("a v1 read-modify-write keeps v2's metrics and behavior", status == 200 and
            got["spec"]["maxReplicas"] == 8 and
            got["spec"]["metrics"][0]["pods"]["metric"]["name"] == "rps" and
            got["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 60 and
            "annotations" not in got["metadata"], got)
    bad = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
           "metadata": {"name": "bad"},
           "spec": {"scaleTargetRef": {"kind": "Deployment"}, "minReplicas": 5, "maxReplicas": 2,
                    "metrics": [{"type": "Pods"}]}}
    status, err = server.request("POST", V2, body=bad)
    fields = sorted(c["field"] for c in err.get("details", {}).get("causes", []))
    t.check("invalid HPAs: 422 with kube's causes", status == 422 and fields ==
            ["spec.maxReplicas", "spec.metrics[0].pods", "spec.scaleTargetRef.name"],
            (status, err))


def watches(t, server):
    w1 = WatchStream(server, V1 + "?watch=true")
    w2 = WatchStream(server, V2 + "?watch=true")
    try:
        body = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": "watched"},
                "spec": {"scaleTargetRef": target_ref(), "maxReplicas": 3}}
        server.request("POST", V2, body=body)

        def seen(w):
            def named(got):
                return any(e["object"]["metadata"].get("name") == "watched" for e in got)
            for e in w.events_until(named, timeout=10):
                if e["object"]["metadata"].get("name") == "watched":
                    return e
            return {"object": {}}
        e1 = seen(w1)
        e2 = seen(w2)
        t.check("a v1 watch sees v1 objects", e1["object"].get("apiVersion") == "autoscaling/v1" and
                e1["object"]["spec"].get("targetCPUUtilizationPercentage") == 80, e1)
        t.check("a v2 watch sees v2 objects", e2["object"].get("apiVersion") == "autoscaling/v2", e2)
    finally:
        w1.close()
        w2.close()


def kubectl(t, server, kc):
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
              "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                       "template": {"metadata": {"labels": {"app": "web"}},
                                    "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}
    server.request("POST", "/apis/apps/v1/namespaces/default/deployments", body=deploy)
    code, out = kc("autoscale", "deployment", "web", "--min=2", "--max=5", "--cpu-percent=70")
    t.check("kubectl autoscale", code == 0 and "autoscaled" in out, out)
    code, out = kc("get", "hpa", "web")
    lines = out.strip().splitlines()
    t.check("kubectl get hpa prints kube's columns",
            code == 0 and lines[0].split() == ["NAME", "REFERENCE", "TARGETS", "MINPODS",
                                               "MAXPODS", "REPLICAS", "AGE"] and
            "Deployment/web" in lines[1] and "cpu: <unknown>/70%" in lines[1], out)
    code, out = kc("get", "horizontalpodautoscalers.v1.autoscaling", "web", "-o", "json")
    obj = json.loads(out) if code == 0 else {}
    t.check("kubectl reads it in v1 too", obj.get("spec", {}).get("targetCPUUtilizationPercentage") == 70,
            out[:400])


def main():
    def checks(t, server, tmp):
        versions(t, server)
        conversion(t, server)
        watches(t, server)
        kc = kubectl_runner(server, tmp)
        if kc is not None:
            kubectl(t, server, kc)
    run_suite(checks)

if __name__ == "__main__":
    main()
