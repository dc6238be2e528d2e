"""A corpus of bad requests: each must get a Kubernetes Status with the right code, never a crash.

Usage: bad_input_test.py <path to kwatch-apiserver>
"""
import http.client
import json
import socket
import sys

from harness import Checks, Server, TempDir

CM = "/api/v1/namespaces/default/configmaps"


def configmap(name, **extra):
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"a": "1"}}
    obj["metadata"].update(extra)
    return obj


def main():
    binary = sys.argv[1]
    t = Checks()
    with TempDir() as tmp:
        server = Server(binary, data_dir=tmp + "/data").start()
        try:
            def expect(name, method, path, code, reason=None, body=None, headers=None):
                status, resp = server.request(method, path, body=body, headers=headers)
                ok = status == code and isinstance(resp, dict) and resp.get("kind") == "Status" \
                    and resp.get("code") == code and resp.get("status") == "Failure"
                if reason is not None:
                    ok = ok and resp.get("reason") == reason
                t.check(f"{name} -> {code}", ok, f"got {status} {resp!r}"[:600])
                return resp

            status, _ = server.request("POST", CM, body=configmap("base"))
            t.check("setup: create base configmap", status == 201)

            # Accept: what kwatch cannot produce is 406; YAML is produced
            for accept in ("application/xml", "text/html"):
                expect(f"Accept: {accept}", "GET", CM, 406, "NotAcceptable",
                       headers={"Accept": accept})
            # Protobuf alone for what has no protobuf form here (CustomResourceDefinitions).
            expect("Accept: protobuf for a list without a protobuf form", "GET",
                   "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", 406, "NotAcceptable",
                   headers={"Accept": "application/vnd.kubernetes.protobuf"})
            expect("a watch as YAML", "GET", CM + "?watch=true", 406, "NotAcceptable",
                   headers={"Accept": "application/yaml"})
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
            conn.request("GET", CM + "/base", headers={"Accept": "application/yaml"})
            resp = conn.getresponse()
            text = resp.read().decode()
            conn.close()
            _, as_json = server.request("GET", CM + "/base")
            try:
                import yaml
                same = yaml.safe_load(text) == as_json
            except ImportError:
                same = "name: base" in text
            t.check("Accept: application/yaml answers with the same object as YAML",
                    resp.status == 200 and resp.getheader("Content-Type") == "application/yaml"
                    and same, text[:300])

            # People's tools get indented JSON, as kube-apiserver answers them; programs do not.
            def raw_get(path, agent):
                c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
                c.request("GET", path, headers={"User-Agent": agent})
                r = c.getresponse()
                body = r.read().decode()
                c.close()
                return body
            def indented(body):
                return body.startswith('{\n  "') and body.count("\n") > 3

            pretty = raw_get(CM + "/base", "curl/8.5.0")
            t.check("curl gets indented JSON", indented(pretty) and '": "' in pretty
                    and json.loads(pretty)["metadata"]["name"] == "base", pretty[:200])
            listed = raw_get(CM, "Wget/1.21.3")
            t.check("a list for Wget too", indented(listed) and json.loads(listed)["items"],
                    listed[:200])
            t.check("?pretty=false wins over the user agent",
                    "\n" not in raw_get(CM + "/base?pretty=false", "curl/8.5.0").strip())
            t.check("?pretty=true for any client",
                    indented(raw_get(CM + "/base?pretty=true", "kubectl/v1.32")))
            t.check("a program gets compact JSON",
                    "\n" not in raw_get(CM + "/base", "kubectl/v1.32.4 (linux/amd64)").strip())
            missing = raw_get(CM + "/nothing", "curl/8.5.0")
            t.check("errors are indented too", indented(missing), missing[:200])

            # Malformed bodies
            for i, raw in enumerate(['{', '[]', '"text"', '{"a":1}}', '\x00\xff\xfe',
                                     '{"metadata": 5}', '[' * 10000 + ']' * 10000]):
                expect(f"malformed body #{i}", "POST", CM, 400, "BadRequest", body=raw,
                       headers={"Content-Type": "application/json"})
            # In kube-apiserver's words: what Go's decoder says, and how the body starts.
            resp = expect("a body that does not decode", "POST", CM, 400, "BadRequest",
                          body='{"metadata": {"name": "x"}, bad}',
                          headers={"Content-Type": "application/json"})
            t.check("... says why as kube does",
                    resp.get("message") == "the object provided is unrecognized (must be of type "
                    "ConfigMap): couldn't get version/kind; json parse error: invalid character "
                    "'b' looking for beginning of object key string "
                    "({\"metadata\": {\"name\": \"x\"}, ba ...)", resp.get("message"))
            resp = expect("a body that is no object", "POST", CM, 400, "BadRequest", body="[1]",
                          headers={"Content-Type": "application/json"})
            t.check("... says so in Go's words",
                    resp.get("message", "").endswith("json: cannot unmarshal array into Go value of "
                                                     "type struct { APIVersion string \"json:\\\"api"
                                                     "Version,omitempty\\\"\"; Kind string \"json:"
                                                     "\\\"kind,omitempty\\\"\" } (5b315d)"),
                    resp.get("message"))
            # `null` decodes into Go's zero object: one without a name.
            expect("a null body", "POST", CM, 422, "Invalid", body="null",
                   headers={"Content-Type": "application/json"})
            expect("empty body", "POST", CM, 400, "BadRequest", body="",
                   headers={"Content-Type": "application/json"})
            expect("yaml body", "POST", CM, 415, "UnsupportedMediaType", body="a: b",
                   headers={"Content-Type": "application/yaml"})
            expect("garbage protobuf", "POST", CM, 400, "BadRequest", body="k8s\x00\x0a\xff",
                   headers={"Content-Type": "application/vnd.kubernetes.protobuf"})
            expect("protobuf without magic", "POST", CM, 400, "BadRequest", body="\x0a\x00",
                   headers={"Content-Type": "application/vnd.kubernetes.protobuf"})
            expect("wrong kind", "POST", CM, 400, "BadRequest",
                   body={"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}})
            expect("wrong apiVersion", "POST", CM, 400, "BadRequest",
                   body={"apiVersion": "apps/v1", "kind": "ConfigMap", "metadata": {"name": "x"}})
            expect("namespace mismatch", "POST", CM, 400, "BadRequest",
                   body=configmap("x", namespace="other"))
            expect("resourceVersion on create", "POST", CM, 400, "BadRequest",
                   body=configmap("x", resourceVersion="5"))
            r = expect("invalid name", "POST", CM, 422, "Invalid", body=configmap("Bad_Name"))
            t.check("invalid name has a metadata.name cause",
                    any(c.get("field") == "metadata.name"
                        for c in (r or {}).get("details", {}).get("causes", [])), r)
            expect("missing name", "POST", CM, 422, "Invalid", body=configmap(""))
            expect("invalid label key", "POST", CM, 422, "Invalid",
                   body=configmap("x", labels={"bad key!": "v"}))
            expect("invalid label value", "POST", CM, 422, "Invalid",
                   body=configmap("x", labels={"k": "-bad-"}))
            expect("labels not an object", "POST", CM, 422, "Invalid",
                   body=configmap("x", labels=["a"]))
            expect("pod without containers", "POST", "/api/v1/namespaces/default/pods", 422,
                   "Invalid", body={"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                                    "spec": {}})
            expect("missing namespace", "POST", "/api/v1/namespaces/nope/configmaps", 404,
                   "NotFound", body=configmap("x"))
            expect("body too large", "POST", CM, 413, None,
                   body=json.dumps(configmap("big")).replace('"1"', '"' + "x" * (4 << 20) + '"'),
                   headers={"Content-Type": "application/json"})

            # Bad parameters
            for name, query in [("limit not a number", "limit=abc"), ("negative limit", "limit=-1"),
                                ("bad label selector", "labelSelector=a%20in%20("),
                                ("bad label selector op", "labelSelector=a%3D%3D%3Db"),
                                ("unsupported field", "fieldSelector=spec.foo%3Dbar"),
                                ("bad field selector", "fieldSelector=metadata.name"),
                                ("garbage continue", "continue=%%%%"),
                                ("undecodable continue", "continue=bm90LWpzb24"),
                                ("bad resourceVersion", "resourceVersion=abc"),
                                ("bad resourceVersionMatch",
                                 "resourceVersion=1&resourceVersionMatch=Bogus"),
                                ("match without resourceVersion", "resourceVersionMatch=Exact"),
                                ("continue with resourceVersion",
                                 "continue=eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MSwic3RhcnQiOiJ4In0&resourceVersion=5")]:
                expect(name, "GET", f"{CM}?{query}", 400, "BadRequest")
            expect("bad dryRun", "POST", f"{CM}?dryRun=Maybe", 400, "BadRequest",
                   body=configmap("x"))
            expect("bad fieldValidation", "POST", f"{CM}?fieldValidation=Loose", 400, "BadRequest",
                   body=configmap("x"))

            # Unknown paths and methods
            for path in ["/api/v2/pods", "/apis/nope/v1/things", "/api/v1/namespaces/default/nope",
                         "/api/v1/namespaces/default/nodes", "/api/v1/namespaces/default/pods/a/b/c",
                         "/nothing", "/api/v1/namespaces/default/configmaps/x/bogus"]:
                expect(f"unknown path {path}", "GET", path, 404, "NotFound")
            expect("malformed escape in path", "GET", "/api/v1/namespaces/%zz/configmaps", 400,
                   "BadRequest")
            expect("POST to a named object", "POST", f"{CM}/base", 405, "MethodNotAllowed",
                   body=configmap("base"))
            expect("PUT to a collection", "PUT", CM, 405, "MethodNotAllowed", body=configmap("base"))
            expect("create without namespace", "POST", "/api/v1/configmaps", 405,
                   "MethodNotAllowed", body=configmap("x"))
            expect("unsupported method", "OPTIONS", CM, 405, "MethodNotAllowed")

            # Conflicts and missing objects
            expect("duplicate create", "POST", CM, 409, "AlreadyExists", body=configmap("base"))
            _, cur = server.request("GET", f"{CM}/base")
            stale = dict(cur)
            stale["metadata"] = dict(cur["metadata"], resourceVersion="1")
            r = expect("stale update", "PUT", f"{CM}/base", 409, "Conflict", body=stale)
            t.check("conflict message is kube's",
                    "the object has been modified" in (r or {}).get("message", ""), r)
            expect("get missing", "GET", f"{CM}/missing", 404, "NotFound")
            expect("update missing", "PUT", f"{CM}/missing", 404, "NotFound",
                   body=configmap("missing"))
            expect("delete missing", "DELETE", f"{CM}/missing", 404, "NotFound")
            expect("name mismatch on update", "PUT", f"{CM}/base", 400, "BadRequest",
                   body=configmap("other"))
            expect("stale delete precondition", "DELETE", f"{CM}/base", 409, "Conflict",
                   body={"preconditions": {"resourceVersion": "1"}})

            # Bad patches
            expect("unknown patch type", "PATCH", f"{CM}/base", 415, "UnsupportedMediaType",
                   body='{"data":{}}', headers={"Content-Type": "text/plain"})
            expect("merge patch not an object", "PATCH", f"{CM}/base", 400, "BadRequest",
                   body='[1]', headers={"Content-Type": "application/merge-patch+json"})
            expect("json patch not an array", "PATCH", f"{CM}/base", 400, "BadRequest",
                   body='{}', headers={"Content-Type": "application/json-patch+json"})
            expect("json patch bad op", "PATCH", f"{CM}/base", 422, "Invalid",
                   body='[{"op":"frobnicate","path":"/a"}]',
                   headers={"Content-Type": "application/json-patch+json"})
            status, _ = server.request("PATCH", f"{CM}/base", body='[{"op":"remove","path":"/nope/x"}]',
                                       headers={"Content-Type": "application/json-patch+json"})
            t.check("json patch on a missing path is refused with 4xx", 400 <= status < 500, status)
            expect("merge patch turning the name invalid", "PATCH", f"{CM}/base", 400, "BadRequest",
                   body='{"metadata":{"name":"Other"}}',
                   headers={"Content-Type": "application/merge-patch+json"})
            expect("strategic patch garbage", "PATCH", f"{CM}/base", 400, "BadRequest",
                   body='{"data":', headers={"Content-Type": "application/strategic-merge-patch+json"})
            # kube decodes a strategic merge patch's result into the kind's Go type: a value of
            # the wrong shape is its 422 naming the patch as Go prints it.
            smp = {"Content-Type": "application/strategic-merge-patch+json"}
            for what, body, detail in [
                    ("a map turned into a string", '{"data":"x"}',
                     '"map[data:x]": cannot restore map from string'),
                    ("a struct turned into a list", '{"metadata":[1,2.5,true]}',
                     '"map[metadata:[1 2.5 true]]": cannot restore struct from: slice'),
                    ("labels turned into a number", '{"metadata":{"labels":7}}',
                     '"map[metadata:map[labels:7]]": cannot restore map from int64')]:
                status, body = server.request("PATCH", f"{CM}/base", body=body, headers=smp)
                t.check(f"strategic patch: {what} is kube's 422",
                        status == 422 and body.get("reason") == "Invalid"
                        and body.get("message") == ' "" is invalid: patch: Invalid value: ' + detail
                        and body.get("details", {}).get("causes") == [
                            {"reason": "FieldValueInvalid", "message": "Invalid value: " + detail,
                             "field": "patch"}], body)

            # Garbage on the socket
            for raw in [b"GARBAGE\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n", b"\x16\x03\x01\x00\x05hello",
                        b"GET /api HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n"]:
                with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
                    s.sendall(raw)
                    s.shutdown(socket.SHUT_WR)
                    try:
                        data = s.recv(4096)
                    except OSError:
                        data = b""
                t.check(f"garbage {raw[:12]!r} gets 400 or a close",
                        data == b"" or data.startswith(b"HTTP/1.1 400"), data[:80])

            t.check("server is still alive after the corpus", server.alive())
            status, body = server.request("GET", f"{CM}/base")
            t.check("data intact after the corpus", status == 200 and body["data"] == {"a": "1"},
                    body)
        finally:
            server.stop()
            if t.failed:
                print(server.read_log()[-3000:])
    t.finish()


if __name__ == "__main__":
    main()
