"""What the HTTPS benchmarks (http2_idle.py, http2_fanout.py, http2_scale.py) share: a
kwatch-apiserver on a free loopback HTTPS port (generated certificate, anyone allowed), a
kept-alive HTTP/1.1 TLS client for setup, writes and /metrics, and readings of a process's CPU
and memory from /proc."""
import json
import os
import re
import socket
import ssl
import subprocess
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def cpu_seconds(pid):
    """utime + stime of a process."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tls(port, protocols):
    """A TLS connection to 127.0.0.1:port offering these ALPN protocols (certificate unchecked:
    the server's own, generated)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(protocols)
    raw = socket.create_connection(("127.0.0.1", port), timeout=60)
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return ctx.wrap_socket(raw, server_hostname="127.0.0.1")


class Client:
    """One kept-alive HTTP/1.1 TLS connection; answers carry a Content-Length."""

    def __init__(self, port):
        self.port = port
        self.sock = tls(port, ["http/1.1"])
        self.buf = b""

    def request(self, method, path, body=None):
        try:
            return self.exchange(method, path, body)
        except OSError:
            # Closed while idle (the server's keep-alive timeout, 60 s, can pass while a
            # benchmark opens its thousands of connections): once more on a new one.
            self.sock.close()
            self.sock, self.buf = tls(self.port, ["http/1.1"]), b""
            return self.exchange(method, path, body)

    def exchange(self, method, path, body=None):
        data = b"" if body is None else json.dumps(body).encode()
        kind = "application/merge-patch+json" if method == "PATCH" else "application/json"
        self.sock.sendall(f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: {kind}\r\n"
                          f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
        while b"\r\n\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise OSError("the server closed the connection")
            self.buf += chunk
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        m = re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", head)
        length = int(m.group(1)) if m else 0
        while len(self.buf) < length:
            self.buf += self.sock.recv(65536)
        body, self.buf = self.buf[:length], self.buf[length:]
        return int(head.split()[1]), body

    def metric(self, name):
        """The sum of a metric's samples, all labels."""
        _, body = self.request("GET", "/metrics")
        return sum(float(line.rsplit(" ", 1)[1]) for line in body.decode().splitlines()
                   if line.startswith(name + "{") or line.startswith(name + " "))


class Server:
    """kwatch-apiserver serving HTTPS on a free loopback port, everyone allowed, with these
    flags besides; `client` is a ready Client once started."""

    def __init__(self, binary, directory, args=(), log_name="log"):
        self.port = free_port()
        self.log_path = os.path.join(directory, log_name)
        self.proc = subprocess.Popen(
            [binary, "--port=0", "--bind-address=127.0.0.1", f"--secure-port={self.port}",
             f"--cert-dir={directory}/certs-{log_name}", "--authorization-mode=AlwaysAllow",
             "--anonymous-auth=true", "--max-watches-per-user=0", *args],
            stdout=open(self.log_path, "w"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            try:
                self.client = Client(self.port)
                if self.client.request("GET", "/readyz")[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise SystemExit("kwatch-apiserver did not start")
            time.sleep(0.1)

    def log(self):
        with open(self.log_path) as f:
            return f.read()

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
