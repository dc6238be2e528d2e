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
after a `---` line. The output maps each definition of schema/schemas/builtin.json to
{"": the type's description, "<json field>": the field's}; deterministic JSON (sorted keys).
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


FIELD = re.compile(r'^\s*(?:(\w+)\s+)?[\w.*\[\]]+\s+`([^`]*)`\s*$')
JSON_TAG = re.compile(r'json:"([^"]*)"')


def parse(sources, prefix, wanted, out):
    for source in sources:
        lines = source.splitlines()
        comments = []
        i = 0
        while i < len(lines):
            line = lines[i]
            stripped = line.strip()
            m = re.match(r"^type (\w+) struct \{\s*$", line)
            if m:
                name = prefix + m.group(1)
                type_doc = description(comments)
                comments = []
                fields = {}
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
                        tag = JSON_TAG.search(f.group(2)) if f else None
                        if tag and depth == 1:
                            json_name = tag.group(1).split(",")[0]
                            if json_name and json_name != "-":
                                doc = description(comments)
                                if doc:
                                    fields[json_name] = doc
                        comments = []
                    i += 1
                if name in wanted:
                    entry = dict(fields)
                    if type_doc:
                        entry[""] = type_doc
                    if entry:
                        out[name] = entry
                continue
            # A doc comment is the run of comment lines right above its declaration.
            comments = comments + [comment_text(stripped)] if stripped.startswith("//") else []
            i += 1


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    api, machinery, aggregator, extensions = sys.argv[1:5]
    tag = sys.argv[5] if len(sys.argv) > 5 else "v0.34.0"
    wanted = set(json.load(open(BUILTIN))["definitions"])
    out = {}
    packages = sorted({name[len("io.k8s.api."):].rsplit(".", 1)[0]
                       for name in wanted if name.startswith("io.k8s.api.")})
    for package in packages:
        directory = package.replace(".", "/")
        parse(package_sources(api, tag, directory), f"io.k8s.api.{package}.", wanted, out)
    parse(package_sources(machinery, tag, "pkg/apis/meta/v1"),
          "io.k8s.apimachinery.pkg.apis.meta.v1.", wanted, out)
    parse(package_sources(machinery, tag, "pkg/runtime"), "io.k8s.apimachinery.pkg.runtime.",
          wanted, out)
    parse(package_sources(aggregator, tag, "pkg/apis/apiregistration/v1"),
          "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.", wanted, out)
    parse(package_sources(extensions, tag, "pkg/apis/apiextensions/v1"),
          "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.", wanted, out)
    with open(OUTPUT, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True, ensure_ascii=False)
        f.write("\n")
    fields = sum(len(v) for v in out.values())
    print(f"{len(out)} of {len(wanted)} definitions, {fields} descriptions -> {OUTPUT}")


if __name__ == "__main__":
    main()
