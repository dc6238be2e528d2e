#!/usr/bin/python3
"""Generates schema/schemas/protobuf.json: the protobuf wire form of kwatch's built-in kinds.

Run by a developer (not by CI) when the served Kubernetes version changes:

    /usr/bin/python3 scripts/gen_protobuf_schema.py <k8s.io/api git dir> <k8s.io/apimachinery git dir> [tag]

The inputs are git repositories of k8s.io/api and k8s.io/apimachinery (any clone; the tag
defaults to v0.32.0, the API of Kubernetes 1.32; the admission policy and networking packages are read at
v0.34.0, as kwatch serves them). Only the Go struct tags of their types.go files
are read: every field's JSON name (and whether JSON omits it when empty), its Go type (a pointer
keeps a set zero) and its `protobuf:"<wire>,<number>,..."` tag: facts of the wire contract. The
output lists, per message, [number, JSON name, kind, flags, reference] and maps apiVersion/kind to
messages; deterministic JSON (sorted keys), so re-running it gives no diff.

kinds: string bytes int32 int64 boolean message time micro_time quantity int_or_string
       raw_json (RawExtension, FieldsV1: JSON bytes) string_list (ExtraValue) map
flags: 1 repeated, 2 keep a zero value (Go pointer or JSON without omitempty),
       4 inline (an embedded struct whose fields JSON writes in the parent),
       8 omitempty (JSON leaves the field out when it is empty: a zero scalar that is no
         pointer, an empty map or list, a nil pointer)
       16 written when zero: JSON writes the field of a decoded object even when the object
         left it out (a struct that is no pointer, whatever its omitempty, unless omitzero; a
         scalar that is no pointer, without omitempty), as "{}", "", 0, false, "0" (quantity)
         or 0 (int-or-string); the zeros JSON writes as null are not marked
reference: the message of a message field; for a map, its value's kind or message.
"""

import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUTPUT = os.path.join(ROOT, "schema", "schemas", "protobuf.json")

# Packages of k8s.io/api whose kinds kwatch serves (directory -> served group/version).
API_PACKAGES = {
    "core/v1": "v1", "apps/v1": "apps/v1", "batch/v1": "batch/v1", "policy/v1": "policy/v1",
    "networking/v1": "networking.k8s.io/v1", "rbac/v1": "rbac.authorization.k8s.io/v1",
    "scheduling/v1": "scheduling.k8s.io/v1", "storage/v1": "storage.k8s.io/v1",
    "node/v1": "node.k8s.io/v1", "coordination/v1": "coordination.k8s.io/v1",
    "discovery/v1": "discovery.k8s.io/v1", "events/v1": "events.k8s.io/v1",
    "autoscaling/v1": "autoscaling/v1", "autoscaling/v2": "autoscaling/v2",
    "authentication/v1": "authentication.k8s.io/v1", "authorization/v1": "authorization.k8s.io/v1",
    "admissionregistration/v1": "admissionregistration.k8s.io/v1",
    "admissionregistration/v1beta1": "admissionregistration.k8s.io/v1beta1",
    "certificates/v1": "certificates.k8s.io/v1",
    "flowcontrol/v1": "flowcontrol.apiserver.k8s.io/v1",
    "resource/v1": "resource.k8s.io/v1",
}
# Packages read at another tag than the default, and the kinds of theirs kwatch serves: the
# admission policies, networking.k8s.io/v1 and resource.k8s.io/v1 as kube 1.34 serves them.
PACKAGE_TAGS = {"admissionregistration/v1": "v0.34.0", "admissionregistration/v1beta1": "v0.34.0",
                "networking/v1": "v0.34.0", "resource/v1": "v0.34.0"}
SERVED_KINDS = {
    "admissionregistration/v1": {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"},
    "admissionregistration/v1beta1": {"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"},
}
# Kinds a package gained after the tag it is read at, taken from the tag that has them (their
# own structs only; what they reference must be in the package already): storage.k8s.io/v1
# VolumeAttributesClass, GA in kube 1.34, beside the package's other kinds as of 1.32.
ADDED_KINDS = {"storage/v1": ("v0.34.0", ("VolumeAttributesClass",))}
META = "meta/v1"

# Types with a wire form of their own.
SPECIAL = {
    "meta/v1.Time": "time", "meta/v1.MicroTime": "micro_time", "resource.Quantity": "quantity",
    "intstr.IntOrString": "int_or_string", "runtime.RawExtension": "raw_json",
    "meta/v1.FieldsV1": "raw_json", "authentication/v1.ExtraValue": "string_list",
    "authorization/v1.ExtraValue": "string_list", "certificates/v1.ExtraValue": "string_list",
    "types.UID": "string",
}
SCALARS = {"string": "string", "bool": "boolean", "int32": "int32", "int64": "int64",
           "int": "int64", "[]byte": "bytes"}


def git_show(repo, tag, path):
    return subprocess.run(["git", "-C", repo, "show", f"{tag}:{path}"], capture_output=True,
                          text=True, check=True).stdout


def package_key(import_path):
    if import_path.startswith("k8s.io/api/"):
        return import_path[len("k8s.io/api/"):]
    if import_path == "k8s.io/apimachinery/pkg/apis/meta/v1":
        return META
    return import_path.rsplit("/", 1)[-1]  # resource, intstr, runtime, types, fmt


class Package:
    def __init__(self, key, source):
        self.key = key
        self.imports = {}
        self.structs = {}   # name -> [(go name, go type, tag)]
        self.named = {}     # name -> underlying type text
        for alias, path in re.findall(r'^\s*(\w+)?\s*"([\w./-]+)"\s*$', source, re.M):
            self.imports[alias or path.rsplit("/", 1)[-1]] = package_key(path)
        lines = source.splitlines()
        i = 0
        while i < len(lines):
            m = re.match(r"^type (\w+) struct \{\s*$", lines[i])
            if m:
                fields = []
                i += 1
                while not lines[i].startswith("}"):
                    f = re.match(r"^\s*(?:(\w+)\s+)?([\w.*\[\]]+)\s+`(.*)`\s*$", lines[i])
                    if f:
                        fields.append(f.groups())
                    i += 1
                self.structs[m.group(1)] = fields
            else:
                # `type X T` and the aliases `type X = pkg.T` (v1beta1 types kept from v1).
                n = re.match(r"^type (\w+) (?:= )?([\w.*\[\]]+)\s*(//.*)?$", lines[i])
                if n:
                    self.named[n.group(1)] = n.group(2)
            i += 1


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    api, machinery = sys.argv[1], sys.argv[2]
    tag = sys.argv[3] if len(sys.argv) > 3 else "v0.32.0"
    packages = {}
    for key in API_PACKAGES:
        packages[key] = Package(key, git_show(api, PACKAGE_TAGS.get(key, tag), f"{key}/types.go"))
    for key, (added_tag, names) in ADDED_KINDS.items():
        later = Package(key, git_show(api, added_tag, f"{key}/types.go"))
        for name in names:
            packages[key].structs[name] = later.structs[name]
    meta = "".join(git_show(machinery, tag, f"pkg/apis/meta/v1/{f}")
                   for f in ("types.go", "time.go", "micro_time.go"))
    packages[META] = Package(META, meta)

    messages = {}
    needed = []

    def qualify(pkg, type_name):
        """pkg-relative Go type name -> (package key, name)."""
        if "." in type_name:
            alias, name = type_name.split(".", 1)
            return pkg.imports.get(alias, alias), name
        return pkg.key, type_name

    def resolve(pkg, go_type):
        """A Go type -> (kind, reference, repeated, pointer)."""
        pointer = go_type.startswith("*")
        go_type = go_type.lstrip("*")
        if go_type in SCALARS:
            return SCALARS[go_type], "", False, pointer
        if go_type.startswith("[]") and go_type != "[]byte":
            kind, ref, _, _ = resolve(pkg, go_type[2:])
            return kind, ref, True, pointer
        m = re.match(r"^map\[([\w.]+)\](.+)$", go_type)
        if m:
            kind, ref, repeated, _ = resolve(pkg, m.group(2))
            if repeated:
                raise ValueError(f"map of lists: {go_type}")
            return "map", ref if kind == "message" else kind, False, pointer
        key, name = qualify(pkg, go_type)
        full = f"{key}.{name}"
        if full in SPECIAL:
            return SPECIAL[full], "", False, pointer
        owner = packages.get(key)
        if owner is None:
            raise ValueError(f"unknown package of {full}")
        if name in owner.named:
            kind, ref, repeated, _ = resolve(owner, owner.named[name])
            return kind, ref, repeated, pointer
        if name in owner.structs:
            if full not in messages and full not in needed:
                needed.append(full)
            return "message", full, False, pointer
        raise ValueError(f"unknown type {full}")

    def build(full):
        key, name = full.split(".", 1)
        pkg = packages[key]
        fields = []
        for go_name, go_type, tag_text in pkg.structs[name]:
            # `bytes,3,opt,name=x`, and `bytes,3,name=x` where the tag leaves out opt/rep.
            pb = re.search(r'protobuf:"(\w+),(\d+)(?:,[^"]*)?"', tag_text)
            js = re.search(r'json:"([^"]*)"', tag_text)
            if pb is None or js is None:
                continue  # TypeMeta and fields that are not on the wire
            json_name, _, options = js.group(1).partition(",")
            inline = "inline" in options.split(",")
            try:
                kind, ref, repeated, pointer = resolve(pkg, go_type)
            except ValueError as err:
                print(f"skipped {full}.{go_name}: {err}", file=sys.stderr)
                continue
            flags = (1 if repeated else 0) | (4 if inline else 0)
            if "omitempty" in options.split(","):
                flags |= 8
            if kind != "message" and not repeated and (pointer or "omitempty" not in options):
                flags |= 2
            opts = options.split(",")
            if not repeated and not pointer and not inline and "omitzero" not in opts and (
                    kind in ("message", "quantity", "int_or_string") or
                    (kind in ("string", "int32", "int64", "boolean") and "omitempty" not in opts)):
                flags |= 16
            if json_name == "-":
                json_name = ""  # FieldsV1.Raw: the message's JSON is the bytes themselves
            fields.append([int(pb.group(2)), json_name, kind, flags, ref])
        messages[full] = sorted(fields)

    kinds = {}
    for key, api_version in API_PACKAGES.items():
        for name, fields in packages[key].structs.items():
            has_type_meta = any(t == "metav1.TypeMeta" for _, t, _ in fields)
            has_object_meta = any(t == "metav1.ObjectMeta" for _, t, _ in fields)
            if key in SERVED_KINDS and name not in SERVED_KINDS[key]:
                continue
            if has_type_meta and has_object_meta:
                kinds[f"{api_version}/{name}"] = f"{key}.{name}"
                needed.append(f"{key}.{name}")
    for name in ("DeleteOptions",):
        kinds[f"*/{name}"] = f"{META}.{name}"
        needed.append(f"{META}.{name}")
    while needed:
        full = needed.pop()
        if full not in messages:
            build(full)
    with open(OUTPUT, "w") as f:
        json.dump({"kinds": kinds, "messages": messages}, f, indent=0, sort_keys=True)
        f.write("\n")
    print(f"{len(kinds)} kinds, {len(messages)} messages -> {OUTPUT}")


if __name__ == "__main__":
    main()
