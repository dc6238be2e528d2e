"""Every field of every built-in kind kwatch validates and stores has a protobuf field in the
wire table (schema/schemas/protobuf.json): otherwise a valid object would have no protobuf form,
and a protobuf watch of its kind would end at its event (server/http_server.cpp). Inline members
(a Volume's source) count as their message's fields; apiVersion and kind travel in the envelope.
Definitions without any message (the webhook configurations) are served as JSON and skipped.

Usage: protobuf_coverage_test.py <path to schema/schemas>
"""
import json
import os
import re
import sys


def message_name(definition):
    m = re.match(r"io\.k8s\.api\.([a-z0-9]+)\.(v[0-9a-z]+)\.(\w+)$", definition)
    if m:
        return f"{m.group(1)}/{m.group(2)}.{m.group(3)}"
    m = re.match(r"io\.k8s\.apimachinery\.pkg\.apis\.meta\.v1\.(\w+)$", definition)
    return f"meta/v1.{m.group(1)}" if m else None


def main():
    schemas = sys.argv[1]
    with open(os.path.join(schemas, "builtin.json")) as f:
        definitions = json.load(f)["definitions"]
    with open(os.path.join(schemas, "protobuf.json")) as f:
        messages = json.load(f)["messages"]

    def names(message):
        out = set()
        for number, name, kind, flags, of in messages[message]:
            if name == "" and of in messages:
                out |= names(of)  # inline
            else:
                out.add(name)
        return out

    checked, gaps = 0, []
    for definition, spec in sorted(definitions.items()):
        message = message_name(definition)
        if message is None or message not in messages:
            continue
        checked += 1
        known = names(message)
        gaps += [f"{message}.{field}" for field in spec.get("fields", {})
                 if field not in known and field not in ("apiVersion", "kind")]
    print(f"{checked} messages checked against the built-in schema")
    if checked < 300 or gaps:
        print("fields without a protobuf field:", gaps or "(too few messages checked)")
        sys.exit(1)
    print("ok   every field of the built-in kinds has its protobuf field")


if __name__ == "__main__":
    main()
