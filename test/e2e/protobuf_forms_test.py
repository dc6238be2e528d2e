"""Issue #30: every built-in kind's protobuf form, decoded with definitions written from kube's
generated.proto field numbers (kube_protobuf.py: protoc compiles them; protoc --decode reads
each answer, and Python's protobuf runtime compares it), is field for field the JSON form of the
same object: a GET, the kind's list, and a watch's ADDED events. Objects written as protobuf
(encoded with the same definitions) read back as JSON equal to what was sent.

The objects: those the server makes itself (namespaces, RBAC, flow control, leases, ...) and
the kinds suite's corpus, one of every kind a user writes; a kind with none of either is a
failure, so a kind added later is covered or noticed.

Usage: protobuf_forms_test.py <path to kwatch-apiserver>
"""
import base64
import http.client
import json
import os
import shutil
import subprocess

import yaml

from harness import run_suite
from kinds_test import CORPUS
from kube_protobuf import (Definitions, INLINE, KEEP_ZERO, KIND_MESSAGES, REPEATED, SCALARS,
                           message_name)

PB = "application/vnd.kubernetes.protobuf"

# Kinds that have a protobuf form but no collection to list or watch (subresource bodies).
NOT_LISTED = {"Binding", "Eviction", "Scale", "TokenRequest", "TokenReview",
              "SubjectAccessReview", "SelfSubjectAccessReview", "LocalSubjectAccessReview",
              "SelfSubjectReview", "SelfSubjectRulesReview", "DeleteOptions"}


# Kinds with a protobuf form that kube serves no collection of either.
NOT_SERVED = {"v1/PodStatusResult", "v1/RangeAllocation"}

# Only for kinds the kinds suite's corpus and the server's own objects leave out. Admission
# policies match namespaces labelled so that none is: they change no other object here.
NO_NAMESPACE = {"namespaceSelector": {"matchLabels": {"kwatch-test": "no-such-namespace"}},
                "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                   "operations": ["CREATE"], "resources": ["configmaps"]}]}
MICRO = "2026-01-02T03:04:05.123456Z"


def more_objects(tmp):
    csr = certificate_request(tmp)
    claim = {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}}
    return [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm1"},
         "data": {"a": "1"}, "binaryData": {"b": "AAE="}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1"}, "type": "Opaque",
         "data": {"k": "dmFsdWU="}},
        {"apiVersion": "v1", "kind": "Node",
         "metadata": {"name": "n1", "labels": {"zone": "a"}},
         "spec": {"podCIDR": "10.0.0.0/24",
                  "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1"},
         "spec": {"containers": [{
             "name": "c", "image": "busybox:1.36", "command": ["sh", "-c", "sleep 1"],
             "resources": {"requests": {"cpu": "100m", "memory": "16Mi"}},
             "ports": [{"name": "http", "containerPort": 80}],
             "livenessProbe": {"httpGet": {"path": "/", "port": "http"}},
             "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cm1", "key": "a"}}}]}],
             "volumes": [{"name": "v", "configMap": {"name": "cm1"}},
                         {"name": "e", "emptyDir": {"sizeLimit": "1Gi"}}]}},
        {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e1"},
         "involvedObject": {"kind": "Pod", "name": "p1", "namespace": "default"},
         "reason": "Started", "message": "m", "type": "Normal", "count": 2,
         "firstTimestamp": "2026-01-02T03:04:05Z", "lastTimestamp": "2026-01-02T03:04:06Z",
         "source": {"component": "kubelet"}},
        {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e2"},
         "eventTime": MICRO, "reportingController": "example.com/c", "reportingInstance": "i",
         "action": "Pull", "reason": "Pulled", "type": "Normal", "note": "n",
         "regarding": {"kind": "Pod", "name": "p1", "namespace": "default"}},
        {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l1"},
         "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15, "acquireTime": MICRO,
                  "renewTime": MICRO, "leaseTransitions": 0}},
        {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
         "metadata": {"name": "csr1"},
         "spec": {"request": csr, "signerName": "example.com/signer",
                  "usages": ["digital signature", "client auth"], "expirationSeconds": 3600}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
         "metadata": {"name": "vap"},
         "spec": {"failurePolicy": "Fail", "matchConstraints": NO_NAMESPACE,
                  "validations": [{"expression": "object.metadata.name != 'x'",
                                   "message": "not x"}]}},
        {"apiVersion": "admissionregistration.k8s.io/v1",
         "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "vapb"},
         "spec": {"policyName": "vap", "validationActions": ["Deny"]}},
        {"apiVersion": "admissionregistration.k8s.io/v1beta1", "kind": "MutatingAdmissionPolicy",
         "metadata": {"name": "map"},
         "spec": {"failurePolicy": "Fail", "reinvocationPolicy": "Never",
                  "matchConstraints": NO_NAMESPACE,
                  "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {
                      "expression": "Object{metadata: Object.metadata{labels: {'a': 'b'}}}"}}]}},
        {"apiVersion": "admissionregistration.k8s.io/v1beta1",
         "kind": "MutatingAdmissionPolicyBinding", "metadata": {"name": "mapb"},
         "spec": {"policyName": "map"}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
         "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "rc1"},
         "spec": claim},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
         "metadata": {"name": "rct1"}, "spec": {"spec": claim}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "rs1"},
         "spec": {"driver": "gpu.example.com", "nodeName": "n1",
                  "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                  "devices": [{"name": "d0", "attributes": {"model": {"string": "x"}},
                               "capacity": {"memory": {"value": "1Gi"}}}]}},
        {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": "n1"},
         "spec": {"drivers": [{"name": "hostpath.csi.k8s.io", "nodeID": "n1",
                               "topologyKeys": ["zone"], "allocatable": {"count": 5}}]}},
        {"apiVersion": "storage.k8s.io/v1", "kind": "CSIStorageCapacity",
         "metadata": {"name": "cap1"}, "storageClassName": "standard", "capacity": "10Gi",
         "maximumVolumeSize": "5Gi", "nodeTopology": {"matchLabels": {"zone": "a"}}},
        {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttributesClass",
         "metadata": {"name": "fast"}, "driverName": "hostpath.csi.k8s.io",
         "parameters": {"iops": "100"}},
    ]


def certificate_request(tmp):
    """A PEM certificate request, base64 as CertificateSigningRequest.spec.request holds it."""
    key = os.path.join(tmp, "csr.key")
    p = subprocess.run(["openssl", "req", "-new", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key,
                        "-subj", "/CN=someone/O=team"], capture_output=True, check=True)
    return base64.b64encode(p.stdout).decode()


# Field numbers of the most used messages as kube's generated.proto files give them, typed in
# here from those files: the definitions this suite compiles come from kwatch's table (as the
# server's encoder does), so these pin the table itself to kube's numbers.
KUBE_NUMBERS = {
    "meta/v1.ObjectMeta": {"name": 1, "generateName": 2, "namespace": 3, "selfLink": 4, "uid": 5,
                           "resourceVersion": 6, "generation": 7, "creationTimestamp": 8,
                           "deletionTimestamp": 9, "deletionGracePeriodSeconds": 10,
                           "labels": 11, "annotations": 12, "ownerReferences": 13,
                           "finalizers": 14, "managedFields": 17},
    "core/v1.ConfigMap": {"metadata": 1, "data": 2, "binaryData": 3, "immutable": 4},
    "core/v1.Secret": {"metadata": 1, "data": 2, "type": 3, "stringData": 4, "immutable": 5},
    "core/v1.Pod": {"metadata": 1, "spec": 2, "status": 3},
    "core/v1.PodSpec": {"volumes": 1, "containers": 2, "restartPolicy": 3,
                        "terminationGracePeriodSeconds": 4, "dnsPolicy": 6, "nodeSelector": 7,
                        "serviceAccountName": 8, "nodeName": 10, "hostNetwork": 11,
                        "securityContext": 14, "affinity": 18, "schedulerName": 19,
                        "initContainers": 20, "tolerations": 22, "priorityClassName": 24,
                        "priority": 25},
    "core/v1.Container": {"name": 1, "image": 2, "command": 3, "args": 4, "workingDir": 5,
                          "ports": 6, "env": 7, "resources": 8, "volumeMounts": 9,
                          "livenessProbe": 10, "readinessProbe": 11, "lifecycle": 12,
                          "terminationMessagePath": 13, "imagePullPolicy": 14,
                          "securityContext": 15, "envFrom": 19, "terminationMessagePolicy": 20,
                          "startupProbe": 22},
    "core/v1.ServicePort": {"name": 1, "protocol": 2, "port": 3, "targetPort": 4, "nodePort": 5},
    "apps/v1.DeploymentSpec": {"replicas": 1, "selector": 2, "template": 3, "strategy": 4,
                               "minReadySeconds": 5, "revisionHistoryLimit": 6, "paused": 7,
                               "progressDeadlineSeconds": 9},
}


def check_kube_numbers(t, defs):
    wrong = []
    for message, numbers in KUBE_NUMBERS.items():
        table = {f[1]: f[0] for f in defs.fields(message)}
        for name, number in numbers.items():
            if table.get(name) != number:
                wrong.append(f"{message}.{name}: {table.get(name)} in the table, {number} in kube's")
    t.check("the table's field numbers are kube's generated.proto ones (spot check)", not wrong,
            wrong)


def is_zero(v):
    return v in ("", 0, False, None, [], {})


def differences(defs, table_name, proto_json, plain, path=""):
    """Where the decoded protobuf (as JSON) and the JSON answer disagree, field by field: a
    value either side has that the other has not or has differently. A zero the protobuf
    form carries and JSON omits is no difference (kube writes non-pointer zeros in protobuf and
    omits them in JSON), except for pointers, where presence is the value."""
    out = []
    fields = {f[1]: f for f in defs.fields(table_name) if f[1]}
    inlined = [f for f in defs.fields(table_name) if f[3] & INLINE]
    for f in inlined:
        fields.update({g[1]: g for g in defs.fields(f[4]) if g[1]})
        for g in defs.fields(f[4]):
            if g[3] & INLINE:
                fields.update({h[1]: h for h in defs.fields(g[4]) if h[1]})
    keys = set(proto_json) | set(plain)
    if path and defs.is_kind(table_name):
        # A kind's object inside another: JSON writes its TypeMeta, protobuf has no field for it.
        keys -= {"apiVersion", "kind"}
    for key in sorted(keys):
        here = f"{path}.{key}"
        field = fields.get(key)
        if field is None:
            out.append(f"{here}: not in the definitions of {table_name}")
            continue
        _, _, kind, flags, ref = field
        a, b = proto_json.get(key), plain.get(key)
        if key not in plain:
            if is_zero(a) and not flags & KEEP_ZERO:
                continue
            out.append(f"{here}: protobuf {a!r}, JSON has none")
            continue
        if key not in proto_json:
            # (null is Go's zero of a time, a list or a map: nothing on the wire)
            if b is None or (is_zero(b) and not flags & KEEP_ZERO):
                continue
            out.append(f"{here}: JSON {b!r}, protobuf has none")
            continue
        if kind == "message" and not flags & REPEATED and isinstance(a, dict) and isinstance(b, dict):
            out += differences(defs, ref, a, b, here)
        elif kind == "message" and flags & REPEATED and isinstance(a, list) and isinstance(b, list):
            if len(a) != len(b):
                out.append(f"{here}: {len(a)} items in protobuf, {len(b)} in JSON")
            for i, (x, y) in enumerate(zip(a, b)):
                out += differences(defs, ref, x, y, f"{here}[{i}]")
        elif kind == "map" and ref not in SCALARS and ref not in KIND_MESSAGES \
                and isinstance(a, dict) and isinstance(b, dict):
            if set(a) != set(b):
                out.append(f"{here}: keys {sorted(a)} in protobuf, {sorted(b)} in JSON")
            for k in sorted(set(a) & set(b)):
                out += differences(defs, ref, a[k], b[k], f"{here}[{k}]")
        elif a != b:
            out.append(f"{here}: protobuf {a!r}, JSON {b!r}")
    return out


def discovery(server):
    """kind -> (apiVersion, resource, namespaced) of every served built-in collection."""
    kinds = {}
    groups = [("v1", "/api/v1")]
    _, apis = server.request("GET", "/apis")
    for g in apis["groups"]:
        for v in g["versions"]:
            groups.append((v["groupVersion"], f"/apis/{v['groupVersion']}"))
    for api_version, prefix in groups:
        status, body = server.request("GET", prefix)
        if status != 200:
            continue
        for r in body["resources"]:
            if "/" in r["name"] or "list" not in r.get("verbs", []):
                continue
            kinds.setdefault((api_version, r["kind"]),
                             (prefix, r["name"], r["namespaced"], "watch" in r["verbs"]))
    return kinds


def get(server, path, protobuf):
    headers = {"Accept": PB} if protobuf else {}
    return server.request("GET", path, headers=headers, raw=protobuf)


def watch_from_zero(server, path, protobuf, wanted):
    """A watch from resourceVersion 0 (the objects there are, as ADDED events, then what
    changes): its first `wanted` events (raw frames in protobuf, parsed in JSON), or as many as
    came before it ended."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    accept = PB if protobuf else "application/json"
    conn.request("GET", f"{path}?watch=1&resourceVersion=0&timeoutSeconds=10",
                 headers={"Accept": accept})
    resp = conn.getresponse()
    events = []
    while resp.status == 200 and len(events) < wanted:
        if protobuf:
            head = resp.read(4)
            if len(head) < 4:
                break
            events.append(resp.read(int.from_bytes(head, "big")))
        else:
            line = resp.readline()
            if not line:
                break
            events.append(json.loads(line))
    conn.close()
    return resp.status, resp.getheader("Content-Type"), events


def without_type(obj):
    """An object without apiVersion and kind (the envelope carries them in protobuf)."""
    return {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}


def checks(t, server, tmp):
    if not shutil.which("protoc"):
        t.check("protoc present (skipped)", True)
        return
    try:
        defs = Definitions(tmp)
    except ImportError:
        t.check("python3-protobuf present (skipped)", True)
        return
    check_kube_numbers(t, defs)
    served = discovery(server)
    # The corpus, written as JSON through the API (the kinds suite applies it with kubectl).
    for obj in [yaml.safe_load(text) for text in CORPUS.values()] + more_objects(tmp):
        where = served.get((obj["apiVersion"], obj["kind"]))
        if where is None:
            continue
        prefix, resource, namespaced, _ = where
        ns = f"/namespaces/{obj['metadata'].get('namespace', 'default')}" if namespaced else ""
        status, body = server.request("POST", f"{prefix}{ns}/{resource}", body=obj)
        t.check(f"the {obj['kind']} {obj['metadata']['name']} is created", status == 201,
                str(body)[:300])

    covered, missing = [], []
    for kind_key, table_name in sorted(defs.table["kinds"].items()):
        api_version, _, kind = kind_key.rpartition("/")
        if kind in NOT_LISTED or kind_key in NOT_SERVED:
            continue
        where = served.get((api_version, kind))
        if where is None:
            missing.append(f"{kind_key} (not served)")
            continue
        prefix, resource, namespaced, watchable = where
        status, listed = get(server, f"{prefix}/{resource}", False)
        if status != 200 or not listed.get("items"):
            missing.append(f"{kind_key} (no object)")
            continue
        covered.append(kind)
        check_kind(t, server, defs, api_version, kind, table_name, prefix, resource, listed,
                   namespaced, watchable)
    t.check(f"every built-in kind with a protobuf form has an object to compare "
            f"({len(covered)} compared)", not missing, missing)
    check_protobuf_writes(t, server, defs)


def check_kind(t, server, defs, api_version, kind, table_name, prefix, resource, listed,
               namespaced, watchable):
    proto = message_name(table_name)
    path = f"{prefix}/{resource}"
    # A GET of one object.
    meta = listed["items"][0]["metadata"]
    ns = f"/namespaces/{meta['namespace']}" if namespaced else ""
    one = f"{prefix}{ns}/{resource}/{meta['name']}"
    status, plain = get(server, one, False)
    status_pb, body = get(server, one, True)
    envelope = defs.unwrap(body)
    ok = status == status_pb == 200 and envelope is not None and envelope[:2] == (api_version, kind)
    t.check(f"{kind}: a GET in protobuf is kube's envelope of a {kind}", ok,
            (status, status_pb, envelope[:2] if envelope else body[:80]))
    if not ok:
        return
    code, text = defs.protoc_decode(proto, envelope[2])
    unknown = [line for line in text.splitlines() if line.strip()[:1].isdigit()]
    t.check(f"{kind}: protoc --decode reads it with the definitions, no field unknown to them",
            code == 0 and not unknown, (code, unknown[:5], text[:300]))
    decoded = defs.to_json(table_name, defs.decode(proto, envelope[2]))
    diff = differences(defs, table_name, decoded, without_type(plain))
    t.check(f"{kind}: GET, protobuf and JSON agree field for field", not diff, diff[:8])

    # The list: its ListMeta and each item.
    status_pb, body = get(server, path, True)
    envelope = defs.unwrap(body)
    ok = status_pb == 200 and envelope is not None and envelope[:2] == (api_version, kind + "List")
    t.check(f"{kind}: a list in protobuf is a {kind}List", ok,
            envelope[:2] if envelope else body[:80])
    if ok:
        decoded = defs.decode(proto + "List", envelope[2])
        status, plain = get(server, path, False)  # again: the list may have changed
        items = [defs.to_json(table_name, i) for i in decoded.items]
        names = [(i["metadata"].get("namespace"), i["metadata"]["name"]) for i in items]
        plain_names = [(i["metadata"].get("namespace"), i["metadata"]["name"])
                       for i in plain["items"]]
        diff = []
        if names != plain_names:
            diff.append(f"items {names[:5]} in protobuf, {plain_names[:5]} in JSON")
        else:
            # (kwatch's JSON items carry apiVersion and kind, kube's do not: a protobuf item
            # never has them)
            for a, b in zip(items, plain["items"]):
                diff += differences(defs, table_name, a, without_type(b),
                                    f"[{b['metadata']['name']}]")
        rv = plain["metadata"].get("resourceVersion", "")
        if decoded.metadata.resourceVersion != rv:
            diff.append(f"resourceVersion {decoded.metadata.resourceVersion!r} in protobuf, "
                        f"{rv!r} in JSON")
        t.check(f"{kind}: its list, protobuf and JSON agree item for item "
                f"({len(plain['items'])} items)", not diff, diff[:8])

    if not watchable:
        return  # (ComponentStatus: get and list only, as in kube)
    # A watch from resourceVersion 0: ADDED of each object there is, in both forms.
    wanted = len(listed["items"])
    status, ctype, events = watch_from_zero(server, path, False, wanted)
    status_pb, ctype_pb, frames = watch_from_zero(server, path, True, wanted)
    diff = []
    if status_pb != 200 or ctype_pb != PB + ";stream=watch":
        diff.append(f"status {status_pb}, {ctype_pb}")
    else:
        by_name = {(e["object"]["metadata"].get("namespace"), e["object"]["metadata"]["name"]):
                   without_type(e["object"]) for e in events if e["type"] == "ADDED"}
        seen = 0
        for frame in frames:
            event = defs.decode("WatchEvent", frame)
            if event.type != "ADDED":
                continue
            inner = defs.unwrap(event.object.raw)
            if inner is None or inner[:2] != (api_version, kind):
                diff.append(f"an event's object is {inner[:2] if inner else event.object.raw[:40]}")
                continue
            obj = defs.to_json(table_name, defs.decode(proto, inner[2]))
            key = (obj["metadata"].get("namespace"), obj["metadata"]["name"])
            if key in by_name:
                seen += 1
                diff += differences(defs, table_name, obj, by_name[key], f"[{key[1]}]")
        if seen == 0:
            diff.append(f"no ADDED object in both watches ({len(frames)} frames, {len(events)} events)")
    t.check(f"{kind}: a watch's ADDED events, protobuf and JSON agree field for field",
            not diff, diff[:8])


def check_protobuf_writes(t, server, defs):
    """Objects created with a protobuf body (kube's envelope around them) read back as JSON
    equal to what was encoded."""
    samples = [
        ("/api/v1/namespaces/default/configmaps", "v1", "ConfigMap",
         {"metadata": {"name": "pb-write", "labels": {"a": "b"}}, "data": {"k": "v"},
          "binaryData": {"bin": "AAEC"}}),
        ("/apis/apps/v1/namespaces/default/deployments", "apps/v1", "Deployment",
         {"metadata": {"name": "pb-deploy"},
          "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "pb"}},
                   "strategy": {"type": "RollingUpdate",
                                "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}},
                   "template": {"metadata": {"labels": {"app": "pb"}},
                                "spec": {"containers": [{
                                    "name": "c", "image": "busybox:1.36",
                                    "resources": {"limits": {"cpu": "500m", "memory": "64Mi"}},
                                    "ports": [{"containerPort": 8080, "protocol": "TCP"}]}]}}}}),
        ("/api/v1/namespaces/default/services", "v1", "Service",
         {"metadata": {"name": "pb-svc"},
          "spec": {"selector": {"app": "pb"},
                   "ports": [{"name": "http", "port": 80, "targetPort": "web"}]}}),
    ]
    for path, api_version, kind, obj in samples:
        table_name = defs.kind_message(api_version, kind)
        message = defs.cls(message_name(table_name))()
        defs.from_json(table_name, obj, message)
        body = defs.wrap(api_version, kind, message.SerializeToString())
        status, created = server.request("POST", path, body=body,
                                         headers={"Content-Type": PB, "Accept": "application/json"})
        ok = status == 201 and isinstance(created, dict)
        t.check(f"a {kind} written as protobuf is created", ok, str(created)[:300])
        if not ok:
            continue
        _, stored = server.request("GET", f"{path}/{obj['metadata']['name']}")
        diff = []

        def walk(sent, got, where):
            for key, value in sent.items():
                if isinstance(value, dict):
                    walk(value, got.get(key) or {}, f"{where}.{key}")
                elif isinstance(value, list) and value and isinstance(value[0], dict):
                    for i, item in enumerate(value):
                        have = (got.get(key) or [{}] * len(value))
                        walk(item, have[i] if i < len(have) else {}, f"{where}.{key}[{i}]")
                elif got.get(key) != value:
                    diff.append(f"{where}.{key}: sent {value!r}, read {got.get(key)!r}")
        walk(obj, stored, "")
        t.check(f"the {kind} reads back as JSON with every field sent", not diff, diff[:8])


if __name__ == "__main__":
    run_suite(checks)
