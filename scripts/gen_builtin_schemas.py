#!/usr/bin/python3
"""Generates schema/schemas/builtin.json, the compact schema form of kwatch's built-in kinds.

Run by a developer (not by CI) after editing schema/schemas/overlay.json:

    /usr/bin/python3 scripts/gen_builtin_schemas.py

Reads the Debian python3-kubernetes 22.6 models (openapi_types, attribute_map, and the setters
that refuse None for required fields) for field names and shapes only (no descriptions), maps
each model class to kube's OpenAPI definition name, applies the hand-written overlay (facts the
Kubernetes 1.22 models lack: int-or-string, quantities, int64, list types, merge keys, enums,
fields added up to Kubernetes 1.32) and writes deterministic JSON (sorted keys), so re-running
it gives no diff.

Overlay syntax (schema/schemas/overlay.json):
  {"definitions": {"<definition>": {
      "required": [...],          # added to the definition's required fields
      "unrequire": [...],         # fields kube made optional
      "drop": [...],              # fields kube removed (also dropped from required)
      "fields": {"<field>": <string: replaces the field> |
                            <object: merged attribute by attribute onto the field> |
                            null: removes the field}}}}
  A definition absent from the models is added as written.
"""

import glob
import json
import os
import re
import sys

MODELS = "/usr/lib/python3/dist-packages/kubernetes/client/models"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OVERLAY = os.path.join(ROOT, "schema", "schemas", "overlay.json")
OUTPUT = os.path.join(ROOT, "schema", "schemas", "builtin.json")

CORE = "io.k8s.api.core.v1"
META = "io.k8s.apimachinery.pkg.apis.meta.v1"

# API group -> OpenAPI package of its v1 types.
PACKAGES = {
    "": CORE,
    "apps": "io.k8s.api.apps.v1",
    "batch": "io.k8s.api.batch.v1",
    "networking.k8s.io": "io.k8s.api.networking.v1",
    "policy": "io.k8s.api.policy.v1",
    "coordination.k8s.io": "io.k8s.api.coordination.v1",
    "discovery.k8s.io": "io.k8s.api.discovery.v1",
    "events.k8s.io": "io.k8s.api.events.v1",
    "scheduling.k8s.io": "io.k8s.api.scheduling.v1",
    "storage.k8s.io": "io.k8s.api.storage.v1",
    "node.k8s.io": "io.k8s.api.node.v1",
    "rbac.authorization.k8s.io": "io.k8s.api.rbac.v1",
    "apiextensions.k8s.io": "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1",
    "autoscaling": "io.k8s.api.autoscaling.v1",
    "admissionregistration.k8s.io": "io.k8s.api.admissionregistration.v1",
    "apiregistration.k8s.io": "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1",
    "certificates.k8s.io": "io.k8s.api.certificates.v1",
    "resource.k8s.io": "io.k8s.api.resource.v1",
}

# (group, version) whose types live in another package than the group's v1 types.
VERSIONED_PACKAGES = {
    ("autoscaling", "v2"): "io.k8s.api.autoscaling.v2",
}

# (group, version, kind, python class). Core kinds come first: a model class takes the package
# of the first kind that reaches it, so the core types shared with other groups stay core.
# A kind the 1.22 models lack names its definition instead of a class ("io.k8s...."): the
# overlay writes that definition and everything it reaches that the models lack.
KINDS = [
    ("", "v1", "Namespace", "V1Namespace"),
    ("", "v1", "Pod", "V1Pod"),
    ("", "v1", "Service", "V1Service"),
    ("", "v1", "ConfigMap", "V1ConfigMap"),
    ("", "v1", "Secret", "V1Secret"),
    ("", "v1", "Node", "V1Node"),
    ("", "v1", "Event", "CoreV1Event"),
    ("", "v1", "Endpoints", "V1Endpoints"),
    ("", "v1", "ServiceAccount", "V1ServiceAccount"),
    ("", "v1", "PersistentVolumeClaim", "V1PersistentVolumeClaim"),
    ("", "v1", "PersistentVolume", "V1PersistentVolume"),
    ("", "v1", "PodTemplate", "V1PodTemplate"),
    ("", "v1", "ReplicationController", "V1ReplicationController"),
    ("", "v1", "LimitRange", "V1LimitRange"),
    ("", "v1", "ResourceQuota", "V1ResourceQuota"),
    ("apps", "v1", "Deployment", "V1Deployment"),
    ("apps", "v1", "ReplicaSet", "V1ReplicaSet"),
    ("apps", "v1", "StatefulSet", "V1StatefulSet"),
    ("apps", "v1", "DaemonSet", "V1DaemonSet"),
    ("apps", "v1", "ControllerRevision", "V1ControllerRevision"),
    ("batch", "v1", "Job", "V1Job"),
    ("batch", "v1", "CronJob", "V1CronJob"),
    ("coordination.k8s.io", "v1", "Lease", "V1Lease"),
    ("networking.k8s.io", "v1", "Ingress", "V1Ingress"),
    ("networking.k8s.io", "v1", "IngressClass", "V1IngressClass"),
    ("networking.k8s.io", "v1", "NetworkPolicy", "V1NetworkPolicy"),
    ("policy", "v1", "PodDisruptionBudget", "V1PodDisruptionBudget"),
    ("discovery.k8s.io", "v1", "EndpointSlice", "V1EndpointSlice"),
    ("events.k8s.io", "v1", "Event", "EventsV1Event"),
    ("scheduling.k8s.io", "v1", "PriorityClass", "V1PriorityClass"),
    ("storage.k8s.io", "v1", "StorageClass", "V1StorageClass"),
    ("storage.k8s.io", "v1", "CSIDriver", "V1CSIDriver"),
    ("storage.k8s.io", "v1", "VolumeAttachment", "V1VolumeAttachment"),
    ("storage.k8s.io", "v1", "CSINode", "V1CSINode"),
    ("storage.k8s.io", "v1", "CSIStorageCapacity", "io.k8s.api.storage.v1.CSIStorageCapacity"),
    ("storage.k8s.io", "v1", "VolumeAttributesClass",
     "io.k8s.api.storage.v1.VolumeAttributesClass"),
    ("node.k8s.io", "v1", "RuntimeClass", "V1RuntimeClass"),
    ("rbac.authorization.k8s.io", "v1", "Role", "V1Role"),
    ("rbac.authorization.k8s.io", "v1", "ClusterRole", "V1ClusterRole"),
    ("rbac.authorization.k8s.io", "v1", "RoleBinding", "V1RoleBinding"),
    ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "V1ClusterRoleBinding"),
    ("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "V1CustomResourceDefinition"),
    ("autoscaling", "v1", "Scale", "V1Scale"),
    ("autoscaling", "v1", "HorizontalPodAutoscaler", "V1HorizontalPodAutoscaler"),
    # Kubernetes 1.22's models stop at autoscaling/v2beta2, whose types autoscaling/v2 kept.
    ("autoscaling", "v2", "HorizontalPodAutoscaler", "V2beta2HorizontalPodAutoscaler"),
    ("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration",
     "V1ValidatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration",
     "V1MutatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicy",
     "io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicy"),
    ("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicyBinding",
     "io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicyBinding"),
    ("admissionregistration.k8s.io", "v1beta1", "MutatingAdmissionPolicy",
     "io.k8s.api.admissionregistration.v1beta1.MutatingAdmissionPolicy"),
    ("admissionregistration.k8s.io", "v1beta1", "MutatingAdmissionPolicyBinding",
     "io.k8s.api.admissionregistration.v1beta1.MutatingAdmissionPolicyBinding"),
    ("apiregistration.k8s.io", "v1", "APIService", "V1APIService"),
    ("certificates.k8s.io", "v1", "CertificateSigningRequest", "V1CertificateSigningRequest"),
    ("flowcontrol.apiserver.k8s.io", "v1", "FlowSchema", "io.k8s.api.flowcontrol.v1.FlowSchema"),
    ("flowcontrol.apiserver.k8s.io", "v1", "PriorityLevelConfiguration",
     "io.k8s.api.flowcontrol.v1.PriorityLevelConfiguration"),
    ("networking.k8s.io", "v1", "ServiceCIDR", "io.k8s.api.networking.v1.ServiceCIDR"),
    ("networking.k8s.io", "v1", "IPAddress", "io.k8s.api.networking.v1.IPAddress"),
    ("resource.k8s.io", "v1", "DeviceClass", "io.k8s.api.resource.v1.DeviceClass"),
    ("resource.k8s.io", "v1", "ResourceClaim", "io.k8s.api.resource.v1.ResourceClaim"),
    ("resource.k8s.io", "v1", "ResourceClaimTemplate",
     "io.k8s.api.resource.v1.ResourceClaimTemplate"),
    ("resource.k8s.io", "v1", "ResourceSlice", "io.k8s.api.resource.v1.ResourceSlice"),
]

# Classes whose definition the first-referrer rule would get wrong: apimachinery's meta types
# (shared by every group), core types first reached from another group, and renames since 1.22.
EXPLICIT = {
    "V1ObjectMeta": META + ".ObjectMeta",
    "V1ListMeta": META + ".ListMeta",
    "V1LabelSelector": META + ".LabelSelector",
    "V1LabelSelectorRequirement": META + ".LabelSelectorRequirement",
    "V1OwnerReference": META + ".OwnerReference",
    "V1ManagedFieldsEntry": META + ".ManagedFieldsEntry",
    "V1Condition": META + ".Condition",
    "V1TopologySelectorTerm": CORE + ".TopologySelectorTerm",
    "V1TopologySelectorLabelRequirement": CORE + ".TopologySelectorLabelRequirement",
    "V1TypedLocalObjectReference": CORE + ".TypedLocalObjectReference",
    "V1ObjectReference": CORE + ".ObjectReference",
    "V1Handler": CORE + ".LifecycleHandler",
    "V1Status": META + ".Status",
    "V1StatusDetails": META + ".StatusDetails",
    "V1StatusCause": META + ".StatusCause",
    "V1DeleteOptions": META + ".DeleteOptions",
    "V1Preconditions": META + ".Preconditions",
    "V1WatchEvent": META + ".WatchEvent",
}

# Classes no kind reaches that the operations of /openapi/v2 and /openapi/v3 name: the answers
# of deletes and watches and the body of a delete.
OPERATION_CLASSES = ["V1ListMeta", "V1Status", "V1DeleteOptions", "V1WatchEvent"]

PRIMITIVES = {"str": "string", "int": "int32", "bool": "boolean", "float": "number",
              "datetime": "date-time", "date": "string", "object": "any"}

PREFIX = re.compile(r"^(?:[A-Z][a-z]+)?V(?:1|2beta2)(?=[A-Z])")
REQUIRED = re.compile(r"Invalid value for `(\w+)`, must not be `None`")


def load_models():
    """class name -> (openapi_types, attribute_map, required python names)."""
    sys.path.insert(0, "/usr/lib/python3/dist-packages")
    from kubernetes.client import models  # noqa: E402
    out = {}
    for path in sorted(glob.glob(os.path.join(MODELS, "*.py"))):
        if path.endswith("__init__.py"):
            continue
        text = open(path, encoding="utf-8").read()
        m = re.search(r"^class (\w+)\(object\):", text, re.M)
        if not m:
            continue
        cls = getattr(models, m.group(1))
        out[m.group(1)] = (cls.openapi_types, cls.attribute_map, set(REQUIRED.findall(text)))
    return out


def split_type(t):
    """'list[V1Container]' -> ('list', 'V1Container'); 'dict(str, X)' -> ('dict', 'X')."""
    if t.startswith("list[") and t.endswith("]"):
        return "list", t[5:-1]
    if t.startswith("dict(str, ") and t.endswith(")"):
        return "dict", t[10:-1]
    return None, t


def classes_in(t):
    kind, inner = split_type(t)
    if kind:
        return classes_in(inner)
    return [] if inner in PRIMITIVES else [inner]


def main():
    models = load_models()
    # Package of each class: explicit table, else the package of its first referrer (BFS from
    # the kinds in order).
    names = {}
    queue = []
    for group, version, _, cls in KINDS:
        if cls.startswith("io.k8s."):
            continue
        if cls not in names:
            package = VERSIONED_PACKAGES.get((group, version), PACKAGES[group])
            names[cls] = EXPLICIT.get(cls, package + "." + PREFIX.sub("", cls))
            queue.append(cls)
    for cls in OPERATION_CLASSES:
        if cls not in names:
            names[cls] = EXPLICIT[cls]
            queue.append(cls)
    while queue:
        cls = queue.pop(0)
        package = names[cls].rsplit(".", 1)[0]
        types = models[cls][0]
        for attr in sorted(types, key=lambda a: models[cls][1][a]):
            for ref in classes_in(types[attr]):
                if ref not in models:
                    sys.exit("%s.%s: unknown class %s" % (cls, attr, ref))
                if ref not in names:
                    names[ref] = EXPLICIT.get(ref, package + "." + PREFIX.sub("", ref))
                    queue.append(ref)
    seen = {}
    for cls, name in names.items():
        if name in seen:
            sys.exit("%s and %s both map to %s" % (seen[name], cls, name))
        seen[name] = cls

    def convert(t):
        kind, inner = split_type(t)
        if kind == "list":
            return "[]" + convert(inner)
        if kind == "dict":
            return "map[" + convert(inner) + "]"
        return PRIMITIVES.get(inner) or names[inner]

    definitions = {}
    for cls, name in names.items():
        types, attrs, required = models[cls]
        fields = {attrs[a]: convert(t) for a, t in types.items()}
        definitions[name] = {"fields": fields,
                             "required": sorted(attrs[a] for a in required if a in attrs)}

    overlay = json.load(open(OVERLAY, encoding="utf-8"))
    for name, patch in sorted(overlay.get("definitions", {}).items()):
        d = definitions.setdefault(name, {"fields": {}, "required": []})
        for f in patch.get("drop", []):
            if f not in d["fields"]:
                sys.exit("overlay: %s has no field %s to drop" % (name, f))
            del d["fields"][f]
            if f in d["required"]:
                d["required"].remove(f)
        for f, v in patch.get("fields", {}).items():
            if v is None:
                d["fields"].pop(f, None)
            elif isinstance(v, str) or f not in d["fields"]:
                d["fields"][f] = v
            else:
                old = d["fields"][f]
                merged = dict(old) if isinstance(old, dict) else {"type": old}
                merged.update(v)
                d["fields"][f] = merged
        for f in patch.get("unrequire", []):
            if f not in d["required"]:
                sys.exit("overlay: %s.%s is not required" % (name, f))
        d["required"] = sorted((set(d["required"]) - set(patch.get("unrequire", [])))
                               | set(patch.get("required", [])))

    # Keep what the kinds reach after the overlay; check every reference and list-map key.
    def type_of(field):
        return field if isinstance(field, str) else field["type"]

    def element(t):
        while True:
            if t.startswith("[]"):
                t = t[2:]
            elif t.startswith("map[") and t.endswith("]"):
                t = t[4:-1]
            else:
                return t

    scalar = {"string", "boolean", "integer", "int32", "int64", "number", "date-time", "byte",
              "int-or-string", "quantity", "any"}
    reached = set()
    def definition_of(cls):
        return cls if cls.startswith("io.k8s.") else names[cls]

    todo = [definition_of(k[3]) for k in KINDS] + [names[c] for c in OPERATION_CLASSES]
    while todo:
        name = todo.pop()
        if name in reached:
            continue
        if name not in definitions:
            sys.exit("dangling reference to %s" % name)
        reached.add(name)
        d = definitions[name]
        for f, field in sorted(d["fields"].items()):
            if "type" not in field if isinstance(field, dict) else False:
                sys.exit("%s.%s: overlay gives no type" % (name, f))
            e = element(type_of(field))
            if e not in scalar:
                todo.append(e)
            if isinstance(field, dict) and field.get("list") == "map":
                item = definitions.get(e)
                for k in field.get("keys", []):
                    kf = item and item["fields"].get(k)
                    if not kf:
                        sys.exit("%s.%s: list-map key %s is no field of %s" % (name, f, k, e))
                    if k not in item["required"] and not (isinstance(kf, dict) and "default" in kf):
                        sys.exit("%s.%s: list-map key %s of %s is neither required nor defaulted"
                                 % (name, f, k, e))
        for r in d["required"]:
            if r not in d["fields"]:
                sys.exit("%s: required %s is no field" % (name, r))

    unused = sorted(set(overlay.get("definitions", {})) - reached)
    if unused:
        sys.exit("overlay: no kind reaches %s" % ", ".join(unused))

    out = {"kinds": [{"group": g, "version": v, "kind": k, "definition": definition_of(c)}
                     for g, v, k, c in KINDS],
           "definitions": {}}
    for name in sorted(reached):
        d = definitions[name]
        entry = {"fields": d["fields"]}
        if d["required"]:
            entry["required"] = d["required"]
        out["definitions"][name] = entry
    text = json.dumps(out, indent=1, sort_keys=True, separators=(",", ": ")) + "\n"
    with open(OUTPUT, "w", encoding="utf-8") as f:
        f.write(text)
    print("%s: %d kinds, %d definitions, %d bytes" % (os.path.relpath(OUTPUT, ROOT), len(KINDS),
                                                      len(reached), len(text)))


if __name__ == "__main__":
    main()
