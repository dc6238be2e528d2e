"""An HTTPS server for the webhook and aggregation suites: its own CA (trusted through caBundle),
a certificate for 127.0.0.1 and `dns_names`, every review POSTed to it recorded by path. A suite
answers POSTs through `answer(path, review)`, returning a dict (sent as JSON) or bytes, and GETs
through `on_get(handler)` (the request handler itself, for answers that stream). stop() closes
every connection too (the server is down); restart() serves again on the same port."""
import base64
import json
import socket
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from pki import CA, server_certificate


class _Listener(ThreadingHTTPServer):
    # Suites open a hundred calls at once: with socketserver's backlog of 5 the rest of their
    # connections would wait for the client's SYN retries (1 s, 3 s, 7 s...).
    request_queue_size = 256


class WebhookServer:
    def __init__(self, directory, answer=None, name="webhook",
                 dns_names=("localhost", "hook.webhooks.svc"), on_get=None):
        self.ca = CA(directory, name + "-ca")
        cert, key = server_certificate(self.ca, name, dns_names=dns_names)
        self.reviews = []  # (path, request, target)
        self.lock = threading.Lock()
        self.release = threading.Event()  # ends the waits of paths that hang
        self.connections = set()  # open keep-alive connections: closed by stop()
        self._answer = answer
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def setup(self):
                super().setup()
                with server.lock:
                    server.connections.add(self.connection)
                # The TLS handshake in this connection's thread: done by accept() it would make
                # every connection wait for those before it (a hundred at once, on a loaded
                # machine, for longer than a webhook's timeout).
                try:
                    self.connection.do_handshake()
                    self.handshaken = True
                except (ssl.SSLError, OSError):
                    self.handshaken = False  # the client refused the certificate, or left

            def handle(self):
                if self.handshaken:
                    super().handle()

            def finish(self):
                super().finish()
                with server.lock:
                    server.connections.discard(self.connection)

            def do_GET(self):
                if on_get is None:
                    self.send_error(404)
                    return
                on_get(self)

            def do_POST(self):
                length = int(self.headers.get("Content-Length", "0"))
                review = json.loads(self.rfile.read(length))
                path = self.path.split("?")[0]
                with server.lock:
                    server.reviews.append((path, review.get("request"), self.path))
                if path == "/redirect":
                    self.send_response(307)
                    self.send_header("Location", server.url("/"))
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = server._answer(path, review)
                if isinstance(body, dict):
                    body = json.dumps(body).encode()
                try:
                    # Head and body in one write (two small writes meet the delayed ACK).
                    self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
                except (ssl.SSLError, OSError):
                    pass  # kwatch stopped waiting (the webhook's timeout)

        self._handler = Handler
        self._cert, self._key = cert, key
        self.port = 0
        self._serve()

    def _serve(self):
        self.httpd = _Listener(("127.0.0.1", self.port), self._handler)
        self.httpd.daemon_threads = True
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self._cert, self._key)
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True,
                                            do_handshake_on_connect=False)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def restart(self):
        """Serves again after stop(), on the same port with the same certificate."""
        self.release.clear()
        self._serve()

    def ca_bundle(self):
        with open(self.ca.cert_file, "rb") as f:
            return base64.b64encode(f.read()).decode()

    def url(self, path):
        return f"https://127.0.0.1:{self.port}{path}"

    def stop(self):
        """Stops listening and closes every connection: the webhook is down."""
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        with self.lock:
            connections = list(self.connections)
        for c in connections:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
