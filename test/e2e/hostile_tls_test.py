"""A corpus of bad TLS handshakes and bad credentials against the HTTPS port, and a flood of
connections from one client: each is refused (a TLS alert, a closed connection, or a 401/4xx
Status), never a crash or a 5xx, and the server keeps serving good clients throughout.

Handshakes: truncated and bit-flipped ClientHellos (from a real one), SSLv2 and SSL 3.0 hellos,
records with zero, oversized and absurd lengths, alerts, ChangeCipherSpec, application data or
heartbeats before any hello, random bytes, garbage after a completed handshake. Credentials:
malformed Authorization headers and JWTs with every claim wrong in a different way. Flood: up to
10,000 concurrent connections (bounded by the descriptor limit), idle, half-handshaken and
complete.

Usage: hostile_tls_test.py <path to kwatch-apiserver>
"""
import base64
import http.client
import json
import os
import random
import resource
import socket
import ssl
import sys
import time

from harness import Checks, Server, TempDir, wait_for


def client_hello():
    """The first flight of a real TLS 1.2/1.3 client, captured without a network."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname="localhost")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def send_raw(port, data, wait=5.0):
    """Sends bytes on a fresh connection and ends its side; returns what came back and whether
    the server closed the connection (rather than leaving it hanging)."""
    got = b""
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as s:
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
            while True:
                chunk = s.recv(4096)
                if not chunk:
                    return got, True
                got += chunk
        except socket.timeout:
            return got, False
        except OSError:  # reset: closed too
            return got, True


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwt(header, claims, sig=b"\x00" * 64):
    h = header if isinstance(header, (bytes, bytearray)) else json.dumps(header).encode()
    c = claims if isinstance(claims, (bytes, bytearray)) else json.dumps(claims).encode()
    return b64(h) + "." + b64(c) + "." + b64(sig)


def main():
    binary = sys.argv[1]
    t = Checks()
    rng = random.Random(1123)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    flood = max(100, min(10000, hard - 500))
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, flood + 400), hard))
    with TempDir() as tmp:
        tokens = os.path.join(tmp, "tokens.csv")
        with open(tokens, "w") as f:
            f.write('admin-token,admin,1,"system:masters"\n')
        server = Server(binary, max_open_files=min(hard, flood + 400), https=True,
                        extra_args=[f"--cert-dir={tmp}/certs", f"--token-auth-file={tokens}",
                                    "--authorization-mode=RBAC", "--anonymous-auth=false"]).start()
        port = server.secure_port
        ca = os.path.join(tmp, "certs", "ca.crt")
        ctx = ssl.create_default_context(cafile=ca)

        def good(path="/api/v1/namespaces", token="admin-token", extra=None, timeout=10):
            conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=timeout)
            try:
                headers = {} if token is None else {"Authorization": f"Bearer {token}"}
                headers.update(extra or {})
                conn.request("GET", path, headers=headers)
                resp = conn.getresponse()
                body = resp.read()
                try:
                    return resp.status, json.loads(body)
                except ValueError:
                    return resp.status, body
            finally:
                conn.close()

        try:
            hello = client_hello()
            t.check("a real ClientHello was captured", hello[:1] == b"\x16" and len(hello) > 100, hello[:8])
            corpus = {
                "nothing": b"",
                "one handshake byte": b"\x16",
                "a record of length 0": b"\x16\x03\x01\x00\x00",
                "a record claiming 64 KiB, then nothing": b"\x16\x03\x01\xff\xff",
                "an oversized record": b"\x16\x03\x03\x48\x01" + b"\x01" * 0x4801,
                "an SSLv2 ClientHello": b"\x80\x2e\x01\x00\x02\x00\x15\x00\x00\x00\x10" + bytes(range(21)) + bytes(16),
                "an SSL 3.0 ClientHello": b"\x16\x03\x00" + hello[3:],
                "an alert first": b"\x15\x03\x03\x00\x02\x02\x28",
                "ChangeCipherSpec first": b"\x14\x03\x03\x00\x01\x01",
                "application data first": b"\x17\x03\x03\x00\x10" + bytes(16),
                "a heartbeat first": b"\x18\x03\x03\x00\x03\x01\x40\x00",
                "a hello with a huge handshake length": hello[:5] + b"\x01\xff\xff\xff" + hello[9:],
                "two hellos in a row": hello + hello,
            }
            for cut in sorted(rng.sample(range(1, len(hello)), 12)):
                corpus[f"a hello cut at {cut}"] = hello[:cut]
            for i in range(24):
                flipped = bytearray(hello)
                for _ in range(rng.randint(1, 4)):
                    flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
                corpus[f"a hello with flipped bits #{i}"] = bytes(flipped)
            for n in (1, 7, 64, 517, 4096, 20000):
                corpus[f"{n} random bytes"] = bytes(rng.randrange(256) for _ in range(n))
            answers = {name: send_raw(port, data) for name, data in corpus.items()}
            # What may come back: nothing, a TLS alert, or TLS handshake records (the server's
            # answer to a hello that survived its damage), never HTTP or a hang.
            def acceptable(data, got):
                if not got or got[:1] in (b"\x15", b"\x16"):
                    return True
                # What starts like an HTTP method is told it reached the TLS port.
                return b"A" <= data[:1] <= b"Z" and got.startswith(b"HTTP/1.0 400")
            bad = {name: got[:40] for name, (got, closed) in answers.items()
                   if not closed or not acceptable(corpus[name], got)}
            t.check(f"{len(corpus)} bad handshakes: each closed by the server, TLS records at most",
                    not bad, bad)
            t.check("... and the server serves a good client after them", good()[0] == 200 and server.alive())

            # Garbage after a completed handshake, and a handshake then silence.
            with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
                raw_sock = ctx.wrap_socket(raw, server_hostname="localhost")
                raw_sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                first = raw_sock.recv(4096)
                t.check("a completed handshake serves a request", first.startswith(b"HTTP/1.1 200"), first[:60])
                # Bytes that are not TLS records, under the TLS layer.
                os.write(raw_sock.fileno(), b"\x17\x03\x03\x00\x20" + os.urandom(32))
                try:
                    rest = raw_sock.recv(4096)
                except (ssl.SSLError, OSError):
                    rest = b""
                t.check("a forged record after the handshake ends the connection", rest == b"", rest[:60])
            with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
                ctx.wrap_socket(raw, server_hostname="localhost").close()
            t.check("a handshake then a close leaves the server serving", good()[0] == 200)

            # Credentials: malformed headers and JWTs wrong in every way.
            now = int(time.time())
            ok_claims = {"aud": ["https://kubernetes.default.svc.cluster.local"], "exp": now + 600, "iat": now,
                         "nbf": now, "iss": "https://kubernetes.default.svc.cluster.local", "jti": "x",
                         "sub": "system:serviceaccount:default:default",
                         "kubernetes.io": {"namespace": "default", "serviceaccount": {"name": "default", "uid": "u"}}}
            headers = {
                "Bearer": "Bearer", "Bearer + space": "Bearer ", "only spaces": "Bearer     ",
                "Basic": "Basic YWRtaW46YWRtaW4=", "unknown scheme": "Negotiate abc",
                "a 32 KiB token": "Bearer " + "A" * 32768,
                "non-ASCII": "Bearer t\u00f6k\u00e9n".encode().decode("latin-1"),
                "a control character": "Bearer ab\x01cd",
                "a JWT of empty objects": "Bearer " + jwt({}, {}),
                "dots only": "Bearer ..", "four parts": "Bearer a.b.c.d",
                "bad base64": "Bearer !!!.@@@.###",
                "alg none": "Bearer " + jwt({"alg": "none"}, ok_claims, b""),
                "alg HS256 (key confusion)": "Bearer " + jwt({"alg": "HS256"}, ok_claims, b"\x01" * 32),
                "unsigned RS256": "Bearer " + jwt({"alg": "RS256"}, ok_claims, b"\x00" * 256),
                "exp as a string": "Bearer " + jwt({"alg": "RS256"}, dict(ok_claims, exp="never"), b"\x00" * 256),
                "exp 1e400": "Bearer " + jwt({"alg": "ES256"}, json.dumps(ok_claims).replace(
                    str(now + 600), "1e400").encode()),
                "a payload nested 10,000 deep": "Bearer " + jwt({"alg": "RS256"}, b"[" * 10000 + b"]" * 10000),
                "a payload that is not JSON": "Bearer " + jwt({"alg": "RS256"}, b"\xff\xfe garbage"),
                "kubernetes.io as a list": "Bearer " + jwt({"alg": "RS256"}, dict(ok_claims, **{"kubernetes.io": []})),
            }
            results = {}
            for name, value in headers.items():
                try:
                    results[name] = good(token=None, extra={"Authorization": value})[0]
                except (http.client.HTTPException, OSError) as e:
                    results[name] = repr(e)
            wrong = {k: v for k, v in results.items() if not (isinstance(v, int) and 400 <= v < 500)}
            t.check(f"{len(headers)} bad credentials: each a 4xx, never a 5xx or a dropped connection",
                    not wrong, wrong)
            # A control character makes the header itself malformed (400).
            t.check("... 401 for every credential that is merely wrong",
                    all(results[k] == 401 for k in headers if k != "a control character")
                    and results["a control character"] == 400, results)
            t.check("... and the admin token still works", good()[0] == 200 and server.alive())

            # A flood of connections from one client: idle ones, half handshakes, full ones.
            held = []
            opened = 0
            try:
                for i in range(flood):
                    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                    s.settimeout(5)
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                    s.connect(("127.0.0.1", port))
                    if i % 3 == 1:
                        s.sendall(hello[:len(hello) // 2])
                    held.append(s)
                    opened += 1
            except OSError as e:
                print(f"note: stopped opening connections after {opened}: {e}")
            t.check(f"{opened} concurrent connections were opened", opened >= min(flood, 1000), opened)
            status = good(timeout=30)[0] if server.alive() else None
            t.check("a good client is served while they are held", status == 200, status)
            for s in held:
                s.close()
            held = []
            wait_for(lambda: good()[0] == 200, timeout=30, what="the server after the flood")
            t.check("the server serves after the flood and is alive", server.alive())
        finally:
            server.stop()
    t.finish()


if __name__ == "__main__":
    main()
