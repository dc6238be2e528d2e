"""Issue #30: kube's CBOR form (`application/cbor`; watches `application/cbor-seq`), read with
python3-cbor2 as a CBOR client would read it: every answer is one self-described item (tag
55799); strings are byte strings; a Go []byte (a Secret's data) is its bytes in tag 22; numbers
keep their kind (an integer stays an integer, 1.5 is a half-precision float). Decoded, each
answer equals the JSON answer to the same request: a built-in object, a custom resource, lists
(from the watch cache and from storage), a write's answer, an error's Status, and a watch's
events (each its own self-described item, the object inside tagged too). Bodies written in CBOR
(kube's byte strings or plain text strings) are read; a Secret's tag-22 bytes are kept; a
duplicate key, text that is no UTF-8 and a truncated body are 400. A Table asked for in CBOR is
406, as a form kwatch does not make in CBOR.

Usage: cbor_forms_test.py <path to kwatch-apiserver>
"""
import base64
import http.client
import io
import json
import socket
import time

import cbor2

from crd_test import CRDS, crd
from harness import configmap, run_suite, wait_for

CBOR = "application/cbor"
SELF_DESCRIBED = b"\xd9\xd9\xf7"


def plain(v):
    """A decoded CBOR value as the JSON form has it: byte strings as text, tag 22's bytes as
    base64, the self-described tag removed."""
    if isinstance(v, cbor2.CBORTag):
        if v.tag == 22:
            return base64.b64encode(v.value).decode()
        if v.tag == 55799:
            return plain(v.value)
        return v
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, list):
        return [plain(e) for e in v]
    if isinstance(v, dict):
        return {plain(k): plain(e) for k, e in v.items()}
    return v


def as_kube_cbor(v):
    """`v` with its strings as byte strings, as kube's encoder writes them."""
    if isinstance(v, str):
        return v.encode()
    if isinstance(v, list):
        return [as_kube_cbor(e) for e in v]
    if isinstance(v, dict):
        return {k.encode(): as_kube_cbor(e) for k, e in v.items()}
    return v


def exchange(server, method, path, accept, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        headers = {"Accept": accept}
        data = None
        if body is not None:
            data = json.dumps(body)
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.getheader("Content-Type", ""), resp.read()
    finally:
        conn.close()


def both(server, path):
    """(JSON answer, CBOR answer's raw bytes, its content type) of one GET."""
    _, _, j = exchange(server, "GET", path, "application/json")
    status, kind, c = exchange(server, "GET", path, CBOR)
    return json.loads(j), status, kind, c


def same_list(a, b):
    """Two lists' items by name, and their kind and resourceVersion."""
    names = lambda lst: {i["metadata"]["name"]: i for i in lst.get("items", [])}
    return (a.get("kind") == b.get("kind") and names(a) == names(b)
            and a["metadata"].get("resourceVersion") == b["metadata"].get("resourceVersion"))


def watch_events(server, path, count, act, timeout=10):
    """Opens a CBOR watch over a raw HTTP/1.1 connection, runs act(), and decodes the chunked
    cbor-seq body until `count` items came: (head lines, items, raw body)."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=timeout)
    sock.sendall((f"GET {path} HTTP/1.1\r\nHost: x\r\nAccept: {CBOR}\r\n\r\n").encode())
    raw = b""
    while b"\r\n\r\n" not in raw:
        raw += sock.recv(65536)
    head, raw = raw.split(b"\r\n\r\n", 1)
    act()
    body = b""
    items = []
    deadline = time.monotonic() + timeout
    while len(items) < count and time.monotonic() < deadline:
        # Whole chunks out of `raw` into `body`.
        while True:
            line_end = raw.find(b"\r\n")
            if line_end < 0:
                break
            size = int(raw[:line_end].split(b";")[0], 16)
            if len(raw) < line_end + 2 + size + 2:
                break
            body += raw[line_end + 2:line_end + 2 + size]
            raw = raw[line_end + 2 + size + 2:]
        decoder = cbor2.CBORDecoder(io.BytesIO(body))
        items = []
        while True:
            try:
                start = decoder.fp.tell()
                item = decoder.decode()
                items.append((body[start:decoder.fp.tell()], item))
            except (cbor2.CBORDecodeEOF, EOFError):
                break
        if len(items) >= count:
            break
        try:
            data = sock.recv(65536)
        except socket.timeout:
            break
        if not data:
            break
        raw += data
    sock.close()
    return head.decode("latin-1").split("\r\n"), items, body


def checks_of(t, server, tmp):
    ns = "default"
    cms = f"/api/v1/namespaces/{ns}/configmaps"
    status, _ = server.request("POST", cms, configmap("cb1", {"a": "1", "b": "two"}))
    t.check("configmap created", status == 201, status)

    # One built-in object.
    j, status, kind, c = both(server, f"{cms}/cb1")
    t.check("GET in CBOR: 200 application/cbor", status == 200 and kind == CBOR, (status, kind))
    t.check("GET in CBOR: one self-described item", c.startswith(SELF_DESCRIBED), c[:8])
    decoded = cbor2.loads(c)
    t.check("GET in CBOR: strings are byte strings",
            isinstance(decoded, dict) and all(isinstance(k, bytes) for k in decoded), decoded)
    t.check("GET in CBOR equals the JSON answer", plain(decoded) == j, (plain(decoded), j))

    # A Secret's data: bytes in tag 22.
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "sb1"},
              "type": "Opaque", "data": {"k": base64.b64encode(b"\x00\x01value").decode()}}
    status, _ = server.request("POST", f"/api/v1/namespaces/{ns}/secrets", secret)
    t.check("secret created", status == 201, status)
    j, status, kind, c = both(server, f"/api/v1/namespaces/{ns}/secrets/sb1")
    decoded = cbor2.loads(c)
    data = decoded.get(b"data", {}).get(b"k") if isinstance(decoded, dict) else None
    t.check("a Secret's data is its bytes in tag 22",
            isinstance(data, cbor2.CBORTag) and data.tag == 22 and data.value == b"\x00\x01value",
            data)
    t.check("the Secret in CBOR equals the JSON answer", plain(decoded) == j)
    # From the cache (each object's kept CBOR) and in a watch, the bytes are bytes too.
    status, _, c = exchange(server, "GET", f"/api/v1/namespaces/{ns}/secrets?resourceVersion=0",
                            CBOR)
    items = cbor2.loads(c).get(b"items", []) if status == 200 else []
    data = [i.get(b"data", {}).get(b"k") for i in items
            if i.get(b"metadata", {}).get(b"name") == b"sb1"]
    t.check("a Secret listed from the cache in CBOR: its data in tag 22",
            len(data) == 1 and isinstance(data[0], cbor2.CBORTag) and data[0].tag == 22
            and data[0].value == b"\x00\x01value", data)
    _, events, _ = watch_events(server, f"/api/v1/namespaces/{ns}/secrets?watch=1&resourceVersion=0",
                                1, lambda: None)
    data = [e.get(b"object", {}).get(b"data", {}).get(b"k") for _, e in events]
    t.check("a Secret watched in CBOR: its data in tag 22",
            any(isinstance(d, cbor2.CBORTag) and d.tag == 22 and d.value == b"\x00\x01value"
                for d in data), data)

    # Lists: from the watch cache (resourceVersion=0) and from storage (a limit).
    for query in ("?resourceVersion=0", "", "?limit=1"):
        j, status, kind, c = both(server, cms + query)
        decoded = plain(cbor2.loads(c)) if status == 200 else None
        t.check(f"LIST{query} in CBOR equals the JSON list",
                status == 200 and kind == CBOR and decoded is not None and same_list(decoded, j),
                (status, kind, decoded, j))

    # A write's answer, in CBOR.
    status, kind, c = exchange(server, "POST", cms, CBOR, configmap("cb2"))
    created = plain(cbor2.loads(c)) if status == 201 else None
    t.check("a create answered in CBOR", status == 201 and kind == CBOR and created
            and created["metadata"]["name"] == "cb2", (status, kind, created))

    # An error's Status.
    status, kind, c = exchange(server, "GET", f"{cms}/missing", CBOR)
    st = plain(cbor2.loads(c)) if c.startswith(SELF_DESCRIBED) else None
    t.check("a 404 is a Status in CBOR",
            status == 404 and kind == CBOR and st and st.get("kind") == "Status"
            and st.get("code") == 404 and st.get("reason") == "NotFound", (status, kind, st))

    # A custom resource: integers stay integers, 1.5 is half precision.
    schema = {"type": "object", "properties": {"spec": {
        "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}
    status, _ = server.request("POST", CRDS, crd(schema=schema))
    t.check("CRD created", status == 201, status)
    wait_for(lambda: server.request("GET", "/apis/example.org/v1")[0] == 200, timeout=10,
             what="the CRD served")
    things = f"/apis/example.org/v1/namespaces/{ns}/things"
    thing = {"apiVersion": "example.org/v1", "kind": "Thing", "metadata": {"name": "t1"},
             "spec": {"count": 2, "ratio": 1.5, "single": 100000.5, "big": 100000.1,
                      "on": True, "none": None,
                      "list": ["a", 3]}}
    status, _ = server.request("POST", things, thing)
    t.check("custom resource created", status == 201, status)
    j, status, kind, c = both(server, f"{things}/t1")
    decoded = cbor2.loads(c)
    t.check("a custom resource in CBOR equals the JSON answer",
            status == 200 and plain(decoded) == j, (status, plain(decoded), j))
    spec = decoded.get(b"spec", {}) if isinstance(decoded, dict) else {}
    t.check("an integer stays an integer", type(spec.get(b"count")) is int, spec)
    t.check("1.5 is written in half precision", b"\x45ratio\xf9\x3e\x00" in c, c.hex())
    t.check("100000.5 is written in single precision", b"\x46single\xfa" in c, c.hex())
    t.check("100000.1 keeps double precision",
            b"\x43big\xfb" in c and spec.get(b"big") == 100000.1, c.hex())
    j, status, kind, c = both(server, things + "?resourceVersion=0")
    t.check("a custom resource list in CBOR equals the JSON list",
            status == 200 and same_list(plain(cbor2.loads(c)), j), status)

    # A watch: application/cbor-seq, one self-described item per event.
    existing = len(server.request("GET", cms)[1]["items"])
    head, items, body = watch_events(
        server, f"{cms}?watch=1&resourceVersion=0", existing + 1,
        lambda: server.request("POST", cms, configmap("cb3", {"z": "9"})))
    content_type = next((h.split(":", 1)[1].strip() for h in head
                         if h.lower().startswith("content-type:")), "")
    t.check("a CBOR watch is application/cbor-seq", content_type == "application/cbor-seq",
            head)
    t.check("each event is one self-described item, the object inside tagged too",
            len(items) >= existing + 1 and all(raw.startswith(SELF_DESCRIBED) and
                                    SELF_DESCRIBED in raw[3:] for raw, _ in items),
            [raw[:24].hex() for raw, _ in items])
    events = [plain(item) for _, item in items]
    names = [(e.get("type"), e.get("object", {}).get("metadata", {}).get("name"))
             for e in events]
    t.check("the watch's events: the initial ADDED ones, then the new object's",
            ("ADDED", "cb1") in names and ("ADDED", "cb2") in names and ("ADDED", "cb3") in names,
            names)
    _, _, cb3 = exchange(server, "GET", f"{cms}/cb3", "application/json")
    t.check("a watched object equals its JSON form",
            any(e.get("object") == json.loads(cb3) for e in events), events[-1:])

    # Bodies in CBOR, as kube's encoder writes them (strings as byte strings, a Secret's data
    # in tag 22) and as other encoders do (text strings).
    def post_cbor(path, payload):
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        conn.request("POST", path, body=payload,
                     headers={"Content-Type": CBOR, "Accept": "application/json"})
        resp = conn.getresponse()
        answer = json.loads(resp.read() or b"{}")
        conn.close()
        return resp.status, answer

    status, _ = post_cbor(cms, SELF_DESCRIBED + cbor2.dumps(as_kube_cbor(configmap("cb4", {"k": "v"}))))
    got = server.request("GET", f"{cms}/cb4")[1]
    t.check("a ConfigMap written in CBOR (byte strings) reads back as sent",
            status == 201 and got.get("data") == {"k": "v"}, (status, got))
    status, _ = post_cbor(cms, cbor2.dumps(configmap("cb5", {"k": "text"})))
    got = server.request("GET", f"{cms}/cb5")[1]
    t.check("... and one in text strings, without the self-described tag",
            status == 201 and got.get("data") == {"k": "text"}, (status, got))
    raw = b"\x00\xffbinary"
    secret = as_kube_cbor({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "sb2"},
                           "type": "Opaque"})
    secret[b"data"] = {b"k": cbor2.CBORTag(22, raw)}
    status, _ = post_cbor(f"/api/v1/namespaces/{ns}/secrets", SELF_DESCRIBED + cbor2.dumps(secret))
    got = server.request("GET", f"/api/v1/namespaces/{ns}/secrets/sb2")[1]
    t.check("a Secret written in CBOR keeps its bytes (base64 in JSON)",
            status == 201 and got.get("data") == {"k": base64.b64encode(raw).decode()},
            (status, got))
    dup = (SELF_DESCRIBED + b"\xa3" + cbor2.dumps(b"apiVersion") + cbor2.dumps(b"v1") +
           cbor2.dumps(b"kind") + cbor2.dumps(b"ConfigMap") +
           cbor2.dumps(b"kind") + cbor2.dumps(b"ConfigMap"))
    status, answer = post_cbor(cms, dup)
    t.check("a CBOR body with a duplicate map key: 400", status == 400 and
            "duplicate map key" in answer.get("message", ""), (status, answer))
    bad = as_kube_cbor(configmap("cb6"))
    bad[b"data"] = {b"k": b"\xff\xfe"}
    status, answer = post_cbor(cms, SELF_DESCRIBED + cbor2.dumps(bad))
    t.check("a CBOR byte string that is no UTF-8 where text belongs: 400", status == 400,
            (status, answer))
    status, answer = post_cbor(cms, SELF_DESCRIBED + b"\xa1")
    t.check("a truncated CBOR body: 400", status == 400 and "cbor" in answer.get("message", ""),
            (status, answer))

    # Forms kwatch does not make in CBOR: a Table.
    status, _, _ = exchange(server, "GET", cms, f"{CBOR};as=Table;g=meta.k8s.io;v=v1")
    t.check("a Table in CBOR is 406", status == 406, status)
    status, kind, _ = exchange(server, "GET", cms,
                               f"{CBOR};as=Table;g=meta.k8s.io;v=v1, application/json")
    t.check("... and the next form the client accepts is served",
            status == 200 and kind.startswith("application/json"), (status, kind))


if __name__ == "__main__":
    run_suite(checks_of)
