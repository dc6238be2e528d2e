"""resource.k8s.io/v1 (dynamic resource allocation) as clients meet it: DeviceClasses,
ResourceClaims, ResourceClaimTemplates and ResourceSlices created, listed (kubectl's columns),
applied and deleted with kubectl and the Python dynamic client; v1's defaults, the generation
counting spec changes, a claim created with an empty status that only /status writes (the
allocation once), slices selected by node and driver, and kube's 422 refusals word for word.

Usage: dynamic_resources_test.py <path to kwatch-apiserver>
"""
import json

from harness import kubectl_runner, python_api_client, run_suite

GROUP = "/apis/resource.k8s.io/v1"

CLASS = {
    "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
    "metadata": {"name": "gpu.example.com"},
    "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]},
}

CLAIM = {
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
    "metadata": {"name": "one-gpu", "namespace": "default"},
    "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": "gpu.example.com",
        "selectors": [{"cel": {"expression":
                               "device.attributes['gpu.example.com'].model == 'a100'"}}]}}]}},
}

TEMPLATE = {
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
    "metadata": {"name": "gpu-template", "namespace": "default"},
    "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "firstAvailable": [
        {"name": "big", "deviceClassName": "gpu.example.com", "allocationMode": "All"},
        {"name": "small", "deviceClassName": "gpu.example.com"}]}]}}},
}


def slice_of(name, node, driver="gpu.example.com"):
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {"driver": driver, "nodeName": node,
                 "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "gpu-0", "attributes": {"model": {"string": "a100"}},
                              "capacity": {"memory": {"value": "40Gi"}}}]},
    }


ALLOCATION = {"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com",
                                       "pool": "node-1", "device": "gpu-0"}]}}


def checks(t, server, tmp):
    kc = kubectl_runner(server, tmp)
    if kc is not None:
        with_kubectl(t, server, kc)
    status_subresource(t, server)
    slices(t, server)
    python_client(t, server, tmp)
    refusals(t, server)


def rows(kc, *args):
    code, out = kc("get", *args)
    return [line.split() for line in out.splitlines()] if code == 0 else [["failed:", out]]


def with_kubectl(t, server, kc):
    for obj in (CLASS, CLAIM, TEMPLATE, slice_of("node-1-gpu", "node-1")):
        code, out = kc("create", "-f", "-", stdin=json.dumps(obj))
        t.check(f"kubectl creates a {obj['kind']}", code == 0, out)

    code, out = kc("get", "resourceclaim", "one-gpu", "-o", "json")
    claim = json.loads(out) if code == 0 else {}
    t.check("v1's defaults fill the request (ExactCount, count 1)",
            claim.get("spec", {}).get("devices", {}).get("requests", [{}])[0].get("exactly", {})
            .get("allocationMode") == "ExactCount" and
            claim["spec"]["devices"]["requests"][0]["exactly"]["count"] == 1, out[:600])
    t.check("a claim starts with an empty status and no generation",
            claim.get("status") == {} and "generation" not in claim.get("metadata", {}), out[:600])
    code, out = kc("get", "resourceclaimtemplate", "gpu-template", "-o", "json")
    subs = json.loads(out)["spec"]["spec"]["devices"]["requests"][0]["firstAvailable"] \
        if code == 0 else []
    t.check("a template's subrequests are defaulted too (All keeps no count)",
            [(s.get("allocationMode"), s.get("count")) for s in subs] ==
            [("All", None), ("ExactCount", 1)], out[:600])

    t.check("kubectl get resourceclaims shows NAME STATE AGE",
            rows(kc, "resourceclaims")[0] == ["NAME", "STATE", "AGE"] and
            rows(kc, "resourceclaims")[1][:2] == ["one-gpu", "pending"], rows(kc, "resourceclaims"))
    t.check("kubectl get resourceclaimtemplates shows NAME AGE",
            [r[:1] for r in rows(kc, "resourceclaimtemplates")] == [["NAME"], ["gpu-template"]] and
            rows(kc, "resourceclaimtemplates")[0] == ["NAME", "AGE"],
            rows(kc, "resourceclaimtemplates"))
    t.check("kubectl get deviceclasses shows NAME AGE",
            rows(kc, "deviceclasses")[0] == ["NAME", "AGE"] and
            rows(kc, "deviceclasses")[1][0] == "gpu.example.com", rows(kc, "deviceclasses"))
    t.check("kubectl get resourceslices shows NAME NODE DRIVER POOL AGE",
            rows(kc, "resourceslices")[0] == ["NAME", "NODE", "DRIVER", "POOL", "AGE"] and
            rows(kc, "resourceslices")[1][:4] ==
            ["node-1-gpu", "node-1", "gpu.example.com", "node-1"], rows(kc, "resourceslices"))

    # kubectl apply: metadata may change, the spec of a claim may not.
    labelled = json.loads(json.dumps(CLAIM))
    labelled["metadata"]["labels"] = {"team": "ml"}
    code, out = kc("apply", "-f", "-", stdin=json.dumps(labelled))
    t.check("kubectl apply labels a claim", code == 0, out)
    changed = json.loads(json.dumps(labelled))
    changed["spec"]["devices"]["requests"][0]["exactly"]["count"] = 2
    code, out = kc("apply", "-f", "-", stdin=json.dumps(changed))
    t.check("kubectl apply of another spec is refused: the spec is immutable",
            code != 0 and "spec: Invalid value: " in out and "field is immutable" in out, out)

    # A class counts generations of its spec; apply changes it.
    cls = json.loads(json.dumps(CLASS))
    cls["spec"]["selectors"].append({"cel": {"expression": "device.attributes['gpu.example.com']"
                                                           ".model == 'a100'"}})
    code, out = kc("apply", "-f", "-", stdin=json.dumps(cls))
    t.check("kubectl apply changes a class", code == 0, out)
    status, body = server.request("GET", f"{GROUP}/deviceclasses/gpu.example.com")
    t.check("the class's generation counted the change",
            status == 200 and body["metadata"].get("generation") == 2 and
            len(body["spec"]["selectors"]) == 2, body)

    code, out = kc("create", "-f", "-",
                   stdin=json.dumps(slice_of("capital", "node-4", driver="GPU.example.com")))
    t.check("a driver name with capitals is stored with kube's warning",
            code == 0 and 'Warning: spec.driver: driver names should be lowercase; '
            '"GPU.example.com" contains uppercase characters' in out, out)
    kc("delete", "resourceslice", "capital")

    code, out = kc("explain", "resourceclaims.spec.devices.requests.exactly")
    t.check("kubectl explain reads the claim's schema",
            code == 0 and "deviceClassName" in out and "allocationMode" in out, out[:600])

    code, out = kc("delete", "resourceclaimtemplate", "gpu-template")
    t.check("kubectl deletes a template", code == 0, out)


def status_subresource(t, server):
    path = f"{GROUP}/namespaces/default/resourceclaims/one-gpu"
    status, claim = server.request("GET", path)
    if status == 404:
        status, claim = server.request("POST", f"{GROUP}/namespaces/default/resourceclaims",
                                       body=CLAIM)
    t.check("the claim is there", status in (200, 201), claim)

    # The main resource does not write the status.
    claim["status"] = {"allocation": ALLOCATION}
    status, body = server.request("PUT", path, body=claim)
    t.check("an update of the claim leaves its status alone",
            status == 200 and body.get("status") == {}, (status, body))

    merge = {"Content-Type": "application/merge-patch+json"}
    status, body = server.request("PATCH", f"{path}/status", headers=merge,
                                  body={"status": {"allocation": ALLOCATION},
                                        "spec": {"devices": {"requests": []}}})
    t.check("/status writes the allocation and not the spec",
            status == 200 and body["status"]["allocation"] == ALLOCATION and
            len(body["spec"]["devices"]["requests"]) == 1, (status, body))
    reserved = [{"resource": "pods", "name": "trainer", "uid": "4f0b1a1e-0000-4000-8000-000000000001"}]
    status, body = server.request("PATCH", f"{path}/status", headers=merge,
                                  body={"status": {"reservedFor": reserved}})
    t.check("/status reserves the claim for a pod", status == 200, (status, body))

    status, table = server.request(
        "GET", path, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
    cells = table.get("rows", [{}])[0].get("cells", []) if status == 200 else []
    t.check("its STATE is allocated,reserved", cells[:2] == ["one-gpu", "allocated,reserved"],
            (status, table))

    other = {"devices": {"results": [dict(ALLOCATION["devices"]["results"][0], device="gpu-1")]}}
    status, body = server.request("PATCH", f"{path}/status", headers=merge,
                                  body={"status": {"allocation": other}})
    causes = body.get("details", {}).get("causes", []) if isinstance(body, dict) else []
    t.check("an allocation is written once: changing it is refused",
            status == 422 and [c["field"] for c in causes] == ["status.allocation"] and
            causes[0]["message"].endswith("field is immutable"), (status, body))

    status, body = server.request("PATCH", f"{path}/status", headers=merge,
                                  body={"status": {"allocation": None, "reservedFor": None}})
    t.check("/status deallocates the claim", status == 200 and body["status"] == {},
            (status, body))
    status, _ = server.request("DELETE", path)
    t.check("the claim is deleted", status == 200, status)


def slices(t, server):
    for name, node, driver in (("node-2-gpu", "node-2", "gpu.example.com"),
                               ("node-2-nic", "node-2", "nic.example.com")):
        status, body = server.request("POST", f"{GROUP}/resourceslices",
                                      body=slice_of(name, node, driver))
        t.check(f"slice {name} is created with generation 1",
                status == 201 and body["metadata"].get("generation") == 1, (status, body))

    def names(selector):
        status, body = server.request("GET", f"{GROUP}/resourceslices?fieldSelector={selector}")
        return sorted(i["metadata"]["name"] for i in body["items"]) if status == 200 else status

    t.check("slices are selected by spec.nodeName",
            names("spec.nodeName%3Dnode-2") == ["node-2-gpu", "node-2-nic"],
            names("spec.nodeName%3Dnode-2"))
    t.check("slices are selected by spec.driver",
            names("spec.driver%3Dnic.example.com") == ["node-2-nic"],
            names("spec.driver%3Dnic.example.com"))
    status, body = server.request("GET", f"{GROUP}/resourceslices?fieldSelector=spec.pool.name%3Dx")
    t.check("spec.pool.name is no field selector, as in kube 1.34", status == 400, (status, body))

    path = f"{GROUP}/resourceslices/node-2-gpu"
    merge = {"Content-Type": "application/merge-patch+json"}
    status, body = server.request("PATCH", path, headers=merge,
                                  body={"spec": {"pool": {"generation": 2}}})
    t.check("a new pool generation counts a generation of the slice",
            status == 200 and body["metadata"]["generation"] == 2, (status, body))
    status, body = server.request("PATCH", path, headers=merge,
                                  body={"spec": {"nodeName": "node-3"}})
    t.check("a slice's node is immutable",
            status == 422 and body.get("message") ==
            'ResourceSlice.resource.k8s.io "node-2-gpu" is invalid: spec.nodeName: Invalid '
            'value: "node-3": field is immutable', (status, body))
    for name in ("node-1-gpu", "node-2-gpu", "node-2-nic"):
        server.request("DELETE", f"{GROUP}/resourceslices/{name}")


def python_client(t, server, tmp):
    api_client = python_api_client(t, server, tmp)
    if api_client is None:
        return
    from kubernetes import dynamic
    try:
        # python-kubernetes 22.6 has no typed resource.k8s.io/v1 API: the dynamic client reads
        # discovery.
        dyn = dynamic.DynamicClient(api_client)
        claims = dyn.resources.get(api_version="resource.k8s.io/v1", kind="ResourceClaim")
        classes = dyn.resources.get(api_version="resource.k8s.io/v1", kind="DeviceClass")
        made = classes.create(body=dict(CLASS, metadata={"name": "py-class"}))
        t.check("the Python client creates a class, generation 1", made.metadata.generation == 1,
                made.metadata)
        claim = dict(CLAIM, metadata={"name": "py-claim", "namespace": "default"})
        claims.create(body=claim, namespace="default")
        got = claims.get(name="py-claim", namespace="default")
        t.check("the Python client reads the claim back, defaulted",
                got.spec.devices.requests[0].exactly.count == 1, got.spec)
        got_dict = got.to_dict()
        got_dict["metadata"]["labels"] = {"from": "python"}
        updated = claims.replace(body=got_dict, namespace="default")
        t.check("the Python client updates the claim's labels",
                updated.metadata.labels["from"] == "python", updated.metadata)
        got_dict = updated.to_dict()
        got_dict["status"] = {"allocation": ALLOCATION}
        allocated = claims.status.replace(body=got_dict, namespace="default")
        t.check("the Python client writes the claim's status",
                allocated.status.allocation.devices.results[0].device == "gpu-0", allocated.status)
        claims.delete(name="py-claim", namespace="default")
        classes.delete(name="py-class")
        names = [i.metadata.name for i in claims.get(namespace="default").items]
        t.check("the Python client deletes them", "py-claim" not in names, names)
    except Exception as e:  # noqa: BLE001 - any client failure is the check's failure
        t.check("the Python client works with resource.k8s.io/v1", False, repr(e)[:500])


def refusals(t, server):
    bad = json.loads(json.dumps(CLAIM))
    bad["metadata"]["name"] = "bad-claim"
    bad["spec"]["devices"]["requests"] = [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com",
                                    "selectors": [{"cel": {"expression": "device.driver"}}]}},
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", "allocationMode": "All",
                                    "count": 2}}]
    status, body = server.request("POST", f"{GROUP}/namespaces/default/resourceclaims", body=bad)
    t.check("a selector that is no bool, a count with All and a name twice, in kube's words",
            status == 422 and body.get("message") ==
            'ResourceClaim.resource.k8s.io "bad-claim" is invalid: ['
            "spec.devices.requests[0].exactly.selectors[0].cel.expression: Invalid value: "
            '"device.driver": must evaluate to bool or the unknown type, not string, '
            "spec.devices.requests[1].exactly.count: Invalid value: 2: must not be specified "
            "when allocationMode is 'All', spec.devices.requests[1]: Duplicate value: \"gpu\"]",
            (status, body))

    admin = json.loads(json.dumps(CLAIM))
    admin["metadata"]["name"] = "admin-claim"
    admin["spec"]["devices"]["requests"][0]["exactly"]["adminAccess"] = True
    status, body = server.request("POST", f"{GROUP}/namespaces/default/resourceclaims", body=admin)
    t.check("admin access needs the namespace's admin-access label",
            status == 422 and body.get("message") ==
            'ResourceClaim.resource.k8s.io "admin-claim" is invalid: '
            "spec.devices.requests[0].exactly.adminAccess: Forbidden: admin access to devices "
            "requires the `resource.kubernetes.io/admin-access: true` label on the containing "
            "namespace", (status, body))
    server.request("POST", "/api/v1/namespaces", body={
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "dra-admin", "labels": {"resource.kubernetes.io/admin-access": "true"}}})
    admin["metadata"]["namespace"] = "dra-admin"
    status, body = server.request("POST", f"{GROUP}/namespaces/dra-admin/resourceclaims", body=admin)
    t.check("in a namespace with the label it is created",
            status == 201 and body["spec"]["devices"]["requests"][0]["exactly"]["adminAccess"],
            (status, body))

    no_node = slice_of("no-node", "node-9")
    del no_node["spec"]["nodeName"]
    status, body = server.request("POST", f"{GROUP}/resourceslices", body=no_node)
    t.check("a slice must say where its devices are",
            status == 422 and body.get("message") ==
            'ResourceSlice.resource.k8s.io "no-node" is invalid: spec: Required value: exactly '
            "one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required",
            (status, body))

    cls = json.loads(json.dumps(CLASS))
    cls["metadata"]["name"] = "bad-class"
    cls["spec"]["selectors"] = [{"cel": {"expression": "device.nope"}}]
    status, body = server.request("POST", f"{GROUP}/deviceclasses", body=cls)
    causes = body.get("details", {}).get("causes", []) if isinstance(body, dict) else []
    t.check("a class's selector that does not compile is refused",
            status == 422 and [c["field"] for c in causes] ==
            ["spec.selectors[0].cel.expression"] and
            causes[0]["message"].startswith('Invalid value: "device.nope": compilation failed: '),
            (status, body))


if __name__ == "__main__":
    run_suite(checks)
