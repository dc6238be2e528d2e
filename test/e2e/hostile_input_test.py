"""Requests from a hostile or careless client: nothing unreadable is committed, no request
amplifies into unbounded memory or work, and the server keeps serving everyone else.

Usage: hostile_input_test.py <path to kwatch-apiserver>
"""
import json
import os
import socket
import sys
import time

from harness import (Checks, Server, TempDir, WatchStream, configmap, rss_kib, rv_of, storage_backend,
                     wait_for)

CM = "/api/v1/namespaces/default/configmaps"
MERGE = {"Content-Type": "application/merge-patch+json"}
JSON_PATCH = {"Content-Type": "application/json-patch+json"}
STRATEGIC = {"Content-Type": "application/strategic-merge-patch+json"}


def rss_bytes(pid):
    return rss_kib(pid) * 1024


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def nested(levels):
    v = "1"
    for _ in range(levels):
        v = '{"a":' + v + "}"
    return v


def protobuf_configmap(name, key, value):
    def varint(n):
        out = b""
        while n >= 0x80:
            out += bytes([(n & 0x7F) | 0x80])
            n >>= 7
        return out + bytes([n])

    def field(number, data):
        return varint(number << 3 | 2) + varint(len(data)) + data

    meta = field(1, name.encode())
    raw = field(1, meta) + field(2, field(1, key) + field(2, value))
    return b"k8s\x00" + field(1, field(1, b"v1") + field(2, b"ConfigMap")) + field(2, raw)


def main():
    binary = sys.argv[1]
    t = Checks()
    with TempDir() as tmp:
        server = Server(binary, data_dir=tmp + "/data").start()
        try:
            status, base = server.request("POST", CM, body=configmap("base", {"a": "1"}))
            t.check("setup: create base", status == 201, base)
            base_rv = rv_of(base)

            def unchanged(what):
                status, cur = server.request("GET", CM + "/base")
                t.check(f"{what}: base is readable and unchanged",
                        status == 200 and rv_of(cur) == base_rv and cur.get("data") == {"a": "1"},
                        cur)

            # 1. Poisoned objects: refused before any write.
            status, body = server.request(
                "POST", CM, body='{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"inf"},'
                                 '"data":{"x":"1"},"x":1e999}',
                headers={"Content-Type": "application/json"})
            t.check("create with 1e999 -> 400", status == 400 and body.get("reason") == "BadRequest",
                    body)
            status, _ = server.request("GET", CM + "/inf")
            t.check("and nothing was stored", status == 404)
            status, body = server.request("PATCH", CM + "/base", body='{"data":{"x":1e999}}',
                                          headers=MERGE)
            t.check("merge patch with 1e999 -> 400", status == 400, body)
            unchanged("merge patch 1e999")
            below = "/x" + "/a" * 59
            patch = ('[{"op":"add","path":"/x","value":' + nested(60) + '},'
                     '{"op":"add","path":"' + below + '","value":' + nested(60) + '}]')
            status, body = server.request("PATCH", CM + "/base", body=patch, headers=JSON_PATCH)
            t.check("json patch nesting past the limit -> 422",
                    status == 422 and body.get("reason") == "Invalid", body)
            unchanged("deep json patch")
            status, body = server.request(
                "POST", CM, body=protobuf_configmap("utf8", b"k", b"x\xff\xfe"),
                headers={"Content-Type": "application/vnd.kubernetes.protobuf"})
            t.check("protobuf with invalid UTF-8 -> 400 with a JSON Status",
                    status == 400 and isinstance(body, dict) and body.get("kind") == "Status", body)
            status, _ = server.request("GET", CM + "/utf8")
            t.check("and nothing was stored", status == 404)
            status, body = server.request(
                "POST", CM, body=protobuf_configmap("utf8", b"k", "caf\u00e9".encode()),
                headers={"Content-Type": "application/vnd.kubernetes.protobuf"})
            t.check("protobuf with valid UTF-8 is created", status == 201, body)

            # 2. Amplification: 22 copies of the whole object into itself.
            ops = [{"op": "copy", "from": "", "path": f"/data/k{i}"} for i in range(22)]
            rss_before = rss_bytes(server.proc.pid)
            status, body = server.request("PATCH", CM + "/base", body=json.dumps(ops),
                                          headers=JSON_PATCH)
            growth = rss_bytes(server.proc.pid) - rss_before
            t.check("copy amplification -> 422", status == 422, body)
            t.check(f"copy amplification grows the server by under 10 MB ({growth >> 10} KiB)",
                    growth < 10 << 20, growth)
            unchanged("copy amplification")
            # Growth past the object limit through merge patches: 413.
            half = "x" * (1600 << 10)
            status, body = server.request("PATCH", CM + "/base",
                                          body=json.dumps({"data": {"p": half, "q": half}}),
                                          headers=MERGE)
            t.check("a patch result over 3 MiB -> 413",
                    status == 413 and body.get("reason") == "RequestEntityTooLarge", body)
            unchanged("oversized patch result")

            # 3. A strategic merge patch of a 3 MiB list: linear, so it simply completes.
            finalizers = [f"example.com/finalizer-{i:07d}" for i in range(90000)]
            status, made = server.request("POST", CM, body=configmap("smp", {"k": "v"}))
            # managedFields cleared: recording who set each of 90,000 finalizers would double the
            # object past the 3 MiB limit.
            body = json.dumps({"metadata": {"finalizers": finalizers, "managedFields": []}})
            t.check("setup: the patch body is close to 3 MiB", len(body) > (2800 << 10), len(body))
            status, patched = server.request("PATCH", CM + "/smp", body=body, headers=STRATEGIC)
            if storage_backend() == "etcd3":
                # The merged object (2.9 MB) is over etcd's own request limit (1.5 MiB).
                t.check("a 3 MiB strategic merge patch of a list completes (413 from etcd)",
                        status == 413 and patched.get("reason") == "RequestEntityTooLarge", status)
            else:
                t.check("a 3 MiB strategic merge patch of a list completes",
                        status == 200 and len(patched["metadata"].get("finalizers", [])) == 90000,
                        status)
            # A 3 MiB body whose result is small fits every backend: 90,000 deletions from a
            # primitive list, merged with the object's own few finalizers.
            server.request("PATCH", CM + "/smp", headers=STRATEGIC,
                           body=json.dumps({"metadata": {"finalizers": finalizers[:5]}}))
            body = json.dumps({"metadata": {"$deleteFromPrimitiveList/finalizers": finalizers,
                                            "finalizers": ["example.com/kept"]}})
            status, patched = server.request("PATCH", CM + "/smp", body=body, headers=STRATEGIC)
            t.check("a 3 MiB strategic merge patch deleting from a list completes",
                    status == 200
                    and patched["metadata"].get("finalizers") == ["example.com/kept"], patched)

            # 3b. Field ownership is recorded per member: a ConfigMap with 100,000 keys sent in
            # reverse order (the worst order for sorted insertion) is created, updated and
            # applied in linear time, so each request simply completes. Its managedFields
            # name every key: on etcd (1.5 MiB per value) it is too large, and a second
            # manager's entry makes it too large for the 3 MiB limit too (413 either way).
            too_large = 413 if storage_backend() == "etcd3" else None
            keys = [f"k{i:06d}" for i in range(100000)][::-1]
            many = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "many-keys"},
                    "data": {k: "v" for k in keys}}
            status, _ = server.request("POST", CM, body=many)
            t.check("a ConfigMap of 100,000 keys in reverse order is created",
                    status in (201, too_large), status)
            many["data"] = {k: "w" for k in keys}
            status, _ = server.request("PUT", CM + "/many-keys", body=many)
            t.check("and updated", status in (200, too_large, 404 if too_large else None), status)
            status, _ = server.request("PATCH", CM + "/many-keys?fieldManager=hostile&force=true",
                                       body=json.dumps(many),
                                       headers={"Content-Type": "application/apply-patch+yaml"})
            t.check("and applied (or refused as too large)", status in (200, 201, 413), status)

            # 3c. An apply-patch+yaml body nested 400,000 levels deep is refused (400), never
            # recursed into.
            for opener, closer in (("[", "]"), ("{a: ", "}")):
                deep = ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: deep}\ndata: " +
                        opener * 400000 + "1" + closer * 400000 + "\n")
                status, body = server.request("PATCH", CM + "/deep?fieldManager=hostile", body=deep,
                                              headers={"Content-Type": "application/apply-patch+yaml"})
                t.check(f"a YAML apply nested 400,000 deep ({opener.strip()}) -> 400", status == 400
                        and "nested more than 128 levels" in str(body), (status, str(body)[:200]))

            # 4. Invented HTTP methods do not become metric labels.
            for i in range(300):
                server.request(f"INVENTED{i}", "/api")
            text = server.request("GET", "/metrics", raw=True)[1].decode()
            t.check("invented methods are counted as verb=\"other\"", 'verb="other"' in text)
            t.check("no invented method is a label value", "INVENTED" not in text)
            t.check(f"/metrics stays small ({len(text)} bytes)", len(text) < 512 << 10)

            # 5. timeoutSeconds beyond the clock's range: the watch stays open and delivers.
            list_rv = server.list_rv(CM)
            w = WatchStream(server, f"{CM}?watch=1&resourceVersion={list_rv}"
                                    f"&timeoutSeconds=99999999999")
            server.request("POST", CM, body=configmap("after-huge-timeout"))
            ev = w.next_event(timeout=10)
            t.check("a watch with timeoutSeconds=99999999999 stays open and delivers",
                    ev is not None and ev["object"]["metadata"]["name"] == "after-huge-timeout", ev)
            w.close()
            status, body = server.request("GET", f"{CM}?watch=1&timeoutSeconds=99999999999999999999")
            t.check("timeoutSeconds beyond int64 -> 400", status == 400, body)

            # 6. HEAD on a watch: the head, no body, and the connection ends.
            with socket.create_connection(("127.0.0.1", server.port), timeout=10) as s:
                s.sendall(f"HEAD {CM}?watch=1 HTTP/1.1\r\nHost: x\r\n\r\n".encode())
                data = b""
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            head, _, rest = data.partition(b"\r\n\r\n")
            t.check("HEAD on a watch answers 200 with no body and closes",
                    head.startswith(b"HTTP/1.1 200") and rest == b"", data[:300])
            t.check("server alive after the hostile requests", server.alive())
        finally:
            server.stop()
            if t.failed:
                print(server.read_log()[-3000:])

        # 7. Out of file descriptors: the accept loop backs off instead of spinning.
        limited = Server(binary, max_open_files=128).start()
        held = []
        try:
            try:
                for _ in range(200):
                    held.append(socket.create_connection(("127.0.0.1", limited.port), timeout=5))
            except OSError:
                pass  # the listen backlog is full: enough pressure
            cpu_before, t0 = cpu_seconds(limited.proc.pid), time.monotonic()
            # A window long enough to tell an idle server from one that spins on accept.
            time.sleep(3.0)
            busy = (cpu_seconds(limited.proc.pid) - cpu_before) / (time.monotonic() - t0)
            log = limited.read_log()
            t.check(f"with no descriptors left the server idles ({busy:.0%} of a core)",
                    busy < 0.3, busy)
            t.check("the descriptor limit was reached", "Too many open files" in log)
            t.check("and logs the condition at most a few times",
                    log.count("accept failed") <= 3, log.count("accept failed"))
            for s in held:
                s.close()
            held = []
            wait_for(lambda: limited.request("GET", "/healthz")[0] == 200, timeout=15,
                     what="the server to accept again once descriptors are free")
            t.check("it serves again once descriptors are free",
                    limited.request("GET", "/healthz")[0] == 200)
        finally:
            for s in held:
                s.close()
            limited.stop()
            if t.failed:
                print(limited.read_log()[-3000:])
    t.finish()


if __name__ == "__main__":
    main()
