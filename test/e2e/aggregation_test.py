"""API aggregation as kubectl sees it: APIServices (apiregistration.k8s.io/v1) served and
validated as kube-aggregator does, a local APIService for every group/version kwatch serves
(built-in ones registered at start-up, a CustomResourceDefinition's for as long as it serves
them), `kubectl get apiservices` with kube's columns.

Usage: aggregation_test.py <path to kwatch-apiserver>
"""
import json
import sys

from harness import Checks, Server, TempDir, kubectl_runner, wait_for


def api_services(kc):
    code, out = kc("get", "apiservices", "-o", "json")
    if code != 0:
        return {}
    return {s["metadata"]["name"]: s for s in json.loads(out)["items"]}


def checks_of(t, server, tmp):
    kc = kubectl_runner(server, tmp)
    if kc is None:
        print("kubectl is not installed: skipping")
        sys.exit(77)
    services = wait_for(lambda: (lambda s: "v1.apps" in s and s)(api_services(kc)), timeout=10,
                        what="the local APIServices") or {}
    core = services.get("v1.", {})
    t.check("every served group/version has a local APIService (core as \"v1.\")",
            {"v1.", "v1.apps", "v2.autoscaling", "v1.authorization.k8s.io",
             "v1beta1.admissionregistration.k8s.io"} <= set(services)
            and "v1.apiregistration.k8s.io" not in services, sorted(services))
    t.check("... with kube's priorities and label",
            core.get("spec", {}).get("groupPriorityMinimum") == 18000
            and services.get("v2.autoscaling", {}).get("spec", {}).get("versionPriority") == 30
            and core.get("metadata", {}).get("labels", {}).get(
                "kube-aggregator.kubernetes.io/automanaged") == "onstart", core)
    conditions = core.get("status", {}).get("conditions", [])
    t.check("... Available: Local", any(c.get("type") == "Available" and c.get("status") == "True"
                                        and c.get("reason") == "Local" for c in conditions),
            conditions)
    code, out = kc("get", "apiservices")
    lines = out.splitlines()
    t.check("kubectl get apiservices prints NAME SERVICE AVAILABLE AGE",
            code == 0 and lines[0].split() == ["NAME", "SERVICE", "AVAILABLE", "AGE"]
            and any(ln.split()[:3] == ["v1.apps", "Local", "True"] for ln in lines), out)

    remote = {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
              "metadata": {"name": "v1beta1.metrics.k8s.io"},
              "spec": {"group": "metrics.k8s.io", "version": "v1beta1",
                       "groupPriorityMinimum": 100, "versionPriority": 100,
                       "insecureSkipTLSVerify": True,
                       "service": {"namespace": "kube-system", "name": "metrics-server"}}}
    code, out = kc("apply", "-f", "-", stdin=json.dumps(remote))
    got = api_services(kc).get("v1beta1.metrics.k8s.io", {})
    t.check("a remote APIService is created with kube's default port and no status yet",
            code == 0 and got.get("spec", {}).get("service", {}).get("port") == 443, out)
    bad = json.loads(json.dumps(remote))
    bad["metadata"]["name"] = "v1.metrics.k8s.io"
    bad["spec"]["caBundle"] = "Zm9v"
    code, out = kc("apply", "-f", "-", stdin=json.dumps(bad))
    t.check("a bad APIService is refused with kube's words",
            code != 0 and "must be `spec.version+\".\"+spec.group`: \"v1beta1.metrics.k8s.io\"" in out
            and "may not be true if caBundle is present" in out, out)

    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.reg.example.com"},
           "spec": {"group": "reg.example.com", "scope": "Namespaced",
                    "names": {"plural": "widgets", "kind": "Widget"},
                    "versions": [
                        {"name": "v1", "served": True, "storage": True,
                         "schema": {"openAPIV3Schema": {"type": "object"}}},
                        {"name": "v2", "served": False, "storage": False,
                         "schema": {"openAPIV3Schema": {"type": "object"}}}]}}
    kc("apply", "-f", "-", stdin=json.dumps(crd))
    got = wait_for(lambda: api_services(kc).get("v1.reg.example.com"), timeout=10,
                   what="the definition's APIService") or {}
    t.check("a definition's served version gets a local APIService (1000/100, label true)",
            got.get("spec", {}).get("groupPriorityMinimum") == 1000
            and got.get("metadata", {}).get("labels", {}).get(
                "kube-aggregator.kubernetes.io/automanaged") == "true"
            and "v2.reg.example.com" not in api_services(kc), got)
    kc("delete", "crd", "widgets.reg.example.com")
    gone = wait_for(lambda: "v1.reg.example.com" not in api_services(kc), timeout=10,
                    what="the definition's APIService gone")
    t.check("... and loses it with the definition", bool(gone))
    code, out = kc("delete", "apiservice", "v1.apps")
    t.check("a built-in one deleted by hand stays deleted while the server runs",
            code == 0 and "v1.apps" not in api_services(kc), out)
    t.check("... and a user's remote APIService is left alone",
            "v1beta1.metrics.k8s.io" in api_services(kc))


def main():
    binary = sys.argv[1]
    t = Checks()
    with TempDir() as tmp:
        server = Server(binary, data_dir=tmp + "/data").start()
        try:
            checks_of(t, server, tmp)
            server.stop()
            server.start()
            kc = kubectl_runner(server, tmp)
            back = wait_for(lambda: "v1.apps" in api_services(kc), timeout=10,
                            what="v1.apps registered again")
            t.check("a restart registers the built-in ones again", bool(back))
            t.check("server alive", server.alive())
        finally:
            server.stop()
    t.finish()


if __name__ == "__main__":
    main()
