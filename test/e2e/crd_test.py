"""CustomResourceDefinitions as an operator uses them: install a realistic definition with kubectl,
work with its objects through kubectl and the official Python client, refuse bad definitions and
bad objects, delete the definition, and find definitions and objects again after a restart (and,
on etcd, through a second replica).

Usage: crd_test.py <path to kwatch-apiserver>
"""
import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading

from harness import Checks, Server, TempDir, rss_kib, storage_backend, wait_for

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
WIDGETS = "/apis/example.com/v1/namespaces/default/widgets"

CRD_YAML = """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd], categories: [all]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas,
              labelSelectorPath: .status.selector}
    additionalPrinterColumns:
    - {name: Color, type: string, jsonPath: .spec.color}
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    selectableFields:
    - jsonPath: .spec.color
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [color]
            properties:
              color: {type: string, pattern: '(?i)^(red|green|blue)$'}
              replicas: {type: integer, minimum: 0, default: 1}
              port: {x-kubernetes-int-or-string: true}
              items:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    value: {type: string}
          status:
            type: object
            properties:
              replicas: {type: integer}
              selector: {type: string}
  - name: v1beta1
    served: true
    storage: false
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
  - name: v1alpha1
    served: false
    storage: false
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
"""


def widget(name, **spec):
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec}


def crd(name="things.example.org", group="example.org", plural="things", kind="Thing", versions=None,
        schema=None):
    schema = schema or {"type": "object", "properties": {"spec": {"type": "object"}}}
    versions = versions or [{"name": "v1", "served": True, "storage": True,
                             "schema": {"openAPIV3Schema": schema}}]
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": name},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
                     "versions": versions}}


def conditions(server, name):
    status, body = server.request("GET", f"{CRDS}/{name}")
    if status != 200:
        return {}
    return {c["type"]: c["status"] for c in body.get("status", {}).get("conditions", [])}


def established(server, name):
    return conditions(server, name).get("Established") == "True" and \
        server.request("GET", "/apis/example.com/v1")[0] == 200


def main():
    binary = sys.argv[1]
    t = Checks()
    with TempDir() as tmp:
        server = Server(binary, data_dir=tmp + "/data").start()
        try:
            check_install(t, server, tmp)
            check_objects(t, server)
            check_bad_definitions(t, server)
            check_forged_status(t, server)
            check_python_client(t, server)
            check_kubectl(t, server, tmp)
            server.stop()
            server.start()
            check_restart(t, server)
            if storage_backend() == "etcd3":
                check_second_replica(t, server, binary)
            check_delete(t, server)
        finally:
            server.stop()
        check_delete_killed(t, binary, tmp)
        check_delete_killed(t, binary, tmp, graceful=True)
        check_expensive_patterns(t, binary)
    t.finish()


def kubectl_runner(server, tmp):
    kubectl = shutil.which("kubectl")
    if not kubectl:
        return None
    env = dict(os.environ, KUBECONFIG=server.kubeconfig(tmp), HOME=tmp)

    def run(*args, stdin=None, timeout=60):
        p = subprocess.run([kubectl, *args], input=stdin, capture_output=True, text=True, env=env,
                           timeout=timeout)
        return p.returncode, p.stdout + p.stderr
    return run


def check_install(t, server, tmp):
    run = kubectl_runner(server, tmp)
    if run is not None:
        code, out = run("apply", "-f", "-", stdin=CRD_YAML)
        t.check("kubectl apply -f the definition", code == 0, out)
    else:
        import yaml  # noqa: F401  (python3-yaml comes with python3-kubernetes)
        status, body = server.request("POST", CRDS, body=__import__("yaml").safe_load(CRD_YAML))
        t.check("POST the definition", status == 201, body)
    wait_for(lambda: established(server, "widgets.example.com"), timeout=5, what="Established")
    conds = conditions(server, "widgets.example.com")
    t.check("NamesAccepted and Established are True",
            conds.get("NamesAccepted") == "True" and conds.get("Established") == "True", conds)
    status, body = server.request("GET", f"{CRDS}/widgets.example.com")
    t.check("the definition carries the cleanup finalizer",
            "customresourcecleanup.apiextensions.k8s.io" in body["metadata"].get("finalizers", []), body)
    t.check("status.storedVersions is the storage version",
            body.get("status", {}).get("storedVersions") == ["v1"], body.get("status"))
    status, body = server.request("GET", "/apis/example.com/v1")
    names = [r["name"] for r in body.get("resources", [])]
    t.check("discovery lists widgets with status and scale", status == 200 and
            {"widgets", "widgets/status", "widgets/scale"} <= set(names), names)
    # kube's storageVersionHash: of the storage version's group/version/kind, for every version.
    want = base64.b64encode(hashlib.sha256(b"example.com/v1/Widget").digest()[:8]).decode()
    hashes = {}
    for version in ("v1", "v1beta1"):
        status, listed = server.request("GET", f"/apis/example.com/{version}")
        for r in listed.get("resources", []) if isinstance(listed, dict) else []:
            hashes[f"{version}/{r['name']}"] = r.get("storageVersionHash")
    t.check("each version's widgets carry the storage version's hash, subresources none",
            hashes.get("v1/widgets") == want and hashes.get("v1beta1/widgets") == want
            and hashes.get("v1/widgets/status") is None, str(hashes))
    status, body = server.request("GET", "/apis")
    t.check("the group is in /apis", any(g["name"] == "example.com" for g in body.get("groups", [])), body)
    accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
    status, body = server.request("GET", "/apis", headers={"Accept": accept})
    groups = {g["metadata"]["name"]: g for g in body.get("items", [])} if isinstance(body, dict) else {}
    versions = [v["version"] for v in groups.get("example.com", {}).get("versions", [])]
    widgets = [r for v in groups.get("example.com", {}).get("versions", []) if v["version"] == "v1"
               for r in v["resources"] if r["resource"] == "widgets"]
    t.check("aggregated discovery lists both versions and the subresources",
            body.get("kind") == "APIGroupDiscoveryList" and sorted(versions) == ["v1", "v1beta1"] and
            widgets and sorted(s["subresource"] for s in widgets[0].get("subresources", [])) == ["scale", "status"]
            and widgets[0]["shortNames"] == ["wd"], json.dumps(body)[:600])


def check_objects(t, server):
    status, body = server.request("POST", WIDGETS, body=widget("w1", color="Red", port="http",
                                                               items=[{"name": "a", "value": "b"}]))
    t.check("create a widget; the schema's default is applied",
            status == 201 and body["spec"].get("replicas") == 1, body)
    status, body = server.request("POST", WIDGETS + "?fieldValidation=Strict",
                                  body=widget("w2", color="blue", colr="x"))
    t.check("Strict: a typo is refused with kube's message", status == 400 and
            'strict decoding error: unknown field "spec.colr"' in body.get("message", ""), body)
    status, body = server.request("POST", WIDGETS, body=widget("w2", color="purple", replicas=-1,
                                                               items=[{"name": "a"}, {"name": "a"}]))
    fields = sorted(c["field"] for c in body.get("details", {}).get("causes", []))
    t.check("every schema violation is a cause of one 422", status == 422 and
            fields == ["spec.color", "spec.items[1]", "spec.replicas"], f"{status} {fields} {body}")
    status, body = server.request("POST", WIDGETS, body=widget("w3", replicas=2))
    t.check("a missing required field is 422", status == 422 and
            body["details"]["causes"][0]["field"] == "spec.color", body)
    status, body = server.request("POST", WIDGETS, body=widget("w2", color="green", port=8080))
    t.check("int-or-string takes a number", status == 201, body)

    status, body = server.request("GET", WIDGETS + "?fieldSelector=spec.color%3Dgreen")
    t.check("selectableFields work in field selectors", status == 200 and
            [i["metadata"]["name"] for i in body["items"]] == ["w2"], body)
    status, body = server.request("GET", WIDGETS + "?fieldSelector=spec.size%3D1")
    t.check("an unselectable field is 400", status == 400, body)

    status, body = server.request("PATCH", f"{WIDGETS}/w1", body=json.dumps({"spec": {"replicas": 4}}),
                                  headers={"Content-Type": "application/merge-patch+json"})
    t.check("merge patch; generation bumps on a spec change", status == 200 and
            body["spec"]["replicas"] == 4 and body["metadata"]["generation"] == 2, body)
    status, body = server.request("PATCH", f"{WIDGETS}/w1",
                                  body=json.dumps([{"op": "replace", "path": "/spec/port", "value": 8443}]),
                                  headers={"Content-Type": "application/json-patch+json"})
    t.check("JSON patch works on custom resources", status == 200 and body["spec"]["port"] == 8443, body)
    status, body = server.request("PATCH", f"{WIDGETS}/w1",
                                  body=json.dumps([{"op": "replace", "path": "/spec/replicas", "value": -1}]),
                                  headers={"Content-Type": "application/json-patch+json"})
    t.check("a patch whose result breaks the schema is 422", status == 422, body)
    status, body = server.request("GET", "/apis/example.com/v1alpha1/namespaces/default/widgets")
    t.check("a version that is not served is 404", status == 404, status)
    status, body = server.request("PATCH", f"{WIDGETS}/w1", body=json.dumps({"spec": {"replicas": 5}}),
                                  headers={"Content-Type": "application/strategic-merge-patch+json"})
    t.check("strategic merge patch is 415 for custom resources", status == 415, body)

    status, current = server.request("GET", f"{WIDGETS}/w1")
    current["status"] = {"replicas": 4, "selector": "app=w1"}
    generation = current["metadata"]["generation"]
    status, body = server.request("PUT", f"{WIDGETS}/w1/status", body=current)
    t.check("the status subresource writes status without bumping generation", status == 200 and
            body["status"]["replicas"] == 4 and body["metadata"]["generation"] == generation, body)
    status, body = server.request("GET", f"{WIDGETS}/w1/scale")
    t.check("the scale subresource reads spec and status", status == 200 and body["kind"] == "Scale"
            and body["spec"]["replicas"] == 4 and body["status"] == {"replicas": 4, "selector": "app=w1"}, body)
    status, body = server.request("PATCH", f"{WIDGETS}/w1/scale",
                                  body=json.dumps({"spec": {"replicas": 7}}),
                                  headers={"Content-Type": "application/merge-patch+json"})
    status, obj = server.request("GET", f"{WIDGETS}/w1")
    t.check("patching the scale sets spec.replicas", status == 200 and obj["spec"]["replicas"] == 7, obj)

    status, body = server.request("GET", "/apis/example.com/v1beta1/namespaces/default/widgets/w1")
    t.check("another served version reads the same object with its apiVersion", status == 200 and
            body.get("apiVersion") == "example.com/v1beta1" and body["spec"]["replicas"] == 7, body)
    status, text = server.request("GET", "/apis/example.com/v1beta1/namespaces/default/widgets"
                                  "?watch=1&timeoutSeconds=1", raw=True)
    events = [json.loads(line) for line in text.decode().splitlines() if line.strip()]
    t.check("a watch of another served version streams its apiVersion", status == 200 and events and
            all(e["object"]["apiVersion"] == "example.com/v1beta1" for e in events), text[:400])
    status, body = server.request("GET", f"{WIDGETS}/w1", headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    cols = [c["name"] for c in body.get("columnDefinitions", [])]
    t.check("tables use the printer columns", cols == ["Name", "Color", "Replicas", "Age"] and
            body["rows"][0]["cells"][1:3] == ["Red", 7], body)


def check_forged_status(t, server):
    """A definition created with a status of its own: kube drops it (the controllers write
    acceptedNames and conditions; storedVersions starts as the storage version), so a forged
    stored version can neither block later updates nor a forged condition hide the resource."""
    obj = crd(name="gadgets.example.org", plural="gadgets", kind="Gadget")
    obj["status"] = {"acceptedNames": {"plural": "gizmos", "kind": "Gizmo"},
                     "storedVersions": ["v0", "v1"],
                     "conditions": [{"type": "Established", "status": "False", "reason": "Forged",
                                     "message": "forged", "lastTransitionTime": "2020-01-01T00:00:00Z"}]}
    status, body = server.request("POST", CRDS, body=obj)
    t.check("a definition posted with a status is created", status == 201, body)
    t.check("... its status is not the request's: storedVersions is the storage version",
            status == 201 and body.get("status", {}).get("storedVersions") == ["v1"]
            and "conditions" not in body.get("status", {}), body.get("status") if status == 201 else body)
    name = "gadgets.example.org"
    wait_for(lambda: conditions(server, name).get("Established") == "True", timeout=5,
             what="Established")
    _, body = server.request("GET", f"{CRDS}/{name}")
    t.check("... the controller's names and conditions, not the forged ones",
            body["status"]["acceptedNames"].get("plural") == "gadgets"
            and all(c.get("reason") != "Forged" for c in body["status"].get("conditions", [])),
            body["status"])
    body["spec"]["versions"][0]["additionalPrinterColumns"] = [
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]
    status, body = server.request("PUT", f"{CRDS}/{name}", body=body)
    t.check("... and it can be updated (no forged stored version holds it)", status == 200, body)
    server.request("DELETE", f"{CRDS}/{name}")


def check_bad_definitions(t, server):
    def refused(name, obj, field):
        status, body = server.request("POST", CRDS, body=obj)
        causes = body.get("details", {}).get("causes", []) if isinstance(body, dict) else []
        ok = status == 422 and any(c.get("field", "").startswith(field) for c in causes)
        t.check(f"bad definition: {name} -> 422 at {field}", ok, f"{status} {json.dumps(body)[:600]}")
        status, _ = server.request("GET", f"{CRDS}/{obj['metadata']['name']}")
        t.check(f"bad definition: {name}: nothing registered", status == 404, status)

    refused("non-structural schema", crd(schema={"type": "object", "properties": {"spec": {}}}),
            "spec.validation.openAPIV3Schema")
    refused("bad regex", crd(schema={"type": "object", "properties": {
        "spec": {"type": "object", "properties": {"a": {"type": "string", "pattern": "(unclosed"}}}}}),
        "spec.validation.openAPIV3Schema")
    refused("name not <plural>.<group>", crd(name="wrong.example.org"), "metadata.name")
    two = [{"name": v, "served": True, "storage": True,
            "schema": {"openAPIV3Schema": {"type": "object"}}} for v in ("v1", "v2")]
    refused("two storage versions", crd(versions=two), "spec.versions")
    refused("a clash with built-in deployments", crd(name="deployments.apps", group="apps",
                                                     plural="deployments", kind="Deployment"), "spec.group")
    refused("a clash with built-in leases", crd(name="leases.coordination.k8s.io", group="coordination.k8s.io",
                                                plural="leases", kind="Lease"), "metadata.annotations")
    status, body = server.request("POST", CRDS, body=crd(name="pods.example.com", group="example.com",
                                                         plural="pods", kind="Widget"))
    wait_for(lambda: conditions(server, "pods.example.com").get("NamesAccepted") == "False", timeout=5,
             what="NamesAccepted=False")
    conds = conditions(server, "pods.example.com")
    t.check("a kind clash is NamesAccepted=False and never Established",
            conds.get("NamesAccepted") == "False" and conds.get("Established") != "True", conds)
    status, body = server.request("GET", "/apis/example.com/v1/namespaces/default/pods")
    t.check("the clashing definition serves nothing", status == 404, status)
    server.request("DELETE", f"{CRDS}/pods.example.com")


def check_python_client(t, server):
    script = f"""
import json
from kubernetes import client, watch
cfg = client.Configuration()
cfg.host = "http://127.0.0.1:{server.port}"
api = client.CustomObjectsApi(client.ApiClient(cfg))
api.create_namespaced_custom_object("example.com", "v1", "default", "widgets",
    {{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {{"name": "py"}}, "spec": {{"color": "blue"}}}})
items = api.list_namespaced_custom_object("example.com", "v1", "default", "widgets")["items"]
print("listed", sorted(i["metadata"]["name"] for i in items))
api.patch_namespaced_custom_object("example.com", "v1", "default", "widgets", "py", {{"spec": {{"replicas": 3}}}})
print("patched", api.get_namespaced_custom_object("example.com", "v1", "default", "widgets", "py")["spec"]["replicas"])
try:
    for e in watch.Watch().stream(api.list_namespaced_custom_object, "example.com", "v1", "default", "widgets",
                                  resource_version="1", timeout_seconds=5):
        print("event", e["type"])
        break
except client.exceptions.ApiException as e:
    print("gone", e.status)
rv = api.list_namespaced_custom_object("example.com", "v1", "default", "widgets")["metadata"]["resourceVersion"]
w = watch.Watch()
import threading
def later():
    api.delete_namespaced_custom_object("example.com", "v1", "default", "widgets", "py")
threading.Timer(0.2, later).start()
for e in w.stream(api.list_namespaced_custom_object, "example.com", "v1", "default", "widgets",
                  resource_version=rv, timeout_seconds=10):
    print("watched", e["type"], e["object"]["metadata"]["name"])
    w.stop()
"""
    p = subprocess.run(["/usr/bin/python3", "-c", script], capture_output=True, text=True, timeout=60)
    if "No module named 'kubernetes'" in p.stderr:
        print("python3-kubernetes is not installed: skipping its checks")
        return
    t.check("CustomObjectsApi create and list", "'py'" in p.stdout and "listed" in p.stdout, p.stdout + p.stderr[-600:])
    t.check("CustomObjectsApi patch", "patched 3" in p.stdout, p.stdout + p.stderr[-600:])
    t.check("a watch from a too old resourceVersion is 410 Gone", "gone 410" in p.stdout, p.stdout + p.stderr[-600:])
    t.check("CustomObjectsApi watch sees the delete", "watched DELETED py" in p.stdout, p.stdout + p.stderr[-600:])


def check_kubectl(t, server, tmp):
    run = kubectl_runner(server, tmp)
    if run is None:
        print("kubectl is not installed: skipping its checks")
        return
    code, out = run("get", "widgets")
    t.check("kubectl get shows the printer columns", code == 0 and "COLOR" in out and "REPLICAS" in out, out)
    code, out = run("get", "wd", "w1", "-o", "jsonpath={.spec.color}")
    t.check("kubectl knows the short name", code == 0 and out == "Red", out)
    code, out = run("scale", "widget", "w1", "--replicas=2")
    code2, out2 = run("get", "widget", "w1", "-o", "jsonpath={.spec.replicas}")
    t.check("kubectl scale", code == 0 and out2 == "2", out + out2)
    code, out = run("patch", "widget", "w2", "--type=merge", "-p", '{"spec":{"color":"red"}}')
    t.check("kubectl patch --type=merge", code == 0, out)
    code, out = run("describe", "widget", "w1")
    t.check("kubectl describe", code == 0 and "Color:" in out, out[-400:])
    code, out = run("explain", "widget.spec")
    t.check("kubectl explain widget.spec", code == 0 and "color" in out, out[-600:])
    code, out = run("explain", "widget.metadata")
    t.check("kubectl explain widget.metadata shows ObjectMeta", code == 0 and "labels" in out, out[-600:])
    typo = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: typo}\nspec: {color: red, colour: x}\n"
    code, out = run("apply", "-f", "-", stdin=typo)
    t.check("kubectl apply refuses a typo", code != 0 and 'unknown field "spec.colour"' in out, out)
    code, out = run("apply", "--validate=false", "-f", "-", stdin=typo)
    code2, out2 = run("get", "widget", "typo", "-o", "jsonpath={.spec}")
    t.check("kubectl apply --validate=false stores it pruned", code == 0 and "colour" not in out2, out + out2)
    code, out = run("get", "all")
    t.check("the category all includes widgets", code == 0 and "widget.example.com/w1" in out, out[-600:])

    # A `kind: List` file is validated against /openapi/v2: a kind that keeps unknown fields is
    # only an object there, and a kind with a schema still has its fields checked.
    open_crd = """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: foos.company.com}
spec:
  group: company.com
  scope: Namespaced
  names: {plural: foos, singular: foo, kind: Foo}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
        properties:
          spec: {type: object, properties: {size: {type: integer}}}
"""
    code, out = run("apply", "-f", "-", stdin=open_crd)
    t.check("a definition that keeps unknown fields is applied", code == 0, out)
    wait_for(lambda: server.request("GET", "/apis/company.com/v1/namespaces/default/foos")[0] == 200,
             what="the foos to be served")
    listed = ("apiVersion: v1\nkind: List\nitems:\n- apiVersion: company.com/v1\n  kind: Foo\n"
              "  metadata: {name: one}\n  someField: 1\n  spec: {size: 2}\n")
    code, out = run("apply", "-f", "-", stdin=listed)
    t.check("kubectl apply of a List keeps a kind's unknown fields", code == 0, out)
    code, out = run("get", "foo", "one", "-o", "jsonpath={.someField}")
    t.check("the unknown field is stored", code == 0 and out == "1", out)
    typo_list = ("apiVersion: v1\nkind: List\nitems:\n- apiVersion: example.com/v1\n  kind: Widget\n"
                 "  metadata: {name: typo2}\n  spec: {color: red, colour: x}\n")
    code, out = run("apply", "-f", "-", stdin=typo_list)
    t.check("kubectl apply of a List still refuses a typo", code != 0 and "colour" in out, out)

    # kubectl get -w prints the change made meanwhile.
    kubectl = shutil.which("kubectl")
    env = dict(os.environ, KUBECONFIG=server.kubeconfig(tmp), HOME=tmp)
    proc = subprocess.Popen([kubectl, "get", "widgets", "-w", "--request-timeout=20s"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)
    reader.start()
    try:
        wait_for(lambda: any(line.startswith("w1") for line in lines), timeout=10, what="the initial rows")
        run("patch", "widget", "w2", "--type=merge", "-p", '{"spec":{"color":"green"}}')
        wait_for(lambda: any("green" in line for line in lines), timeout=10, what="the watched change")
        t.check("kubectl get -w shows the change", True)
    except AssertionError as e:
        t.check("kubectl get -w shows the change", False, f"{e} {lines}")
    finally:
        proc.kill()
        proc.wait()
    code, out = run("delete", "widget", "typo")
    t.check("kubectl delete", code == 0, out)


def check_restart(t, server):
    wait_for(lambda: established(server, "widgets.example.com"), timeout=10, what="served after restart")
    status, body = server.request("GET", f"{WIDGETS}/w1")
    t.check("the definition and its objects survive a restart", status == 200 and
            body["spec"]["replicas"] == 2, f"{status} {body}")


def check_second_replica(t, server, binary):
    other = Server(binary, etcd=server.etcd).start()
    try:
        wait_for(lambda: other.request("GET", f"{WIDGETS}/w1")[0] == 200, timeout=10,
                 what="the second replica to serve widgets")
        t.check("a second replica on the same etcd serves the definition", True)
        status, body = other.request("POST", CRDS, body=crd())
        wait_for(lambda: server.request("GET", "/apis/example.org/v1/namespaces/default/things")[0] == 200,
                 timeout=10, what="the first replica to serve a definition made through the second")
        t.check("a definition created through one replica is served by the other", True)
        other.request("DELETE", f"{CRDS}/things.example.org")
        wait_for(lambda: server.request("GET", "/apis/example.org/v1/namespaces/default/things")[0] == 404,
                 timeout=10, what="the first replica to stop serving a definition deleted through the second")
        t.check("a definition deleted through one replica stops being served by the other", True)
    finally:
        other.stop()


def check_delete(t, server):
    held = widget("held", color="red")
    held["metadata"]["finalizers"] = ["example.com/hold"]
    status, body = server.request("POST", WIDGETS, body=held)
    t.check("an object with a finalizer is created", status == 201, body)
    status, body = server.request("DELETE", f"{CRDS}/widgets.example.com")
    t.check("deleting the definition is accepted", status == 200, body)
    wait_for(lambda: conditions(server, "widgets.example.com").get("Terminating") == "True", timeout=5,
             what="the Terminating condition")
    wait_for(lambda: "deletionTimestamp" in server.request("GET", f"{WIDGETS}/held")[1].get("metadata", {}),
             timeout=5, what="the held object to be marked for deletion")
    # The controller deletes and marks in no fixed order: w1 may go just after held is marked.
    wait_for(lambda: server.request("GET", f"{WIDGETS}/w1")[0] == 404, timeout=5,
             what="objects without finalizers to be deleted")
    t.check("objects without finalizers are gone while the definition waits", True)
    status, body = server.request("POST", WIDGETS, body=widget("late", color="red"))
    t.check("no new objects while the definition is terminating", status == 405 and
            body.get("reason") == "MethodNotAllowed", f"{status} {body}")
    status, body = server.request("GET", f"{CRDS}/widgets.example.com")
    t.check("the definition waits for the object's finalizer", status == 200, status)
    status, body = server.request("PATCH", f"{WIDGETS}/held", body=json.dumps({"metadata": {"finalizers": None}}),
                                  headers={"Content-Type": "application/merge-patch+json"})
    t.check("removing the last finalizer deletes the object", status == 200 and
            server.request("GET", f"{WIDGETS}/held")[0] == 404, f"{status} {body}")
    wait_for(lambda: server.request("GET", f"{CRDS}/widgets.example.com")[0] == 404, timeout=10,
             what="the definition to go")
    wait_for(lambda: server.request("GET", WIDGETS)[0] == 404, timeout=5, what="the endpoints to go")
    t.check("the definition and its endpoints are gone", True)
    status, body = server.request("POST", CRDS, body=__import__("json").loads(json.dumps(widget_crd_again())))
    wait_for(lambda: established(server, "widgets.example.com"), timeout=5, what="re-established")
    status, body = server.request("GET", WIDGETS)
    t.check("its objects went with it", status == 200 and body["items"] == [], body)
    # Without a status subresource every change outside metadata counts as a new generation.
    status, body = server.request("POST", WIDGETS, body=widget("g", size=1))
    body["status"] = {"ready": True}
    status, body = server.request("PUT", f"{WIDGETS}/g", body=body)
    t.check("no status subresource: a status change bumps the generation", status == 200 and
            body["metadata"]["generation"] == 2 and body["status"] == {"ready": True}, body)
    body["metadata"]["labels"] = {"a": "b"}
    status, body = server.request("PUT", f"{WIDGETS}/g", body=body)
    t.check("a metadata change does not", status == 200 and body["metadata"]["generation"] == 2, body)


GADGET_CRD = "gadgets.example.net"
GADGETS = "/apis/example.net/v1/namespaces/default/gadgets"


def gadget_count(server):
    """How many gadgets storage holds (a paged list reads storage), or None when not served."""
    status, body = server.request("GET", f"{GADGETS}?limit=1")
    if status != 200:
        return None
    return len(body["items"]) + body["metadata"].get("remainingItemCount", 0)


def passes(condition, timeout, what):
    try:
        wait_for(condition, timeout=timeout, what=what)
        return True
    except AssertionError:
        return False


def check_delete_killed(t, binary, tmp, graceful=False):
    """kill -9 while a definition's objects are being deleted: after the restart the objects left
    are deleted from the definition's stored spec, and only then does the definition go. Objects
    with a finalizer make the kill land mid-deletion whatever the timing: the definition cannot go
    before the test releases them, so the count seen dropping is never zero at the kill.
    graceful: the same with a SIGTERM, which waits for no controller."""
    label = "stopped deletion" if graceful else "killed deletion"
    many, held = (200 if graceful else 1000), 5
    server = Server(binary, data_dir=tmp + ("/stopped" if graceful else "/killed")).start()
    try:
        definition = crd(name=GADGET_CRD, group="example.net", plural="gadgets", kind="Gadget",
                         schema={"type": "object", "x-kubernetes-preserve-unknown-fields": True})
        status, body = server.request("POST", CRDS, body=definition)
        t.check(f"{label}: the definition is created", status == 201, body)
        wait_for(lambda: conditions(server, GADGET_CRD).get("Established") == "True" and
                 server.request("GET", GADGETS)[0] == 200, timeout=10, what="gadgets served")
        session = server.session()
        failed = []
        for i in range(held):
            obj = {"apiVersion": "example.net/v1", "kind": "Gadget",
                   "metadata": {"name": f"held-{i}", "finalizers": ["example.net/hold"]}}
            status, _ = session.request("POST", GADGETS, body=obj)
            if status != 201:
                failed.append(status)
        for i in range(many):
            obj = {"apiVersion": "example.net/v1", "kind": "Gadget", "metadata": {"name": f"g-{i:04}"},
                   "spec": {"n": i}}
            status, _ = session.request("POST", GADGETS, body=obj)
            if status != 201:
                failed.append(status)
        session.close()
        t.check(f"{label}: {many + held} gadgets are created", not failed, failed[:5])
        status, body = server.request("DELETE", f"{CRDS}/{GADGET_CRD}")
        t.check(f"{label}: deleting the definition is accepted", status == 200, body)
        wait_for(lambda: (gadget_count(server) or many + held) < many + held, timeout=20,
                 what="the gadgets' count to start dropping")
        left = gadget_count(server)
        if graceful:
            server.stop()
        else:
            server.proc.send_signal(9)
            server.proc.wait(timeout=10)
            server.log.close()
            server.proc = None
        print(f"{label}: stopped with {left} of {many + held} gadgets left")
        server.start()
        served = passes(lambda: gadget_count(server) == held, 30,
                        "the gadgets left at the kill to be deleted after the restart")
        t.check(f"{label}: after the restart the definition's objects are deleted and the held "
                "ones stay, served", served, f"count {gadget_count(server)}, definition "
                f"{server.request('GET', f'{CRDS}/{GADGET_CRD}')[0]}")
        status, body = server.request("GET", f"{CRDS}/{GADGET_CRD}")
        t.check(f"{label}: the definition waits for the held objects",
                status == 200 and "deletionTimestamp" in body.get("metadata", {}), status)
        status, body = server.request("POST", GADGETS, body={"apiVersion": "example.net/v1", "kind": "Gadget",
                                                             "metadata": {"name": "late"}})
        t.check(f"{label}: no new objects after the restart", status == 405, f"{status} {body}")
        if storage_backend() == "etcd3":
            other = Server(binary, etcd=server.etcd).start()
            try:
                ok = passes(lambda: other.request("GET", f"{GADGETS}/held-0")[0] == 200, 10,
                            "a replica started meanwhile to serve the held object")
                t.check(f"{label}: a replica started while the definition terminates serves its "
                        "objects too, and the definition stays", ok and
                        other.request("GET", f"{CRDS}/{GADGET_CRD}")[0] == 200)
                status, _ = other.request("POST", GADGETS, body={"apiVersion": "example.net/v1",
                                                                 "kind": "Gadget", "metadata": {"name": "late"}})
                t.check(f"{label}: that replica refuses creates", status == 405, status)
            finally:
                other.stop()
        for i in range(held):
            server.request("PATCH", f"{GADGETS}/held-{i}", body=json.dumps({"metadata": {"finalizers": None}}),
                           headers={"Content-Type": "application/merge-patch+json"})
        gone = passes(lambda: server.request("GET", f"{CRDS}/{GADGET_CRD}")[0] == 404, 15,
                      "the definition to go once its objects are gone")
        t.check(f"{label}: the definition goes once its last object is gone", gone)
        status, body = server.request("POST", CRDS, body=definition)
        again = passes(lambda: server.request("GET", GADGETS)[0] == 200, 10, "gadgets served again")
        t.check(f"{label}: a definition of the same name serves none of the old objects",
                again and gadget_count(server) == 0, f"{status} count {gadget_count(server)}")
        if storage_backend() == "etcd3":
            p = server.etcd.etcdctl("get", "/registry/example.net/gadgets/", "--prefix", "--keys-only")
            t.check(f"{label}: etcd holds none of them", not p.stdout.strip(), p.stdout[:200])
    finally:
        server.stop()


def patterned_crd(marker):
    """200 properties with a pattern RE2 needs 119,302 instructions for, and an enum that each
    spec update changes."""
    props = {f"p{i}": {"type": "string", "pattern": "^\\pL{100}$"} for i in range(200)}
    props["marker"] = {"type": "string", "enum": [marker]}
    schema = {"type": "object", "properties": {"spec": {"type": "object", "properties": props}}}
    return crd(name="patterned.example.net", group="example.net", plural="patterned", kind="Patterned",
               schema=schema)


def check_expensive_patterns(t, binary):
    """A definition repeating an expensive pattern is compiled once per distinct pattern, and spec
    updates do not keep a compiled copy each (was 30 s to create, 90 s more to serve, +330 MiB
    after 30 updates)."""
    path = "/apis/example.net/v1/namespaces/default/patterned"
    server = Server(binary).start()
    try:
        def accepted(marker):
            obj = {"apiVersion": "example.net/v1", "kind": "Patterned", "metadata": {"name": marker},
                   "spec": {"marker": marker, "p0": "\u00e9" * 100}}
            return server.request("POST", path, body=obj)[0] == 201

        try:
            status, body = server.request("POST", CRDS, body=patterned_crd("m0"))
        except OSError as e:  # the client's 10 s timeout: creating it once took 30 s
            status, body = 0, repr(e)
        t.check("expensive patterns: the definition is created within 10 s", status == 201,
                str(body)[:300])
        if status != 201:
            return
        t.check("expensive patterns: it is served within 20 s",
                passes(lambda: accepted("m0"), 20, "the patterned definition to be served"))
        rss_before = rss_kib(server.proc.pid)
        updated = True
        def put_spec(marker):
            # The controller's status writes race with ours: read again on a conflict.
            for _ in range(20):
                current = server.request("GET", f"{CRDS}/patterned.example.net")[1]
                current["spec"] = patterned_crd(marker)["spec"]
                status, _ = server.request("PUT", f"{CRDS}/patterned.example.net", body=current)
                if status != 409:
                    return status
            return status

        for u in range(1, 31):
            status = put_spec(f"m{u}")
            if status != 200 or not passes(lambda: accepted(f"m{u}"), 20, f"update {u} to be served"):
                updated = False
                break
        grown = (rss_kib(server.proc.pid) - rss_before) // 1024
        print(f"VmRSS grew {grown} MiB over 30 spec updates")
        t.check("expensive patterns: 30 spec updates are each served within 20 s", updated)
        # Generous: a compiled copy per update was 11 MiB each.
        t.check("expensive patterns: 30 spec updates grow VmRSS by less than 64 MiB", grown < 64,
                f"{grown} MiB")
        # Five distinct ones are past the definition's budget: 422 at the first pattern past it.
        costly = crd(name="costly.example.net", group="example.net", plural="costly", kind="Costly",
                     schema={"type": "object", "properties": {"spec": {"type": "object", "properties": {
                         f"p{i}": {"type": "string", "pattern": "^\\pL{%d}$" % (100 - i)}
                         for i in range(5)}}}})
        status, body = server.request("POST", CRDS, body=costly)
        fields = [c.get("field") for c in body.get("details", {}).get("causes", [])] \
            if isinstance(body, dict) else []
        t.check("expensive patterns: a definition past the pattern budget is a 422 naming the pattern",
                status == 422 and body.get("reason") == "Invalid" and fields ==
                ["spec.validation.openAPIV3Schema.properties[spec].properties[p4].pattern"],
                f"{status} {str(body)[:400]}")
    finally:
        server.stop()


def widget_crd_again():
    return crd(name="widgets.example.com", group="example.com", plural="widgets", kind="Widget",
               schema={"type": "object", "x-kubernetes-preserve-unknown-fields": True})


if __name__ == "__main__":
    main()
