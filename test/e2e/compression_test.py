"""Response compression as kube-apiserver does it: a response of 128 KiB or more to a client
whose Accept-Encoding takes gzip comes gzip'ed (Content-Encoding: gzip, Vary: Accept-Encoding)
and inflates to exactly the uncompressed answer; small answers, clients that do not ask (or
refuse it with q=0), HEAD and watches are not compressed; kubectl (whose Go transport asks for
gzip) lists them as before.

Usage: compression_test.py <path to kwatch-apiserver>
"""
import gzip
import http.client
import json
import socket
import sys

from harness import Checks, Server, TempDir, configmap, kubectl_runner

CMS = "/api/v1/namespaces/default/configmaps"


def get(port, path, headers=None, method="GET"):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request(method, path, headers=headers or {})
    r = conn.getresponse()
    body = r.read()
    conn.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, body


def ours(listing):
    """The suite's ConfigMaps in a list."""
    return [i for i in listing["items"] if i["metadata"]["name"].startswith("cm-")]


def main():
    binary = sys.argv[1]
    t = Checks()
    with TempDir() as tmp:
        server = Server(binary).start()
        try:
            for i in range(300):
                status, _ = server.request("POST", CMS, body=configmap(f"cm-{i:03d}",
                                                                       data={"v": "x" * 700}))
                assert status == 201, status
            status, plain_headers, plain = get(server.port, CMS)
            t.check("a 300-object list is over 128 KiB", status == 200 and len(plain) > 128 * 1024,
                    len(plain))
            t.check("not compressed for a client that does not ask",
                    "content-encoding" not in plain_headers)
            status, headers, body = get(server.port, CMS, {"Accept-Encoding": "gzip, deflate"})
            t.check("gzip for a client that asks", status == 200 and
                    headers.get("content-encoding") == "gzip" and
                    headers.get("vary") == "Accept-Encoding", headers)
            inflated = gzip.decompress(body)
            # (ours only: over HTTPS kube-root-ca.crt is published into the namespace, maybe
            # between the two lists)
            t.check("it inflates to the same list",
                    ours(json.loads(inflated)) == ours(json.loads(plain)) and
                    len(ours(json.loads(plain))) == 300, (len(inflated), len(plain)))
            t.check("and is much smaller", len(body) * 5 < len(plain), (len(body), len(plain)))
            _, headers, _ = get(server.port, CMS, {"Accept-Encoding": "gzip;q=0, identity"})
            t.check("q=0 refuses gzip", "content-encoding" not in headers, headers)
            _, headers, body = get(server.port, CMS + "?limit=500",
                                   {"Accept-Encoding": "GZIP;q=0.5"})
            t.check("a page of the list too (case and q as HTTP allows)",
                    headers.get("content-encoding") == "gzip" and
                    len(ours(json.loads(gzip.decompress(body)))) == 300, headers)
            _, headers, body = get(server.port, f"{CMS}/cm-001", {"Accept-Encoding": "gzip"})
            t.check("a small answer is not compressed",
                    "content-encoding" not in headers and json.loads(body)["metadata"]["name"] == "cm-001",
                    headers)
            status, headers, body = get(server.port, CMS, {"Accept-Encoding": "gzip"}, "HEAD")
            t.check("HEAD: no body, not compressed", status == 200 and body == b"" and
                    "content-encoding" not in headers, (status, headers))
            s = socket.create_connection(("127.0.0.1", server.port), timeout=30)
            s.sendall(f"GET {CMS}?watch=1&timeoutSeconds=1 HTTP/1.1\r\nHost: x\r\n"
                      "Accept-Encoding: gzip\r\n\r\n".encode())
            raw = b""

            def ended(raw):
                # The last chunk, looked for in the body only: a header value ending in 0
                # (a FlowSchema's UID may) before the head's blank line looks the same.
                parts = raw.split(b"\r\n\r\n", 1)
                return len(parts) == 2 and (parts[1].startswith(b"0\r\n\r\n")
                                            or b"\r\n0\r\n\r\n" in parts[1])
            while not ended(raw):
                chunk = s.recv(1 << 20)
                if not chunk:
                    break
                raw += chunk
            s.close()
            head = raw.split(b"\r\n\r\n", 1)[0].lower()
            t.check("a watch is not compressed", b"transfer-encoding: chunked" in head and
                    b"content-encoding" not in head and b'"type":"ADDED"' in raw, head[:300])
            kc = kubectl_runner(server, tmp)
            if kc is not None:
                code, out = kc("get", "configmaps", "-o", "name")
                t.check("kubectl lists them (its transport asks for gzip)",
                        code == 0 and out.count("configmap/cm-") == 300, out[-300:])
            t.check("server alive", server.alive())
        finally:
            server.stop()
    t.finish()


if __name__ == "__main__":
    main()
