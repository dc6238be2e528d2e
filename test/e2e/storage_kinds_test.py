"""storage.k8s.io/v1 CSINodes, CSIStorageCapacities and VolumeAttributesClasses as clients meet
them: created, listed (kubectl's columns), applied, patched and deleted with kubectl and the
Python client, the short name vac, no generation counted, and kube's 422 refusals word for word.

Usage: storage_kinds_test.py <path to kwatch-apiserver>
"""
import json

from harness import kubectl_runner, python_api_client, run_suite

GROUP = "/apis/storage.k8s.io/v1"

NODE = {
    "apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
    "metadata": {"name": "worker-1"},
    "spec": {"drivers": [
        {"name": "ebs.csi.example.com", "nodeID": "i-0123456789",
         "topologyKeys": ["topology.ebs.csi.example.com/zone"], "allocatable": {"count": 25}},
    ]},
}

CAPACITY = {
    "apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity",
    "metadata": {"name": "fast-zone-a", "namespace": "default"},
    "storageClassName": "fast",
    "nodeTopology": {"matchLabels": {"topology.ebs.csi.example.com/zone": "a"}},
    "capacity": "100Gi", "maximumVolumeSize": "16Ti",
}

CLASS = {
    "apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttributesClass",
    "metadata": {"name": "gold"},
    "driverName": "ebs.csi.example.com",
    "parameters": {"iops": "5000", "throughput": "250"},
}


def copy(obj):
    return json.loads(json.dumps(obj))


def checks(t, server, tmp):
    kc = kubectl_runner(server, tmp)
    if kc is not None:
        with_kubectl(t, server, kc)
    python_client(t, server, tmp)
    refusals(t, server)


def table(kc, *args):
    code, out = kc("get", *args)
    return code, out, [line.split() for line in out.splitlines()] if code == 0 else []


def with_kubectl(t, server, kc):
    for obj in (NODE, CAPACITY, CLASS):
        code, out = kc("create", "-f", "-", stdin=json.dumps(obj))
        t.check(f"kubectl creates a {obj['kind']}", code == 0, out)

    code, out, rows = table(kc, "csinodes")
    t.check("kubectl get csinodes shows kube's columns (NAME DRIVERS AGE)",
            len(rows) == 2 and rows[0] == ["NAME", "DRIVERS", "AGE"] and
            rows[1][:2] == ["worker-1", "1"], out)
    # kube's storage of CSIStorageCapacity serves the default table (its printer goes unused).
    code, out, rows = table(kc, "csistoragecapacities", "-n", "default")
    t.check("kubectl get csistoragecapacities shows kube's default columns (NAME CREATED AT)",
            len(rows) == 2 and rows[0] == ["NAME", "CREATED", "AT"] and
            rows[1][0] == "fast-zone-a" and rows[1][1].endswith("Z"), out)
    code, out, rows = table(kc, "vac")
    t.check("kubectl get vac (the short name) shows kube's columns",
            len(rows) == 2 and rows[0] == ["NAME", "DRIVERNAME", "AGE"] and
            rows[1][:2] == ["gold", "ebs.csi.example.com"], out)

    status, node = server.request("GET", f"{GROUP}/csinodes/worker-1")
    t.check("a CSINode is stored as written, with no generation",
            status == 200 and node["spec"] == NODE["spec"] and
            "generation" not in node["metadata"] and "status" not in node, node)

    # kubectl apply: the drivers merge by name (the strategic merge key), a new driver is
    # welcome, an existing driver's fields are not.
    applied = copy(NODE)
    applied["metadata"]["labels"] = {"tier": "ssd"}
    applied["spec"]["drivers"].append({"name": "nfs.csi.example.com", "nodeID": "worker-1"})
    code, out = kc("apply", "-f", "-", stdin=json.dumps(applied))
    t.check("kubectl apply adds a driver and a label to a CSINode", code == 0, out)
    status, node = server.request("GET", f"{GROUP}/csinodes/worker-1")
    t.check("both drivers and the label are stored, still no generation",
            [d["name"] for d in node["spec"]["drivers"]] ==
            ["ebs.csi.example.com", "nfs.csi.example.com"] and
            node["metadata"]["labels"] == {"tier": "ssd"} and
            "generation" not in node["metadata"], node)
    code, out, rows = table(kc, "csinodes", "worker-1")
    t.check("DRIVERS counts both", len(rows) == 2 and rows[1][1] == "2", out)
    code, out = kc("patch", "csinode", "worker-1", "--type=strategic", "-p",
                   '{"spec": {"drivers": [{"name": "ebs.csi.example.com", '
                   '"allocatable": {"count": 30}}]}}')
    t.check("kubectl patch may not change an existing driver's allocatable count",
            code != 0 and '"worker-1" is invalid: spec.drivers: Invalid value: '
            '{"Name":"ebs.csi.example.com","NodeID":"i-0123456789","TopologyKeys":'
            '["topology.ebs.csi.example.com/zone"],"Allocatable":{"Count":30}}: field is '
            'immutable' in out, out)

    # A capacity's numbers move; its class and topology do not.
    code, out = kc("patch", "csistoragecapacity", "fast-zone-a", "-n", "default", "--type=merge",
                   "-p", '{"capacity": "80Gi"}')
    t.check("kubectl patches a capacity", code == 0, out)
    status, cap = server.request(
        "GET", f"{GROUP}/namespaces/default/csistoragecapacities/fast-zone-a")
    t.check("the new capacity is stored", status == 200 and cap["capacity"] == "80Gi", cap)
    code, out = kc("patch", "csistoragecapacity", "fast-zone-a", "-n", "default", "--type=merge",
                   "-p", '{"storageClassName": "slow"}')
    t.check("kubectl patch may not change a capacity's class",
            code != 0 and 'storageClassName: Invalid value: "slow": field is immutable' in out, out)

    # A VolumeAttributesClass: labels change under kubectl apply, parameters never.
    applied = copy(CLASS)
    applied["metadata"]["labels"] = {"tier": "gold"}
    code, out = kc("apply", "-f", "-", stdin=json.dumps(applied))
    t.check("kubectl apply labels a VolumeAttributesClass", code == 0, out)
    applied["parameters"]["iops"] = "9000"
    code, out = kc("apply", "-f", "-", stdin=json.dumps(applied))
    t.check("kubectl apply may not change its parameters (kube's message)",
            code != 0 and '"gold" is invalid: parameters: Forbidden: updates to parameters are '
            'forbidden.' in out, out)
    status, vac = server.request("GET", f"{GROUP}/volumeattributesclasses/gold")
    t.check("the class keeps its parameters and label, with no generation",
            status == 200 and vac["parameters"] == CLASS["parameters"] and
            vac["metadata"].get("labels") == {"tier": "gold"} and
            "generation" not in vac["metadata"], vac)

    code, out = kc("delete", "csinode", "worker-1")
    t.check("kubectl deletes a CSINode", code == 0, out)
    kc("create", "-f", "-", stdin=json.dumps(CLASS | {"metadata": {"name": "bronze"}}))
    status, body = server.request("DELETE", f"{GROUP}/volumeattributesclasses/bronze")
    t.check("a delete of a VolumeAttributesClass answers with the object, as kube's does",
            status == 200 and body.get("kind") == "VolumeAttributesClass" and
            body.get("driverName") == CLASS["driverName"], (status, body))
    code, out = kc("delete", "csistoragecapacity", "fast-zone-a", "-n", "default")
    t.check("kubectl deletes a CSIStorageCapacity", code == 0, out)
    code, out = kc("delete", "vac", "gold")
    t.check("kubectl deletes a VolumeAttributesClass by its short name", code == 0, out)
    code, out = kc("get", "csinodes,volumeattributesclasses", "-o", "name")
    t.check("they are gone", code == 0 and out.strip() == "", out)


def python_client(t, server, tmp):
    api_client = python_api_client(t, server, tmp)
    if api_client is None:
        return
    from kubernetes import client, dynamic
    try:
        # CSINode has a typed API in python-kubernetes 22.6.
        storage = client.StorageV1Api(api_client)
        node = copy(NODE)
        node["metadata"]["name"] = "py-node"
        storage.create_csi_node(body=node)
        got = storage.read_csi_node(name="py-node")
        t.check("the typed Python client creates and reads a CSINode",
                got.spec.drivers[0].node_id == "i-0123456789" and
                got.spec.drivers[0].allocatable.count == 25, got.spec)
        names = [n.metadata.name for n in storage.list_csi_node().items]
        t.check("and lists it", "py-node" in names, names)
        storage.delete_csi_node(name="py-node")

        # CSIStorageCapacity v1 and VolumeAttributesClass v1 are newer than its typed API: the
        # dynamic client reads discovery.
        dyn = dynamic.DynamicClient(api_client)
        capacities = dyn.resources.get(api_version="storage.k8s.io/v1", kind="CSIStorageCapacity")
        cap = copy(CAPACITY)
        cap["metadata"]["name"] = "py-capacity"
        capacities.create(body=cap, namespace="default")
        got = capacities.get(name="py-capacity", namespace="default")
        t.check("the dynamic client creates and reads a CSIStorageCapacity",
                got.storageClassName == "fast" and got.capacity == "100Gi", got)
        got_dict = got.to_dict()
        got_dict["maximumVolumeSize"] = "8Ti"
        updated = capacities.replace(body=got_dict, namespace="default")
        t.check("and replaces it", updated.maximumVolumeSize == "8Ti", updated)
        capacities.delete(name="py-capacity", namespace="default")

        classes = dyn.resources.get(api_version="storage.k8s.io/v1", kind="VolumeAttributesClass")
        t.check("discovery names vac as VolumeAttributesClass's short name",
                classes.short_names == ["vac"] and not classes.namespaced, classes.short_names)
        vac = copy(CLASS)
        vac["metadata"]["name"] = "py-silver"
        classes.create(body=vac)
        got = classes.get(name="py-silver")
        t.check("the dynamic client creates and reads a VolumeAttributesClass",
                got.driverName == "ebs.csi.example.com" and got.parameters.iops == "5000", got)
        got_dict = got.to_dict()
        got_dict["driverName"] = "other.csi.example.com"
        try:
            classes.replace(body=got_dict)
            t.check("the dynamic client may not change the driver", False, "accepted")
        except Exception as e:  # noqa: BLE001 - the API's refusal
            t.check("the dynamic client may not change the driver",
                    getattr(e, "status", None) == 422 and
                    "driverName: Forbidden: updates to driverName are forbidden." in str(e),
                    str(e)[:400])
        classes.delete(name="py-silver")
        names = [i.metadata.name for i in classes.get().items]
        t.check("the Python client deletes it", "py-silver" not in names, names)
    except Exception as e:  # noqa: BLE001 - any client failure is the check's failure
        t.check("the Python client works with the storage kinds", False, repr(e)[:500])


def refusals(t, server):
    def create(resource, obj, namespace=None):
        prefix = f"{GROUP}/namespaces/{namespace}" if namespace else GROUP
        return server.request("POST", f"{prefix}/{resource}", body=obj)

    node = copy(NODE)
    node["metadata"]["name"] = "bad-node"
    node["spec"]["drivers"] = [
        {"name": "a.example.com", "nodeID": "", "allocatable": {"count": -1}},
        {"name": "a.example.com", "nodeID": "n", "topologyKeys": ["zone", "zone"]},
    ]
    status, body = create("csinodes", node)
    causes = body.get("details", {}).get("causes", []) if isinstance(body, dict) else []
    # The schema's map list refuses the second driver of one name first (kube has no such
    # check for built-in kinds; docs/compatibility.md says so); then kube's own causes.
    t.check("a CSINode's drivers are refused with kube's messages",
            status == 422 and body.get("reason") == "Invalid" and
            [(c["field"], c["message"]) for c in causes] == [
                ("spec.drivers[1]",
                 'Duplicate value: map[string]interface {}{"name":"a.example.com"}'),
                ("spec.drivers[0].nodeID", "Required value"),
                ("spec.drivers[0].allocatable.count",
                 "Invalid value: -1: must be greater than or equal to 0"),
                ("spec.drivers[1].name", 'Duplicate value: "a.example.com"'),
                ("spec.drivers[1]", 'Duplicate value: "zone"')], (status, body))

    cap = copy(CAPACITY)
    cap["metadata"]["name"] = "bad-capacity"
    cap["storageClassName"] = "Fast_Class"
    cap["capacity"] = "-1Gi"
    cap["nodeTopology"] = {"matchExpressions": [{"key": "zone", "operator": "Near"}]}
    status, body = create("csistoragecapacities", cap, namespace="default")
    causes = body.get("details", {}).get("causes", []) if isinstance(body, dict) else []
    t.check("a CSIStorageCapacity's topology, class and capacity are refused at kube's paths",
            status == 422 and [c["field"] for c in causes] ==
            ["nodeTopology.matchExpressions[0].operator", "storageClassName", "capacity"] and
            causes[2]["message"] == 'Invalid value: "-1Gi": must be greater than or equal to 0',
            (status, body))

    vac = copy(CLASS)
    vac["metadata"]["name"] = "bad-class"
    vac["parameters"] = {}
    status, body = create("volumeattributesclasses", vac)
    t.check("a VolumeAttributesClass without parameters is refused with kube's message",
            status == 422 and body.get("message") ==
            'VolumeAttributesClass.storage.k8s.io "bad-class" is invalid: parameters: Required '
            "value: must contain at least one key/value pair", (status, body))


if __name__ == "__main__":
    run_suite(checks)
