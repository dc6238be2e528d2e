#!/usr/bin/python3
"""Generates schema/schemas/descriptions.json: the OpenAPI descriptions of kwatch's built-in
kinds, as kube-apiserver publishes them (what `kubectl explain` prints).

Run by a developer (not by CI) when the served Kubernetes version changes:

    /usr/bin/python3 scripts/gen_descriptions.py <k8s.io/api git dir> \
        <k8s.io/apimachinery git dir> <k8s.io/kube-aggregator git dir> \
        <k8s.io/apiextensions-apiserver git dir> [tag]

The inputs are git repositories (any clone; the tag defaults to v0.34.0, Kubernetes 1.34). Only
the Go doc comments of the exported types and of their fields are read, and turned into text as
kube's OpenAPI generator does: comment lines joined with spaces, an empty line a paragraph break,
an indented line on a line of its own, `+` generator tags and one-line TODOs dropped, nothing
after a `---` line. The output maps each definition of schema/schemas/builtin.json, and the request options whose
fields are the operations' query parameters (meta/v1 ListOptions, GetOptions, CreateOptions,
UpdateOptions, PatchOptions, DeleteOptions), each kind's list type and meta/v1 Patch, to {"": the type's description, "<json field>":
the field's}; deterministic JSON (sorted keys).
"""

import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILTIN = os.path.join(ROOT, "schema", "schemas", "builtin.json")
OUTPUT = os.path.join(ROOT, "schema", "schemas", "descriptions.json")


def git(repo, *args):
    return subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True,
                          check=True).stdout


def package_sources(repo, tag, directory):
    names = git(repo, "ls-tree", "--name-only", f"{tag}:{directory}").split()
    out = []
    for name in sorted(names):
        if not name.endswith(".go") or name.endswith("_test.go") or name.startswith("zz_generated") \
                or name.startswith("generated.") or name.endswith(".pb.go"):
            continue
        out.append(git(repo, "show", f"{tag}:{directory}/{name}"))
    return out


def description(lines):
    """kube-openapi's generateDescription over comment lines (the `//` and one space removed)."""
    buffer = ""
    for line in lines:
        if line == "---":
            break
        line = line.rstrip(" ")
        leading = line.lstrip(" ")
        if not line:
            buffer = buffer[:-1] if buffer else buffer
            buffer += "\n\n"
        elif leading.startswith("TODO") or leading.startswith("+"):
            continue
        elif line.startswith(" ") or line.startswith("\t"):
            buffer = buffer[:-1] if buffer else buffer
            buffer += "\n" + line + "\n"
        else:
            buffer += line + " "
    return buffer.lstrip("\n").rstrip("\n").strip(" ")


def comment_text(raw):
    text = raw[2:]
    return text[1:] if text.startswith(" ") else text


FIELD = re.compile(r'^\s*(?:(\w+)\s+)?([\w.*\[\]]+)\s+`([^`]*)`\s*$')
JSON_TAG = re.compile(r'json:"([^"]*)"')
IMPORT = re.compile(r'^\s*(\w+)?\s*"([\w./-]+)"\s*$', re.M)
# Go import paths -> the definition prefix of their types.
PREFIXES = {
    "k8s.io/apimachinery/pkg/apis/meta/v1": "io.k8s.apimachinery.pkg.apis.meta.v1.",
    "k8s.io/apimachinery/pkg/runtime": "io.k8s.apimachinery.pkg.runtime.",
}


def prefix_of(import_path):
    if import_path in PREFIXES:
        return PREFIXES[import_path]
    if import_path.startswith("k8s.io/api/"):
        return "io.k8s.api." + import_path[len("k8s.io/api/"):].replace("/", ".") + "."
    return None


def parse(sources, prefix, structs):
    """Every struct of the package into `structs`: name -> {"doc", "fields", "inline"}, the
    inline list naming the (qualified) structs whose fields JSON writes in this one."""
    for source in sources:
        imports = {}
        for alias, path in IMPORT.findall(source):
            imports[alias or path.rsplit("/", 1)[-1]] = path
        lines = source.splitlines()
        comments = []
        i = 0
        while i < len(lines):
            line = lines[i]
            stripped = line.strip()
            empty = re.match(r"^type (\w+) struct\s*\{\s*\}\s*$", line)
            m = re.match(r"^type (\w+) struct \{\s*$", line)
            if empty:
                structs[prefix + empty.group(1)] = {"doc": description(comments), "fields": {},
                                                    "inline": []}
                comments = []
                i += 1
                continue
            if m:
                entry = {"doc": description(comments), "fields": {}, "inline": []}
                structs[prefix + m.group(1)] = entry
                comments = []
                i += 1
                depth = 1
                while i < len(lines) and depth > 0:
                    inner = lines[i]
                    s = inner.strip()
                    if s.startswith("//"):
                        comments.append(comment_text(s))
                    elif s == "":
                        comments = []
                    else:
                        depth += inner.count("{") - inner.count("}")
                        f = FIELD.match(inner)
                        tag = JSON_TAG.search(f.group(3)) if f else None
                        if tag and depth == 1:
                            json_name = tag.group(1).split(",")[0]
                            if not json_name and f.group(1) is None:
                                # An embedded struct written inline.
                                go_type = f.group(2).lstrip("*")
                                if "." in go_type:
                                    alias, type_name = go_type.split(".", 1)
                                    p = prefix_of(imports.get(alias, ""))
                                    if p:
                                        entry["inline"].append(p + type_name)
                                else:
                                    entry["inline"].append(prefix + go_type)
                            elif json_name and json_name != "-":
                                doc = description(comments)
                                if doc:
                                    entry["fields"][json_name] = doc
                        comments = []
                    i += 1
                continue
            # A doc comment is the run of comment lines right above its declaration.
            comments = comments + [comment_text(stripped)] if stripped.startswith("//") else []
            i += 1


def fields_of(name, structs, seen=()):
    """A struct's field descriptions, its inline structs' included (its own win)."""
    entry = structs.get(name)
    if entry is None or name in seen:
        return {}
    out = {}
    for inline in entry["inline"]:
        out.update(fields_of(inline, structs, seen + (name,)))
    out.update(entry["fields"])
    return out


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    api, machinery, aggregator, extensions = sys.argv[1:5]
    tag = sys.argv[5] if len(sys.argv) > 5 else "v0.34.0"
    builtin = json.load(open(BUILTIN))
    wanted = set(builtin["definitions"])
    # Each kind's list type and a PATCH body, which the operations name.
    wanted |= {k["definition"] + "List" for k in builtin["kinds"]}
    wanted.add("io.k8s.apimachinery.pkg.apis.meta.v1.Patch")
    wanted |= {"io.k8s.apimachinery.pkg.apis.meta.v1." + o for o in (
        "ListOptions", "GetOptions", "CreateOptions", "UpdateOptions", "PatchOptions",
        "DeleteOptions")}
    structs = {}
    packages = sorted({name[len("io.k8s.api."):].rsplit(".", 1)[0]
                       for name in wanted if name.startswith("io.k8s.api.")})
    for package in packages:
        directory = package.replace(".", "/")
        parse(package_sources(api, tag, directory), f"io.k8s.api.{package}.", structs)
    parse(package_sources(machinery, tag, "pkg/apis/meta/v1"),
          "io.k8s.apimachinery.pkg.apis.meta.v1.", structs)
    parse(package_sources(machinery, tag, "pkg/runtime"), "io.k8s.apimachinery.pkg.runtime.",
          structs)
    parse(package_sources(aggregator, tag, "pkg/apis/apiregistration/v1"),
          "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.", structs)
    parse(package_sources(extensions, tag, "pkg/apis/apiextensions/v1"),
          "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.", structs)
    out = {}
    for name in sorted(wanted):
        if name not in structs:
            continue
        entry = fields_of(name, structs)
        if structs[name]["doc"]:
            entry[""] = structs[name]["doc"]
        if entry:
            out[name] = entry
    with open(OUTPUT, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True, ensure_ascii=False)
        f.write("\n")
    fields = sum(len(v) for v in out.values())
    print(f"{len(out)} of {len(wanted)} definitions, {fields} descriptions -> {OUTPUT}")


if __name__ == "__main__":
    main()
