"""HTTPS as clients use it: a generated CA and serving certificate (kept across restarts), or the
operator's own; kubectl, Python and WebSocket clients verify it; bad handshakes and plain HTTP on
the TLS port leave the server serving.

Usage: tls_test.py <path to kwatch-apiserver>
"""
import http.client
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import warnings

from harness import Checks, Server, TempDir, free_port, wait_for


def https_get(port, path, ca):
    ctx = ssl.create_default_context(cafile=ca)
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def main():
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    binary = sys.argv[1]
    t = Checks()
    with TempDir() as tmp:
        certs = os.path.join(tmp, "certs")
        # kubectl asks for a user name over HTTPS when its kubeconfig has no credentials at all.
        tokens = os.path.join(tmp, "tokens.csv")
        with open(tokens, "w") as f:
            f.write('dev,dev,1,"system:masters"\n')
        server = Server(binary, data_dir=tmp + "/data", https=True,
                        extra_args=[f"--cert-dir={certs}", f"--token-auth-file={tokens}"]).start()
        port = server.secure_port
        try:
            ca = os.path.join(certs, "ca.crt")
            wait_for(lambda: os.path.exists(ca), what="the generated CA")
            status, body = https_get(port, "/api/v1/namespaces", ca)
            t.check("HTTPS with the generated CA serves the API", status == 200 and
                    json.loads(body)["kind"] == "NamespaceList", f"{status} {body[:200]!r}")
            key_mode = os.stat(os.path.join(certs, "apiserver.key")).st_mode & 0o777
            t.check("the generated key is private", key_mode == 0o600, oct(key_mode))

            # A client that does not trust the CA is refused by its own verification.
            try:
                https_get(port, "/version", None)
                t.check("an untrusted certificate is refused by the client", False)
            except ssl.SSLError:
                t.check("an untrusted certificate is refused by the client", True)

            # Only TLS 1.2 and later.
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.load_verify_locations(ca)
            # The client allows TLS 1.0/1.1 (security level 0), so only the server can refuse.
            ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
            ctx.maximum_version = ssl.TLSVersion.TLSv1_1
            ctx.minimum_version = ssl.TLSVersion.TLSv1
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
                    with ctx.wrap_socket(raw, server_hostname="localhost"):
                        pass
                t.check("TLS 1.1 is refused", False)
            except (ssl.SSLError, OSError):
                t.check("TLS 1.1 is refused", True)

            # ALPN: h2 for a client offering it (e2e.http2 covers HTTP/2 itself), HTTP/1.1 for
            # one offering only that.
            for offer, want in ((["h2", "http/1.1"], "h2"), (["http/1.1"], "http/1.1")):
                ctx = ssl.create_default_context(cafile=ca)
                ctx.set_alpn_protocols(offer)
                with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
                    with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
                        t.check(f"ALPN picks {want} for a client offering {offer}",
                                tls.selected_alpn_protocol() == want, tls.selected_alpn_protocol())

            # Plain HTTP on the TLS port gets Go's (and kube-apiserver's) answer.
            with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
                raw.sendall(b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n")
                answer = raw.recv(1024)
            t.check("plain HTTP on the TLS port is told so", answer.startswith(b"HTTP/1.0 400") and
                    b"Client sent an HTTP request to an HTTPS server." in answer, answer)

            # Garbage and plain HTTP on the TLS port: refused, the server serves on.
            for name, data in (("garbage", b"\x16\x03\x01\xff\xff" + os.urandom(200)),
                               ("plain HTTP", b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n")):
                with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
                    raw.sendall(data)
                    try:
                        raw.recv(1024)
                    except OSError:
                        pass
                status, _ = https_get(port, "/healthz", ca)
                t.check(f"{name} on the TLS port leaves the server serving", status == 200 and server.alive())

            check_clients(t, server, port, ca, tmp)

            # A restart reuses the CA, so clients keep trusting the server.
            with open(ca) as f:
                before = f.read()
            server.stop()
            server.start()
            with open(ca) as f:
                t.check("a restart keeps the CA", f.read() == before)
            status, _ = https_get(port, "/healthz", ca)
            t.check("and serves with it", status == 200, status)
        finally:
            server.stop()

        # The operator's own certificate and key.
        own = os.path.join(tmp, "own")
        shutil.copytree(certs, own)
        other = Server(binary, https=True, extra_args=[f"--tls-cert-file={own}/apiserver.crt",
                                                       f"--tls-private-key-file={own}/apiserver.key"]).start()
        try:
            status, _ = https_get(other.secure_port, "/healthz", os.path.join(own, "ca.crt"))
            t.check("--tls-cert-file and --tls-private-key-file are served", status == 200, status)
        finally:
            other.stop()
        # A key that is not the certificate's: a clear refusal to start.
        p = subprocess.run([binary, "--port=0", f"--secure-port={free_port()}",
                            f"--tls-cert-file={own}/apiserver.crt", f"--tls-private-key-file={own}/ca.key"],
                           capture_output=True, text=True, timeout=30)
        t.check("a key that does not match the certificate stops the start with a message",
                p.returncode != 0 and "cannot use the private key" in p.stdout + p.stderr, (p.stdout + p.stderr)[-300:])
    t.finish()


def check_clients(t, server, port, ca, tmp):
    kubectl = shutil.which("kubectl")
    if kubectl:
        kubeconfig = os.path.join(tmp, "kubeconfig-tls")
        with open(kubeconfig, "w") as f:
            f.write(f"""apiVersion: v1
kind: Config
clusters: [{{name: k, cluster: {{server: "https://127.0.0.1:{port}", certificate-authority: "{ca}"}}}}]
contexts: [{{name: k, context: {{cluster: k, user: u}}}}]
current-context: k
users: [{{name: u, user: {{token: dev}}}}]
""")
        env = dict(os.environ, KUBECONFIG=kubeconfig, HOME=tmp)
        p = subprocess.run([kubectl, "get", "ns"], capture_output=True, text=True, env=env, timeout=60)
        t.check("kubectl over HTTPS, verifying the CA", p.returncode == 0 and "default" in p.stdout,
                p.stdout + p.stderr)
        p = subprocess.run([kubectl, "create", "configmap", "tls-cm", "--from-literal=a=b"],
                           capture_output=True, text=True, env=env, timeout=60)
        t.check("kubectl writes over HTTPS", p.returncode == 0, p.stdout + p.stderr)
    # A chunked watch over TLS.
    ctx = ssl.create_default_context(cafile=ca)
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=10)
    conn.request("GET", "/api/v1/namespaces?watch=1&timeoutSeconds=2")
    resp = conn.getresponse()
    line = resp.readline()
    conn.close()
    t.check("a chunked watch streams over TLS", resp.status == 200 and b'"type":"ADDED"' in line, line[:200])
    try:
        import websocket  # python3-websocket
    except ImportError:
        print("python3-websocket is not installed: skipping the wss check")
        return
    ws = websocket.create_connection(f"wss://127.0.0.1:{port}/api/v1/namespaces?watch=1",
                                     sslopt={"ca_certs": ca}, timeout=10)
    msg = ws.recv()
    ws.close()
    t.check("a WebSocket watch streams over wss", '"type":"ADDED"' in msg, msg[:200])


if __name__ == "__main__":
    main()
