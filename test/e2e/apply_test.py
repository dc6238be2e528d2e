"""Server-side apply and field ownership as clients use them: `kubectl apply --server-side`
(create, idempotence, conflicts with `kubectl scale` and `--force-conflicts`, fields dropped
from the manifest, migration from client-side apply and back), apply patches over HTTP in YAML
and JSON (201/200, 409 with FieldManagerConflict causes, the 400/422 answers for bad requests),
managedFields kept by every write (fieldManager or User-Agent, clearing with `[]`), the status
subresource, custom resources merged by their list types, and the official Python client.

Usage: apply_test.py <path to kwatch-apiserver>
"""
import json
import os

from harness import kubectl_runner, python_api_client, run_suite

APPLY = {"Content-Type": "application/apply-patch+yaml"}
CMS = "/api/v1/namespaces/default/configmaps"
DEPLOYS = "/apis/apps/v1/namespaces/default/deployments"

DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {tier: front}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: nginx
        image: nginx:1.25
        ports: [{containerPort: 80}]
      - name: sidecar
        image: busybox
"""


def managers(obj):
    return [(e["manager"], e["operation"], e.get("subresource", ""))
            for e in obj["metadata"].get("managedFields", [])]


def entry(obj, manager, operation=None):
    for e in obj["metadata"].get("managedFields", []):
        if e["manager"] == manager and (operation is None or e["operation"] == operation):
            return e
    return None


def kubectl_apply(t, server, kc, write):
    path = write("deploy.yaml", DEPLOYMENT)
    code, out = kc("apply", "--server-side", "-f", path)
    t.check("kubectl apply --server-side creates", code == 0 and "serverside-applied" in out, out)
    status, d = server.request("GET", DEPLOYS + "/web")
    e = entry(d, "kubectl", "Apply")
    t.check("the Apply entry is kubectl's", e is not None and e["fieldsType"] == "FieldsV1", d)
    containers = e["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"] if e else {}
    t.check("containers are owned by name", 'k:{"name":"nginx"}' in containers, containers)
    t.check("defaults are nobody's", e is not None and
            "f:imagePullPolicy" not in containers.get('k:{"name":"nginx"}', {}), containers)
    rv = d["metadata"]["resourceVersion"]
    code, out = kc("apply", "--server-side", "-f", path)
    status, again = server.request("GET", DEPLOYS + "/web")
    t.check("applying the same manifest again writes nothing",
            code == 0 and again["metadata"]["resourceVersion"] == rv, (out, rv, again["metadata"]))

    code, out = kc("scale", "deployment", "web", "--replicas=5")
    t.check("kubectl scale", code == 0, out)
    status, d = server.request("GET", DEPLOYS + "/web")
    t.check("scale is recorded under the scale subresource",
            ("kubectl", "Update", "scale") in managers(d), managers(d))
    code, out = kc("apply", "--server-side", "-f", path)
    t.check("apply meets kubectl scale's replicas as a conflict",
            code != 0 and 'conflict with "kubectl" with subresource "scale" using apps/v1: '
            '.spec.replicas' in out, out)
    code, out = kc("apply", "--server-side", "--force-conflicts", "-f", path)
    status, d = server.request("GET", DEPLOYS + "/web")
    t.check("--force-conflicts takes the field back",
            code == 0 and d["spec"]["replicas"] == 2 and
            ("kubectl", "Update", "scale") not in managers(d), (out, managers(d)))

    # Another manager adds a label; the manifest drops its own label and a container.
    code, out = kc("label", "deployment", "web", "team=blue")
    smaller = DEPLOYMENT.replace("  labels: {tier: front}\n", "").split("      - name: sidecar")[0]
    code, out = kc("apply", "--server-side", "-f", write("smaller.yaml", smaller))
    status, d = server.request("GET", DEPLOYS + "/web")
    names = [c["name"] for c in d["spec"]["template"]["spec"]["containers"]]
    t.check("fields no longer applied are removed",
            code == 0 and "tier" not in d["metadata"].get("labels", {}) and names == ["nginx"],
            (out, d["metadata"].get("labels"), names))
    t.check("fields other managers set stay", d["metadata"]["labels"].get("team") == "blue",
            d["metadata"].get("labels"))

    code, out = kc("apply", "--server-side", "--dry-run=server", "-f",
                   write("dry.yaml", smaller.replace("replicas: 2", "replicas: 7")))
    status, d = server.request("GET", DEPLOYS + "/web")
    t.check("a server dry run applies nothing", code == 0 and d["spec"]["replicas"] == 2, out)


def client_side_migration(t, server, kc, write):
    cm = """apiVersion: v1
kind: ConfigMap
metadata: {name: migrating}
data: {a: "1", b: "2"}
"""
    code, out = kc("apply", "-f", write("csa.yaml", cm))
    status, obj = server.request("GET", CMS + "/migrating")
    t.check("client-side apply is recorded as kubectl-client-side-apply",
            code == 0 and ("kubectl-client-side-apply", "Update", "") in managers(obj),
            (out, managers(obj)))
    code, out = kc("apply", "--server-side", "-f", write("ssa.yaml", cm.replace('"2"', '"3"')))
    status, obj = server.request("GET", CMS + "/migrating")
    t.check("kubectl apply --server-side takes over without conflicts",
            code == 0 and obj["data"] == {"a": "1", "b": "3"}, (out, obj.get("data")))
    last = json.loads(obj["metadata"]["annotations"]
                      ["kubectl.kubernetes.io/last-applied-configuration"])
    t.check("the last-applied annotation follows", last.get("data", {}).get("b") == "3", last)
    code, out = kc("apply", "-f", write("csa2.yaml", cm.replace('"2"', '"4"')))
    status, obj = server.request("GET", CMS + "/migrating")
    t.check("and client-side apply still works afterwards",
            code == 0 and obj["data"]["b"] == "4", (out, obj.get("data")))


def http_apply(t, server):
    body = """# a YAML document, as clients send it
apiVersion: v1
kind: ConfigMap
metadata:
  name: plain
  labels:
    owner: 'first'
data:
  enabled: yes
  count: 0x10
  text: "yes"
"""
    path = CMS + "/plain?fieldManager=first"
    status, err = server.request("PATCH", path, body=body, headers=APPLY)
    t.check("YAML 1.1 scalars resolve as kube's decoder does (yes is a boolean: 400 for a "
            "ConfigMap's string data)", status == 400 and "cannot be handled as a ConfigMap"
            in err.get("message", ""), (status, err))
    body = body.replace("enabled: yes", "enabled: 'on'").replace("count: 0x10", "count: '16'")
    status, obj = server.request("PATCH", path, body=body, headers=APPLY)
    t.check("apply of an absent object creates it (201)", status == 201, obj)
    t.check("a quoted scalar stays a string", obj.get("data", {}).get("text") == "yes", obj)
    status, obj = server.request("PATCH", path, body=body, headers=APPLY)
    t.check("applying to an existing object answers 200", status == 200, obj)

    changed = body.replace("'first'", "'second'")
    status, err = server.request("PATCH", CMS + "/plain?fieldManager=second", body=changed,
                                 headers=APPLY)
    causes = err.get("details", {}).get("causes", []) if isinstance(err, dict) else []
    t.check("a conflicting apply answers 409 Conflict", status == 409 and
            err.get("reason") == "Conflict", err)
    t.check("the message names the manager and the field",
            isinstance(err, dict) and err.get("message") ==
            'Apply failed with 1 conflict: conflict with "first": .metadata.labels.owner', err)
    t.check("one FieldManagerConflict cause per field",
            causes == [{"reason": "FieldManagerConflict", "message": 'conflict with "first"',
                        "field": ".metadata.labels.owner"}], causes)
    status, obj = server.request("PATCH", CMS + "/plain?fieldManager=second&force=true",
                                 body=changed, headers=APPLY)
    t.check("force=true moves the field", status == 200 and
            obj["metadata"]["labels"]["owner"] == "second", obj)

    as_json = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plain"},
               "data": {"json": "1"}}
    status, obj = server.request("PATCH", CMS + "/plain?fieldManager=third", body=json.dumps(as_json),
                                 headers={"Content-Type": "application/apply-patch+json"})
    t.check("apply-patch+json works too", status == 200 and obj["data"].get("json") == "1", obj)

    bad = [
        ("no fieldManager", CMS + "/plain", body, 422,
         'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for '
         'apply patch'),
        ("another version", CMS + "/plain?fieldManager=x", body.replace("apiVersion: v1",
                                                                         "apiVersion: v2"), 400,
         "Incorrect version specified in apply patch. Specified patch version: v2, expected: v1"),
        ("managedFields in the patch", CMS + "/plain?fieldManager=x",
         body.replace("metadata:\n", "metadata:\n  managedFields: []\n"), 400,
         "metadata.managedFields must be nil"),
        ("another name", CMS + "/other?fieldManager=x", body, 400,
         "the name of the object (plain) does not match the name on the URL (other)"),
        ("not YAML", CMS + "/plain?fieldManager=x", "a: [unclosed", 400, None),
        ("a list", CMS + "/plain?fieldManager=x", "- a\n- b\n", 400, None),
    ]
    for name, p, b, code, message in bad:
        status, err = server.request("PATCH", p, body=b, headers=APPLY)
        t.check(f"apply with {name}: {code}", status == code and isinstance(err, dict) and
                err.get("kind") == "Status" and (message is None or err.get("message") == message),
                (status, err))
    dup = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "dup"},
           "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
               "metadata": {"labels": {"a": "b"}},
               "spec": {"containers": [{"name": "c", "image": "x"}, {"name": "c", "image": "y"}]}}}}
    status, err = server.request("PATCH", DEPLOYS + "/dup?fieldManager=x", body=json.dumps(dup),
                                 headers=APPLY)
    t.check("duplicate list keys in an apply: 400 naming them", status == 400 and
            'duplicate entries for key [name="c"]' in err.get("message", ""), (status, err))
    status, err = server.request("PATCH", CMS + "/plain?force=true",
                                 body={"data": {"x": "1"}},
                                 headers={"Content-Type": "application/merge-patch+json"})
    t.check("force on a merge patch: 422", status == 422 and "force" in err.get("message", ""),
            (status, err))
    unknown = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plain"},
               "bogus": 1}
    status, err = server.request("PATCH", CMS + "/plain?fieldManager=x", body=json.dumps(unknown),
                                 headers=APPLY)
    t.check("a field the kind does not have: 400", status == 400 and
            ".bogus: field not declared in schema" in err.get("message", ""), (status, err))


def update_tracking(t, server):
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "tracked"},
          "data": {"a": "1"}}
    status, obj = server.request("POST", CMS + "?fieldManager=maker", body=cm)
    t.check("a create is recorded under its fieldManager",
            status == 201 and managers(obj) == [("maker", "Update", "")], obj)
    obj["data"]["b"] = "2"
    status, obj = server.request("PUT", CMS + "/tracked", body=obj,
                                 headers={"User-Agent": "my-controller/1.2 (linux)"})
    t.check("an update without fieldManager is recorded under its User-Agent",
            status == 200 and ("my-controller", "Update", "") in managers(obj), managers(obj))
    e = entry(obj, "my-controller")
    t.check("it owns what it changed", e and e["fieldsV1"] == {"f:data": {"f:b": {}}}, e)
    obj["metadata"]["managedFields"] = []
    status, obj = server.request("PUT", CMS + "/tracked", body=obj)
    t.check("managedFields: [] clears them", status == 200 and
            "managedFields" not in obj["metadata"], obj["metadata"])
    status, err = server.request("POST", CMS + "?fieldManager=" + "x" * 129, body=cm)
    t.check("a fieldManager over 128 bytes: 422", status == 422, (status, err))


def status_subresource(t, server):
    status, d = server.request("GET", DEPLOYS + "/web")
    body = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "status": {"observedGeneration": 1, "replicas": 2}}
    status, d = server.request("PATCH", DEPLOYS + "/web/status?fieldManager=fake-controller",
                               body=json.dumps(body), headers=APPLY)
    e = entry(d, "fake-controller", "Apply") if status == 200 else None
    t.check("apply to /status owns status fields under the status subresource",
            e is not None and e.get("subresource") == "status" and
            "f:status" in e["fieldsV1"] and d["status"].get("replicas") == 2, (status, d))
    body = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": 2}, "status": {"replicas": 9}}
    status, d = server.request("PATCH", DEPLOYS + "/web?fieldManager=mixer",
                               body=json.dumps(body), headers=APPLY)
    e = entry(d, "mixer", "Apply") if status == 200 else None
    t.check("the main resource neither writes nor owns the status",
            e is not None and "f:status" not in e["fieldsV1"] and d["status"]["replicas"] == 2,
            (status, d))


CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
             "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                 "openAPIV3Schema": {"type": "object", "properties": {"spec": {
                     "type": "object", "properties": {
                         "ports": {"type": "array", "x-kubernetes-list-type": "map",
                                   "x-kubernetes-list-map-keys": ["name"],
                                   "items": {"type": "object", "required": ["name"],
                                             "properties": {"name": {"type": "string"},
                                                            "port": {"type": "integer"}}}},
                         "tags": {"type": "array", "x-kubernetes-list-type": "set",
                                  "items": {"type": "string"}},
                         "args": {"type": "array", "items": {"type": "string"}}}}}}}}]}}


def custom_resources(t, server):
    from harness import wait_for
    status, out = server.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                                 body=CRD)
    t.check("CRD created", status == 201, out)
    path = "/apis/example.com/v1/namespaces/default/gadgets/g"
    wait_for(lambda: server.request("GET", "/apis/example.com/v1/namespaces/default/gadgets")[0]
             == 200, timeout=10, what="gadgets served")

    def apply(manager, spec):
        body = {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"},
                "spec": spec}
        return server.request("PATCH", f"{path}?fieldManager={manager}", body=json.dumps(body),
                              headers=APPLY)
    status, g = apply("a", {"ports": [{"name": "http", "port": 80}], "tags": ["x"], "args": ["1"]})
    t.check("apply creates a custom resource", status == 201, g)
    status, g = apply("b", {"ports": [{"name": "metrics", "port": 9090}], "tags": ["y"]})
    spec = g.get("spec", {}) if isinstance(g, dict) else {}
    t.check("a map list merges by key across managers",
            status == 200 and [p["name"] for p in spec.get("ports", [])] == ["http", "metrics"],
            (status, g))
    t.check("a set list merges by value", sorted(spec.get("tags", [])) == ["x", "y"], spec)
    status, err = apply("b", {"args": ["2"]})
    t.check("an atomic list belongs to one manager: conflict", status == 409 and
            err.get("message") == 'Apply failed with 1 conflict: conflict with "a": .spec.args',
            (status, err))
    status, g = apply("a", {"args": ["1"]})
    t.check("a manager letting go of list items removes only its own",
            status == 200 and [p["name"] for p in g["spec"]["ports"]] == ["metrics"] and
            g["spec"]["tags"] == ["y"], (status, g))


def python_client(t, server, tmp):
    api_client = python_api_client(t, server, tmp)
    if api_client is None:
        return
    from kubernetes import client, dynamic
    import yaml
    # This client sends a dict body of an apply only as JSON content types; the way its users
    # apply is a serialized manifest, here YAML as written by PyYAML.
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "from-python"},
            "data": {"k": "v"}}
    try:
        dyn = dynamic.DynamicClient(api_client)
        configmaps = dyn.resources.get(api_version="v1", kind="ConfigMap")
        dyn.server_side_apply(configmaps, body=yaml.safe_dump(body), name="from-python", namespace="default",
                              field_manager="python-app")
        obj = client.CoreV1Api(api_client).read_namespaced_config_map("from-python", "default")
        fields = obj.metadata.managed_fields or []
        t.check("the Python client applies (dynamic client) and reads managedFields",
                obj.data == {"k": "v"} and len(fields) == 1 and
                fields[0].manager == "python-app" and fields[0].operation == "Apply" and
                fields[0].fields_v1 == {"f:data": {"f:k": {}}}, obj.metadata)
        body["data"]["k"] = "changed"
        try:
            dyn.server_side_apply(configmaps, body=yaml.safe_dump(body), name="from-python", namespace="default",
                                  field_manager="python-other")
            t.check("the Python client sees a conflict as 409", False, "no error")
        except Exception as e:  # noqa: BLE001 - the client's ApiException carries the status
            t.check("the Python client sees a conflict as 409", getattr(e, "status", None) == 409,
                    repr(e)[:400])
        dyn.server_side_apply(configmaps, body=yaml.safe_dump(body), name="from-python", namespace="default",
                              field_manager="python-other", force_conflicts=True)
        obj = client.CoreV1Api(api_client).read_namespaced_config_map("from-python", "default")
        t.check("force_conflicts from the Python client", obj.data == {"k": "changed"}, obj.data)
    except Exception as e:  # noqa: BLE001 - any client failure is the check's failure
        t.check("the Python client applies and reads managedFields", False, repr(e)[:600])


def main():
    def checks(t, server, tmp):
        def write(name, text):
            p = os.path.join(tmp, name)
            with open(p, "w") as f:
                f.write(text)
            return p
        kc = kubectl_runner(server, tmp)
        if kc is None:
            t.check("kubectl present (kubectl checks skipped)", True)
        else:
            kubectl_apply(t, server, kc, write)
            client_side_migration(t, server, kc, write)
        http_apply(t, server)
        update_tracking(t, server)
        if kc is not None:
            status_subresource(t, server)
        custom_resources(t, server)
        python_client(t, server, tmp)
    run_suite(checks)

if __name__ == "__main__":
    main()
