"""What a client that has not authenticated can make the server hold: its request's head, never
its body (kube's filter chain authenticates on the headers), and at most the connections the caps
allow (--max-connections, --max-connections-per-ip).

Usage: pre_auth_limits_test.py <path to kwatch-apiserver>
"""
import os
import socket
import sys
import time

from harness import Checks, Server, TempDir, rss_kib, wait_for

BODY = 3 * 1024 * 1024  # the largest body the server takes


def post_head(port, token=None, length=BODY, path="/api/v1/namespaces/default/configmaps"):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    s.sendall((f"POST {path} HTTP/1.1\r\nHost: x\r\n{auth}"
               f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n").encode())
    return s


def read_status(s, timeout):
    s.settimeout(timeout)
    data = b""
    try:
        while b"\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    except (socket.timeout, ConnectionError):
        pass
    line = data.split(b"\r\n", 1)[0].decode(errors="replace")
    parts = line.split()
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None


def served_connection(port):
    """A kept connection the server has answered a request on (so it holds one of its places)."""
    c = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        c.sendall(b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n")
        c.settimeout(5)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = c.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        length = int([l for l in data.split(b"\r\n") if l.lower().startswith(b"content-length:")][0]
                     .split(b":")[1])
        rest = data.split(b"\r\n\r\n", 1)[1]
        while len(rest) < length:
            rest += c.recv(65536)
        return c
    except (OSError, IndexError, ValueError):
        c.close()
        return None


def hold(port, n):
    """n served kept connections; earlier ones (the harness's readiness probe) may still be
    closing, so a refused one is tried again."""
    held = []
    def more():
        c = served_connection(port)
        if c:
            held.append(c)
        return len(held) == n
    wait_for(more, what=f"{n} connections served")
    return held


def closed_by_server(s, timeout=5.0):
    """True when the server closes the connection (EOF or reset) within timeout."""
    s.settimeout(timeout)
    try:
        return s.recv(1) == b""
    except ConnectionError:
        return True
    except socket.timeout:
        return False


def main():
    binary = sys.argv[1]
    t = Checks()
    with TempDir() as tmp:
        tokens = os.path.join(tmp, "tokens.csv")
        with open(tokens, "w") as f:
            f.write('admin-token,admin,1,"system:masters"\nnobody-token,nobody,2,""\n')
        server = Server(binary, extra_args=[f"--token-auth-file={tokens}", "--authorization-mode=RBAC",
                                            "--anonymous-auth=false", "--max-connections-per-ip=300",
                                            "--max-connections=400"]).start()
        try:
            # Refused on its head: the 401 comes before a byte of the announced body is sent.
            s = post_head(server.port)
            t.check("a request without credentials is refused on its head, its body never awaited",
                    read_status(s, 5.0) == 401)
            t.check("... and its connection closes", closed_by_server(s))
            s.close()
            s = post_head(server.port, token="wrong")
            t.check("a bad token: 401 on the head", read_status(s, 5.0) == 401)
            s.close()
            # Authenticated, but not allowed to create: refused on the head as well.
            s = post_head(server.port, token="nobody-token")
            t.check("a user who may not create is refused on the head (403), its body never awaited",
                    read_status(s, 5.0) == 403)
            s.close()
            for path in ("/apis/authentication.k8s.io/v1/tokenreviews", "/metrics"):
                s = post_head(server.port, token="nobody-token", path=path)
                t.check(f"POST {path} without a grant: 403 on the head", read_status(s, 5.0) == 403)
                s.close()
            # An authenticated client's body is read and served as before.
            body = b'{"metadata":{"name":"after-head"}}'
            s = post_head(server.port, token="admin-token", length=len(body))
            s.sendall(body)
            t.check("an authenticated POST is read whole and served", read_status(s, 10.0) == 201)
            s.close()

            # 200 connections announcing 3 MiB bodies and sending them as fast as the server
            # takes them: the server holds none of it.
            before = rss_kib(server.proc.pid)
            conns = [post_head(server.port) for _ in range(200)]
            chunk = b"x" * 65536
            sent = 0
            for c in conns:
                c.setblocking(False)
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and conns:
                for c in list(conns):
                    try:
                        sent += c.send(chunk)
                    except BlockingIOError:
                        pass
                    except OSError:
                        conns.remove(c)  # the server closed it
                        c.close()
            grown = rss_kib(server.proc.pid) - before
            for c in conns:
                c.close()
            t.check("200 unauthenticated uploads grow the server by under 32 MiB", grown < 32 * 1024,
                    f"grew {grown} KiB; {sent} bytes sent")
            t.check("... every one of those connections was closed by the server", not conns,
                    f"{len(conns)} still open")
        finally:
            server.stop()

        # The caps: one more connection than allowed is closed at once; a place freed is taken.
        server = Server(binary, extra_args=["--max-connections-per-ip=5"]).start()
        try:
            held = hold(server.port, 5)
            extra = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            t.check("a sixth connection from one address is closed by --max-connections-per-ip=5",
                    closed_by_server(extra))
            extra.close()
            held.pop().close()

            def served():
                c = socket.create_connection(("127.0.0.1", server.port), timeout=5)
                c.sendall(b"GET /version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                status = read_status(c, 5.0)
                c.close()
                return status == 200
            t.check("a place freed is taken by the next connection", wait_for(served, what="a free place"))
            for c in held:
                c.close()
        finally:
            server.stop()
        server = Server(binary, extra_args=["--max-connections=3"]).start()
        try:
            held = hold(server.port, 3)
            extra = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            t.check("a fourth connection is closed by --max-connections=3", closed_by_server(extra))
            extra.close()
            for c in held:
                c.close()
            t.check("server alive", server.alive())
        finally:
            server.stop()
    t.finish()


if __name__ == "__main__":
    main()
