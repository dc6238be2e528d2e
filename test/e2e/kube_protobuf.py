"""kube's protobuf wire form of built-in objects, as a test reads it: .proto definitions written
from the field numbers of kube's generated.proto files (kwatch's schema/schemas/protobuf.json
lists them per message: number, JSON name, kind, flags, reference), compiled by protoc, and
Python's protobuf runtime (python3-protobuf) to decode and encode with them.

What is checked with it is the wire form, field by field, against the JSON form of the same
object: to_json() turns a decoded message into what kube's JSON has for it (times as RFC 3339
text, quantities as strings, RawExtension as the JSON it holds, inlined structs in their
parent), and from_json() goes the other way for writes.
"""
import base64
import datetime
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TABLE = os.path.join(ROOT, "schema", "schemas", "protobuf.json")
PACKAGE = "kwatchtest"

# flags of a field in the table
REPEATED, KEEP_ZERO, INLINE, OMITEMPTY, WRITTEN_WHEN_ZERO = 1, 2, 4, 8, 16

# The messages kube's apimachinery defines (meta/v1, runtime, resource, intstr), by their
# generated.proto field numbers; the table refers to them by kind.
FIXED = """
message Time { optional int64 seconds = 1; optional int32 nanos = 2; }
message MicroTime { optional int64 seconds = 1; optional int32 nanos = 2; }
message Quantity { optional string string = 1; }
message IntOrString { optional int64 type = 1; optional int32 intVal = 2; optional string strVal = 3; }
message RawExtension { optional bytes raw = 1; }
message ExtraValue { repeated string items = 1; }
message TypeMeta { optional string apiVersion = 1; optional string kind = 2; }
message Unknown {
  optional TypeMeta typeMeta = 1; optional bytes raw = 2;
  optional string contentEncoding = 3; optional string contentType = 4;
}
message ListMeta {
  optional string selfLink = 1; optional string resourceVersion = 2;
  optional string continue = 3; optional int64 remainingItemCount = 4;
}
message WatchEvent { optional string type = 1; optional RawExtension object = 2; }
"""

SCALARS = {"string": "string", "bytes": "bytes", "int32": "int32", "int64": "int64",
           "boolean": "bool"}
KIND_MESSAGES = {"time": "Time", "micro_time": "MicroTime", "quantity": "Quantity",
                 "int_or_string": "IntOrString", "raw_json": "RawExtension",
                 "string_list": "ExtraValue"}


def message_name(table_name):
    """core/v1.Pod -> core_v1_Pod (one package: only the wire form matters)."""
    return table_name.replace("/", "_").replace(".", "_")


def field_name(field):
    number, name, kind, flags, ref = field
    if name:
        return name if name != "continue" else "continue_"
    return "inline_" + ref.rsplit(".", 1)[-1]  # an inlined struct: JSON names none


def value_type(kind, ref):
    if kind in SCALARS:
        return SCALARS[kind]
    if kind in KIND_MESSAGES:
        return KIND_MESSAGES[kind]
    if kind == "message":
        return message_name(ref)
    raise ValueError(f"no protobuf type for kind {kind}")


def proto_text(table):
    """One .proto file (proto2, like kube's) for every message of the table, and a List of each
    kind the table serves (ListMeta 1, items 2, as kube's are)."""
    out = ['syntax = "proto2";', f"package {PACKAGE};", FIXED]
    for name, fields in sorted(table["messages"].items()):
        out.append(f"message {message_name(name)} {{")
        for field in fields:
            number, _, kind, flags, ref = field
            if kind == "map":
                inner = value_type(ref, "") if ref in SCALARS or ref in KIND_MESSAGES \
                    else message_name(ref)
                out.append(f"  map<string, {inner}> {field_name(field)} = {number};")
                continue
            label = "repeated" if flags & REPEATED else "optional"
            out.append(f"  {label} {value_type(kind, ref)} {field_name(field)} = {number};")
        out.append("}")
    for kind_key, name in sorted(table["kinds"].items()):
        if kind_key.startswith("*/"):
            continue
        out.append(f"message {message_name(name)}List {{ optional ListMeta metadata = 1; "
                   f"repeated {message_name(name)} items = 2; }}")
    return "\n".join(out) + "\n"


class Definitions:
    """The compiled definitions: message classes by table name, protoc for --decode."""

    def __init__(self, directory):
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
        with open(TABLE) as f:
            self.table = json.load(f)
        self.kind_messages = set(self.table["kinds"].values())
        self.directory = directory
        self.proto = os.path.join(directory, "kube.proto")
        with open(self.proto, "w") as f:
            f.write(proto_text(self.table))
        descriptors = os.path.join(directory, "kube.pb")
        subprocess.run(["protoc", f"--proto_path={directory}", f"--descriptor_set_out={descriptors}",
                        self.proto], check=True, capture_output=True)
        files = descriptor_pb2.FileDescriptorSet()
        with open(descriptors, "rb") as f:
            files.ParseFromString(f.read())
        self.pool = descriptor_pool.DescriptorPool()
        for fd in files.file:
            self.pool.Add(fd)
        self.factory = message_factory.MessageFactory(self.pool)

    def cls(self, proto_name):
        return self.factory.GetPrototype(self.pool.FindMessageTypeByName(f"{PACKAGE}.{proto_name}"))

    def kind_message(self, api_version, kind):
        """The table's message of apiVersion/kind, or None (no protobuf form)."""
        return self.table["kinds"].get(f"{api_version}/{kind}")

    def decode(self, proto_name, data):
        m = self.cls(proto_name)()
        m.ParseFromString(data)
        return m

    def protoc_decode(self, proto_name, data):
        """protoc --decode's text of data as proto_name: (exit code, text)."""
        p = subprocess.run(["protoc", f"--proto_path={self.directory}",
                            f"--decode={PACKAGE}.{proto_name}", self.proto],
                           input=data, capture_output=True, timeout=60)
        return p.returncode, p.stdout.decode(errors="replace") + p.stderr.decode(errors="replace")

    # ---- the envelope kube writes around an object: "k8s\0" + Unknown

    def unwrap(self, body):
        """(apiVersion, kind, raw object bytes) of a protobuf answer, or None."""
        if not isinstance(body, bytes) or body[:4] != b"k8s\x00":
            return None
        u = self.cls("Unknown")()
        u.ParseFromString(body[4:])
        return u.typeMeta.apiVersion, u.typeMeta.kind, u.raw

    def wrap(self, api_version, kind, raw):
        u = self.cls("Unknown")()
        u.typeMeta.apiVersion = api_version
        u.typeMeta.kind = kind
        u.raw = raw
        return b"k8s\x00" + u.SerializeToString()

    # ---- decoded message -> kube's JSON, and back

    def fields(self, table_name):
        return self.table["messages"][table_name]

    def is_kind(self, table_name):
        """Whether table_name is a kind's message (its Go type embeds TypeMeta)."""
        return table_name in self.kind_messages

    def to_json(self, table_name, message):
        """What kube's JSON form holds for `message` (of the table's message table_name)."""
        out = {}
        for field in self.fields(table_name):
            number, name, kind, flags, ref = field
            attr = field_name(field)
            # An empty list or map is Go's nil once decoded: JSON omits it or writes null.
            if kind == "map":
                value = getattr(message, attr)
                if len(value):
                    out[name] = {k: self.scalar_to_json(ref, ref, v) if ref in SCALARS or
                                 ref in KIND_MESSAGES else self.to_json(ref, v)
                                 for k, v in value.items()}
                elif not flags & OMITEMPTY:
                    out[name] = None
                continue
            if flags & REPEATED:
                items = getattr(message, attr)
                if len(items):
                    out[name] = [self.value_to_json(kind, ref, v) for v in items]
                elif not flags & OMITEMPTY:
                    out[name] = None
                continue
            if not message.HasField(attr):
                continue
            value = self.value_to_json(kind, ref, getattr(message, attr))
            if flags & INLINE:
                out.update(value)
            else:
                out[name] = value
        return out

    def value_to_json(self, kind, ref, value):
        if kind == "message":
            return self.to_json(ref, value)
        return self.scalar_to_json(kind, ref, value)

    @staticmethod
    def scalar_to_json(kind, ref, value):
        if kind in ("string", "int32", "int64", "boolean"):
            return value
        if kind == "bytes":
            return base64.b64encode(value).decode()
        if kind == "time":
            t = datetime.datetime.fromtimestamp(value.seconds, datetime.timezone.utc)
            return t.strftime("%Y-%m-%dT%H:%M:%SZ")
        if kind == "micro_time":
            t = datetime.datetime.fromtimestamp(value.seconds, datetime.timezone.utc)
            return t.strftime("%Y-%m-%dT%H:%M:%S") + f".{value.nanos // 1000:06d}Z"
        if kind == "quantity":
            return value.string
        if kind == "int_or_string":
            return value.intVal if value.type == 0 else value.strVal
        if kind == "raw_json":
            return json.loads(value.raw) if value.raw else None
        if kind == "string_list":
            return list(value.items)
        raise ValueError(kind)

    def from_json(self, table_name, obj, message):
        """Fills `message` from kube's JSON form `obj` (a write in protobuf)."""
        for field in self.fields(table_name):
            number, name, kind, flags, ref = field
            attr = field_name(field)
            if flags & INLINE:
                self.from_json(ref, obj, getattr(message, attr))
                continue
            if name not in obj or obj[name] is None:
                continue
            value = obj[name]
            if kind == "map":
                target = getattr(message, attr)
                for k, v in value.items():
                    if ref in SCALARS:
                        target[k] = base64.b64decode(v) if ref == "bytes" else v
                    elif ref in KIND_MESSAGES:
                        self.scalar_from_json(ref, v, target[k])
                    else:
                        self.from_json(ref, v, target[k])
                continue
            if flags & REPEATED:
                target = getattr(message, attr)
                for v in value:
                    if kind == "message":
                        self.from_json(ref, v, target.add())
                    elif kind in SCALARS:
                        target.append(v)
                    else:
                        self.scalar_from_json(kind, v, target.add())
                continue
            if kind == "message":
                self.from_json(ref, value, getattr(message, attr))
                getattr(message, attr).SetInParent()
            elif kind == "bytes":
                setattr(message, attr, base64.b64decode(value))
            elif kind in SCALARS:
                setattr(message, attr, value)
            else:
                self.scalar_from_json(kind, value, getattr(message, attr))

    @staticmethod
    def scalar_from_json(kind, value, target):
        if kind in ("time", "micro_time"):
            text = value.rstrip("Z")
            whole, _, fraction = text.partition(".")
            t = datetime.datetime.strptime(whole, "%Y-%m-%dT%H:%M:%S").replace(
                tzinfo=datetime.timezone.utc)
            target.seconds = int(t.timestamp())
            if fraction:
                target.nanos = int(fraction.ljust(9, "0")[:9])
        elif kind == "quantity":
            target.string = str(value)
        elif kind == "int_or_string":
            if isinstance(value, int):
                target.type, target.intVal = 0, value
            else:
                target.type, target.strVal = 1, value
        elif kind == "raw_json":
            target.raw = json.dumps(value, separators=(",", ":")).encode()
        elif kind == "string_list":
            target.items.extend(value)
        else:
            raise ValueError(kind)
