"""HTTP/2 on the secure port, as Go clients (kubectl, client-go) use it: ALPN picks h2 when the
client offers it; requests, writes and errors on streams of one connection; 200 watches on one
connection, each seeing every event in order; a reset ending only its own stream; GOAWAY on
graceful shutdown; and the limits against hostile clients (reset floods, CONTINUATION floods,
bodies past the limit, more streams than allowed).

Usage: http2_test.py <path to kwatch-apiserver>
Needs python3-h2 (Debian); skips without it.
"""
import gzip
import io
import json
import os
import select
import socket
import ssl
import struct
import subprocess
import sys
import time

import cbor2

from harness import SKIP, Checks, Server, TempDir, configmap, wait_for

try:
    import h2.config
    import h2.connection
    import h2.events
    import h2.exceptions
    import h2.settings
    import hpack
except ImportError:
    print("python3-h2 is not installed: skipping")
    sys.exit(SKIP)


def tls_socket(port, protocols):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(protocols)
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    return ctx.wrap_socket(raw, server_hostname="127.0.0.1")


class H2:
    """One HTTP/2 connection; events are gathered per stream."""

    def __init__(self, port, window=None):
        self.sock = tls_socket(port, ["h2", "http/1.1"])
        self.alpn = self.sock.selected_alpn_protocol()
        self.conn = h2.connection.H2Connection(
            config=h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        self.conn.initiate_connection()
        if window is not None:
            self.conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window})
        self.flush()
        self.streams = {}  # id -> {"headers", "data", "ended", "reset"}
        self.terminated = None  # ConnectionTerminated
        self.closed = False
        self.remote_settings = {}
        self.auto_ack = True

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def request(self, method, path, body=None, headers=(), end=True):
        sid = self.conn.get_next_available_stream_id()
        hdrs = [(":method", method), (":path", path), (":scheme", "https"),
                (":authority", "127.0.0.1")] + list(headers)
        if body is not None:
            hdrs.append(("content-type", "application/json"))
            hdrs.append(("content-length", str(len(body))))
        self.conn.send_headers(sid, hdrs, end_stream=body is None and end)
        self.streams[sid] = {"headers": None, "data": b"", "ended": False, "reset": None}
        self.flush()
        if body is not None:
            self.send_body(sid, body, end)
        return sid

    def send_body(self, sid, body, end=True):
        """Sends `body` as the flow-control windows allow; stops early if the stream is
        answered or the connection ends."""
        sent = 0
        while sent < len(body) and self.streams[sid]["headers"] is None and not self.closed:
            window = min(self.conn.local_flow_control_window(sid), self.conn.max_outbound_frame_size)
            if window <= 0:
                self.pump(0.2)
                continue
            piece = body[sent:sent + window]
            self.conn.send_data(sid, piece, end_stream=end and sent + len(piece) == len(body))
            sent += len(piece)
            self.flush()
            self.pump(0)

    def pump(self, timeout=0.5):
        """Reads what has come within `timeout`; False once the connection is gone."""
        if self.closed:
            return False
        r, _, _ = select.select([self.sock], [], [], timeout)
        if not r and not self.sock.pending():
            return True
        try:
            data = self.sock.recv(1 << 20)
        except (ssl.SSLError, OSError):
            data = b""
        if not data:
            self.closed = True
            return False
        for ev in self.conn.receive_data(data):
            s = self.streams.get(getattr(ev, "stream_id", None) or 0)
            if isinstance(ev, h2.events.ResponseReceived) and s is not None:
                s["headers"] = dict(ev.headers)
            elif isinstance(ev, h2.events.DataReceived):
                if s is not None:
                    s["data"] += ev.data
                if self.auto_ack and ev.flow_controlled_length:
                    self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded) and s is not None:
                s["ended"] = True
            elif isinstance(ev, h2.events.StreamReset) and s is not None:
                s["reset"] = ev.error_code
            elif isinstance(ev, h2.events.ConnectionTerminated):
                self.terminated = ev
            elif isinstance(ev, h2.events.RemoteSettingsChanged):
                for code, change in ev.changed_settings.items():
                    self.remote_settings[int(code)] = change.new_value
        try:
            self.flush()
        except OSError:
            self.closed = True
        return True

    def wait(self, condition, timeout=10, what="condition"):
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            if not self.pump(0.2) and not condition():
                raise AssertionError(f"connection closed while waiting for {what}")
        return True

    def fetch(self, method, path, body=None, headers=()):
        sid = self.request(method, path, body, headers)
        s = self.streams[sid]
        self.wait(lambda: s["ended"] or s["reset"] is not None, what=f"{method} {path}")
        return int(s["headers"][":status"]) if s["headers"] else None, s["headers"], s["data"]

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def read_frames_until_closed(c, timeout):
    """Reads frames without the h2 library until the server closes the connection: the error
    code of the GOAWAY it sent (None: none) and the streams that ended (END_STREAM)."""
    data = bytes(c.conn.incoming_buffer.data)
    goaway, ended = None, set()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        while len(data) >= 9:
            length = int.from_bytes(data[0:3], "big")
            if len(data) < 9 + length:
                break
            ftype, flags = data[3], data[4]
            sid = int.from_bytes(data[5:9], "big") & 0x7FFFFFFF
            payload = data[9:9 + length]
            data = data[9 + length:]
            if ftype == 0x7 and len(payload) >= 8:
                goaway = int.from_bytes(payload[4:8], "big")
            elif ftype in (0x0, 0x1) and flags & 0x1:
                ended.add(sid)
        r, _, _ = select.select([c.sock], [], [], 0.2)
        if not r and not c.sock.pending():
            continue
        try:
            more = c.sock.recv(1 << 20)
        except (ssl.SSLError, OSError):
            more = b""
        if not more:
            break
        data += more
    return goaway, ended


def check_served(t, port, name):
    """Another client's request is served (after an attack on a connection of its own)."""
    probe = H2(port)
    status, _, _ = probe.fetch("GET", "/version")
    t.check(name, status == 200, str(status))
    probe.close()


def wait_closed(sock, timeout, drain=False):
    """Whether the server closes `sock` within `timeout` (what it sends is read and dropped)."""
    deadline = time.monotonic() + timeout
    sock.settimeout(0.2)
    while time.monotonic() < deadline:
        try:
            if not sock.recv(1 << 16):
                return True
        except (socket.timeout, ssl.SSLWantReadError):
            continue
        except (OSError, ssl.SSLError):
            return True
    return False


def events_of(data):
    return [json.loads(line) for line in data.decode().splitlines() if line.strip()]


def check_basics(t, server, port):
    c = H2(port)
    t.check("ALPN picks h2 when the client offers h2 and http/1.1", c.alpn == "h2", c.alpn)
    c.pump(0.5)
    t.check("the server announces its stream limit (default 100)",
            c.remote_settings.get(h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS) == 100,
            str(c.remote_settings))
    status, headers, body = c.fetch("GET", "/version")
    t.check("GET /version over HTTP/2", status == 200 and b"gitVersion" in body, f"{status} {body[:100]!r}")
    t.check("no connection-specific header in an HTTP/2 answer",
            not any(k in headers for k in ("connection", "keep-alive", "transfer-encoding")),
            str(headers))
    status, _, body = c.fetch("POST", "/api/v1/namespaces",
                              json.dumps({"metadata": {"name": "h2"}}).encode())
    t.check("a create with a body over HTTP/2", status == 201, f"{status} {body[:200]!r}")
    sids = [c.request("POST", "/api/v1/namespaces/h2/configmaps",
                      json.dumps(configmap(f"cm-{i}", {"i": str(i)})).encode()) for i in range(20)]
    c.wait(lambda: all(c.streams[s]["ended"] for s in sids), what="20 concurrent creates")
    t.check("20 concurrent creates on one connection",
            all(c.streams[s]["headers"][":status"] == "201" for s in sids),
            str([c.streams[s]["headers"][":status"] for s in sids]))
    status, headers, body = c.fetch("GET", "/api/v1/namespaces/h2/configmaps")
    names = {i["metadata"]["name"] for i in json.loads(body)["items"]} if status == 200 else set()
    t.check("a cached list over HTTP/2", status == 200 and {f"cm-{i}" for i in range(20)} <= names and
            headers.get("content-length") == str(len(body)), f"{status} {sorted(names)}")
    status, headers, body = c.fetch("GET", "/api/v1/namespaces/h2/configmaps/absent")
    t.check("a 404 Status over HTTP/2", status == 404 and json.loads(body)["reason"] == "NotFound",
            f"{status} {body[:200]!r}")
    status, headers, body = c.fetch("HEAD", "/version")
    t.check("HEAD over HTTP/2: the head, no body", status == 200 and body == b"", f"{status} {body!r}")
    status, headers, body = c.fetch("GET", "/api/v1/namespaces/h2/configmaps",
                                    headers=[("accept-encoding", "gzip")])
    t.check("a small answer is not compressed", "content-encoding" not in headers, str(headers))
    # A body past the request limit (3 MiB): 413, and the connection serves on.
    big = json.dumps(configmap("big", {"v": "x" * (3 * 1024 * 1024 + 10)})).encode()
    sid = c.conn.get_next_available_stream_id()
    c.conn.send_headers(sid, [(":method", "POST"), (":path", "/api/v1/namespaces/h2/configmaps"),
                              (":scheme", "https"), (":authority", "127.0.0.1"),
                              ("content-type", "application/json")])
    c.streams[sid] = {"headers": None, "data": b"", "ended": False, "reset": None}
    c.send_body(sid, big)
    c.wait(lambda: c.streams[sid]["headers"] is not None, what="the 413")
    t.check("a body past the limit over HTTP/2 is 413",
            c.streams[sid]["headers"][":status"] == "413", str(c.streams[sid]["headers"]))
    status, _, _ = c.fetch("GET", "/version")
    t.check("the connection serves on after a 413", status == 200, str(status))
    # A header list past the limit (64 KiB decoded): its stream is reset, nothing served.
    sid = c.request("GET", "/version", headers=[(f"x-filler-{i}", "f" * 4000) for i in range(18)])
    c.wait(lambda: c.streams[sid]["ended"] or c.streams[sid]["reset"] is not None,
           what="the answer to a large header list")
    t.check("a header list past the limit resets its stream",
            c.streams[sid]["reset"] is not None and c.streams[sid]["headers"] is None,
            str(c.streams[sid]))
    status, _, _ = c.fetch("GET", "/version", headers=[(f"x-filler-{i}", "f" * 4000) for i in range(14)])
    t.check("a header list under the limit is served", status == 200, str(status))
    c.close()

    # A client that offers only HTTP/1.1 (kubectl's exec and port-forward do) keeps HTTP/1.1.
    s = tls_socket(port, ["http/1.1"])
    t.check("ALPN keeps http/1.1 for a client offering only it",
            s.selected_alpn_protocol() == "http/1.1", str(s.selected_alpn_protocol()))
    s.close()

    # curl negotiates HTTP/2 as any h2 client does.
    out = subprocess.run(["curl", "-sk", "--http2", "-o", "/dev/null", "-w", "%{http_version}",
                          f"https://127.0.0.1:{port}/version"], capture_output=True, text=True)
    t.check("curl --http2 gets HTTP/2", out.stdout.strip() == "2", out.stdout + out.stderr)


def check_watches(t, server, port):
    c = H2(port)
    status, _, body = c.fetch("POST", "/api/v1/namespaces",
                              json.dumps({"metadata": {"name": "w2"}}).encode())
    status, _, body = c.fetch("GET", "/api/v1/namespaces/w2/configmaps")
    rv = json.loads(body)["metadata"]["resourceVersion"]
    n = 200
    watches = [c.request("GET", f"/api/v1/namespaces/w2/configmaps?watch=1&resourceVersion={rv}")
               for _ in range(n)]
    c.wait(lambda: all(c.streams[s]["headers"] for s in watches), what="200 watch heads")
    t.check("200 watch streams open on one connection",
            all(c.streams[s]["headers"][":status"] == "200" for s in watches))
    # One more in kube's protobuf watch form (client-go's typed watches ask for it).
    pbw = c.request("GET", f"/api/v1/namespaces/w2/configmaps?watch=1&resourceVersion={rv}",
                    headers=[("accept", "application/vnd.kubernetes.protobuf, application/json")])
    # And one in kube's CBOR form (application/cbor-seq: a self-described item per event).
    cbw = c.request("GET", f"/api/v1/namespaces/w2/configmaps?watch=1&resourceVersion={rv}",
                    headers=[("accept", "application/cbor")])
    writer = H2(port)
    count = 20
    for i in range(count):
        writer.fetch("POST", "/api/v1/namespaces/w2/configmaps",
                     json.dumps(configmap(f"e-{i}", {"i": str(i)})).encode())

    def complete():
        return all(c.streams[s]["data"].count(b'"name":"e-') >= count for s in watches)
    try:
        c.wait(complete, timeout=20, what="every event on every stream")
    except AssertionError as e:
        print(e)
    in_order = 0
    for s in watches:
        # (kube-root-ca.crt, published into the new namespace, may come among them)
        names = [e["object"]["metadata"]["name"] for e in events_of(c.streams[s]["data"])
                 if e["object"]["metadata"]["name"].startswith("e-")]
        if names == [f"e-{i}" for i in range(count)]:
            in_order += 1
    t.check(f"each of {n} watch streams on one connection sees every event in order",
            in_order == n, f"{in_order} of {n}")
    c.wait(lambda: c.streams[pbw]["data"].count(b"e-") >= count, what="the protobuf watch's events")
    data = c.streams[pbw]["data"]
    frames, offset = [], 0
    while offset + 4 <= len(data):
        size = int.from_bytes(data[offset:offset + 4], "big")
        frames.append(data[offset + 4:offset + 4 + size])
        offset += 4 + size
    named = [f for f in frames if b"e-" in f]
    # Each name as protobuf writes a string: its length, then its bytes.
    positions = [data.find(bytes([len(f"e-{i}")]) + f"e-{i}".encode()) for i in range(count)]
    t.check("a protobuf watch over HTTP/2: length-prefixed WatchEvents, every event in order",
            c.streams[pbw]["headers"].get("content-type") ==
            "application/vnd.kubernetes.protobuf;stream=watch" and offset == len(data) and
            len(named) >= count and all(f.startswith(b"\x0a") for f in frames) and
            -1 not in positions and positions == sorted(positions),
            f"{c.streams[pbw]['headers']} {len(frames)} frames, positions {positions[:5]}")

    c.wait(lambda: c.streams[cbw]["data"].count(b"e-") >= count, what="the CBOR watch's events")
    decoder = cbor2.CBORDecoder(io.BytesIO(bytes(c.streams[cbw]["data"])))
    items = []
    while True:
        try:
            items.append(decoder.decode())
        except (cbor2.CBORDecodeEOF, EOFError):
            break
    names = [e.get(b"object", {}).get(b"metadata", {}).get(b"name", b"").decode()
             for e in items if isinstance(e, dict)]
    t.check("a CBOR watch over HTTP/2: application/cbor-seq, every event in order",
            c.streams[cbw]["headers"].get("content-type") == "application/cbor-seq" and
            [n for n in names if n.startswith("e-")] == [f"e-{i}" for i in range(count)],
            f"{c.streams[cbw]['headers']} {names[:5]}")

    # A reset ends that watch only: the others see the next event, the server's watchers drop.
    def watchers():
        status, _, body = writer.fetch("GET", "/metrics")
        total = 0
        for line in body.decode().splitlines():
            if line.startswith("kwatch_watchers{") and 'resource="configmaps"' in line:
                total += float(line.rsplit(" ", 1)[1])
        return total
    before = watchers()
    victim = watches[0]
    c.conn.reset_stream(victim, error_code=8)  # CANCEL
    c.flush()
    wait_for(lambda: watchers() <= before - 1, what="the reset watch to unregister")
    t.check("a reset stream's watch is unregistered", watchers() <= before - 1)
    writer.fetch("POST", "/api/v1/namespaces/w2/configmaps",
                 json.dumps(configmap("after-reset")).encode())
    others = watches[1:]
    c.wait(lambda: all(b"after-reset" in c.streams[s]["data"] for s in others),
           what="the event after a reset on the other streams")
    t.check("the other 199 watches go on after one is reset",
            all(b"after-reset" in c.streams[s]["data"] for s in others) and
            b"after-reset" not in c.streams[victim]["data"])
    writer.close()
    return c, others


def check_limits(t, server, port):
    # More concurrent streams than announced: refused by the protocol, the connection serves on.
    c = H2(port)
    c.pump(0.5)
    c.conn.update_settings({})
    opened = []
    for _ in range(110):
        sid = c.conn.get_next_available_stream_id()
        # Past the announced limit h2 itself refuses to open a stream: send raw HEADERS then.
        try:
            c.conn.send_headers(sid, [(":method", "GET"), (":path", "/api/v1/namespaces?watch=1"),
                                      (":scheme", "https"), (":authority", "127.0.0.1")])
            c.streams[sid] = {"headers": None, "data": b"", "ended": False, "reset": None}
            opened.append(sid)
        except h2.exceptions.TooManyStreamsError:
            break
    c.flush()
    t.check("the client library stops at the server's stream limit", len(opened) == 100, str(len(opened)))
    c.close()

    # A flood of requests each reset at once (CVE-2023-44487): the connection is ended,
    # and other clients are served throughout.
    c = H2(port)
    c.pump(0.3)
    sent = 0
    started = time.monotonic()
    try:
        while sent < 20000 and not c.closed and c.terminated is None:
            for _ in range(100):
                sid = c.conn.get_next_available_stream_id()
                c.conn.send_headers(sid, [(":method", "GET"), (":path", "/api/v1/namespaces?watch=1"),
                                          (":scheme", "https"), (":authority", "127.0.0.1")])
                c.conn.reset_stream(sid, error_code=8)
                sent += 1
            c.flush()
            c.pump(0)
    except (OSError, h2.exceptions.ProtocolError):
        c.closed = True
    deadline = time.monotonic() + 10
    while not c.closed and c.terminated is None and time.monotonic() < deadline:
        c.pump(0.2)
    t.check("a rapid-reset flood ends its connection",
            c.closed or (c.terminated is not None and c.terminated.error_code != 0),
            f"sent {sent} in {time.monotonic() - started:.1f}s, terminated={c.terminated}")
    c.close()
    check_served(t, port, "other clients are served after a reset flood")

    # Garbage after the preface: the connection ends (GOAWAY), others are served.
    c = H2(port)
    c.pump(0.3)
    c.sock.sendall(b"\x00\x00\x08\xee\xff\x00\x00\x00\x01" + os.urandom(8) +  # unknown type: ignored
                   b"\x00\x00\x04\x04\x00\x00\x00\x00\x07" + b"\x00" * 4)  # SETTINGS on a stream
    closed = wait_closed(c.sock, 10)
    t.check("a protocol error ends its connection", closed)
    c.close()

    # A PING flood from a client that reads none of the answers: cut off once a bounded
    # number of answers wait, not served forever.
    c = H2(port)
    c.pump(0.3)
    ping = b"\x00\x00\x08\x06\x00\x00\x00\x00\x00" + b"12345678"
    sent = 0
    try:
        # Past what the sockets' buffers hold (a few MiB on loopback): 3M PINGs are 51 MB.
        c.sock.settimeout(10)
        for _ in range(3000):
            c.sock.sendall(ping * 1000)
            sent += 1000
    except (OSError, ssl.SSLError):
        pass
    closed = wait_closed(c.sock, 10, drain=True)
    t.check("a PING flood that reads no answers ends its connection", closed, f"sent {sent} PINGs")
    c.close()
    check_served(t, port, "other clients are served after garbage and a PING flood")

    # A header block that never ends (CONTINUATION frames, CVE-2024-27316's kind): the
    # connection is ended (by nghttp2's own limit on CONTINUATION frames), not fed megabytes.
    c = H2(port)
    c.pump(0.3)
    encoder = hpack.Encoder()
    block = encoder.encode([(":method", "GET"), (":path", "/version"), (":scheme", "https"),
                            (":authority", "127.0.0.1")] +
                           [(f"x-filler-{i}", "f" * 4000) for i in range(600)], huffman=False)
    sid = c.conn.get_next_available_stream_id()
    frame = 16384
    sent = 0
    try:
        for off in range(0, len(block), frame):
            piece = block[off:off + frame]
            ftype = 0x1 if off == 0 else 0x9  # HEADERS, then CONTINUATION; never END_HEADERS
            c.sock.sendall(struct.pack(">I", len(piece))[1:] + bytes([ftype, 0]) +
                           struct.pack(">I", sid) + piece)
            sent += len(piece)
    except (OSError, ssl.SSLError):
        pass
    closed = False
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            r, _, _ = select.select([c.sock], [], [], 0.2)
            if r and not c.sock.recv(65536):
                closed = True
                break
        except (OSError, ssl.SSLError):
            closed = True
            break
    t.check("an endless header block ends its connection", closed, f"sent {sent} bytes")
    c.close()
    check_served(t, port, "other clients are served after a CONTINUATION flood")


def send_bodies(c, streams, size, seconds, headers=(), reset=True):
    """Opens `streams` POSTs (with `headers`) and sends `size` bytes on each as far as flow
    control lets the client within `seconds`, stopping on a stream once it is answered;
    `reset`: the streams not answered are reset at the end. Returns (bytes sent in all, ids)."""
    body = b"x" * size
    sids = []
    for _ in range(streams):
        sid = c.conn.get_next_available_stream_id()
        c.conn.send_headers(sid, [(":method", "POST"), (":path", "/api/v1/namespaces/big/configmaps"),
                                  (":scheme", "https"), (":authority", "127.0.0.1"),
                                  ("content-type", "application/json")] + list(headers))
        c.streams[sid] = {"headers": None, "data": b"", "ended": False, "reset": None}
        sids.append(sid)
    c.flush()
    sent = {sid: 0 for sid in sids}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not c.closed and c.terminated is None:
        progressed = False
        for sid in sids:
            if c.streams[sid]["reset"] is not None or c.streams[sid]["headers"] is not None:
                continue
            try:
                window = min(c.conn.local_flow_control_window(sid), c.conn.max_outbound_frame_size,
                             size - sent[sid])
            except h2.exceptions.StreamClosedError:
                continue
            if window > 0:
                c.conn.send_data(sid, body[:window])
                sent[sid] += window
                progressed = True
        c.flush()
        c.pump(0 if progressed else 0.1)
    if reset:
        for sid in sids:
            if c.streams[sid]["reset"] is None and not c.closed and c.terminated is None:
                c.conn.reset_stream(sid, error_code=8)
        c.flush()
    return sum(sent.values()), sids


def check_unadmitted_bodies(t, port, admin):
    """Bodies of requests refused on their head (no credentials) are never taken: the client can
    send only the first flow-control windows of them, not megabytes; the same connection then
    still carries an admitted upload (the refused bodies' room went back to it)."""
    c = H2(port)
    c.pump(0.3)
    total, sids = send_bodies(c, 20, 1 << 20, seconds=3, reset=False)
    # Until every refusal has come (the loop stops sending on a stream once it is answered).
    c.wait(lambda: all(c.streams[sid]["headers"] for sid in sids), what="the refusals")
    statuses = [c.streams[sid]["headers"][":status"] if c.streams[sid]["headers"] else None
                for sid in sids]
    t.check("requests without credentials over HTTP/2 are refused on their head (401)",
            statuses == ["401"] * len(sids), str(statuses))
    t.check("a refused request's body is not taken past the first flow-control windows",
            total <= 320 * 1024, f"the client sent {total} bytes of 20 MiB")
    status, _, body = c.fetch("POST", "/api/v1/namespaces/big/configmaps",
                              json.dumps(configmap("after-refusals", {"v": "y" * 900_000})).encode(),
                              admin)
    t.check("an admitted 900 kB upload on the same connection after the refusals",
            status == 201, f"{status} {body[:200]!r}")
    # A 3.6 MB list from the cache, plain and gzipped, equal to what HTTP/1.1 gets.
    path = "/api/v1/namespaces/big/configmaps"
    status, headers, plain = c.fetch("GET", path, headers=admin)
    status_gz, headers_gz, zipped = c.fetch("GET", path, headers=admin + [("accept-encoding", "gzip")])
    names = sorted(i["metadata"]["name"] for i in json.loads(plain)["items"]) if status == 200 else []
    t.check("a 3.6 MB list over HTTP/2, whole, with its length",
            status == 200 and {"big-0", "big-1", "big-2", "after-refusals"} <= set(names) and
            headers.get("content-length") == str(len(plain)), f"{status} {names}")
    t.check("... and gzipped, the same list",
            status_gz == 200 and headers_gz.get("content-encoding") == "gzip" and
            gzip.decompress(zipped) == plain, f"{status_gz} {headers_gz}")
    c.close()


def check_unread_lists(t, server, admin):
    """Fifty streams of a 3.6 MB list a client does not read: each is answered (its head comes)
    while the server holds only each one's first buffer (256 KiB), not fifty whole lists."""
    def rss():
        with open(f"/proc/{server.proc.pid}/status") as f:
            return next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS:"))
    c = H2(server.secure_port, window=1)
    c.auto_ack = False
    c.pump(0.3)
    before = rss()
    # resourceVersion=0: served from the watch cache on both backends (a consistent list on
    # etcd may come from etcd, whole, over either protocol).
    sids = [c.request("GET", "/api/v1/namespaces/big/configmaps?resourceVersion=0", headers=admin)
            for _ in range(50)]
    # A head goes out only after its handler made the first part of its answer.
    c.wait(lambda: all(c.streams[s]["headers"] for s in sids), what="fifty list heads")
    grown = rss() - before
    t.check("fifty unread 3.6 MB lists over HTTP/2 hold well under fifty lists' memory",
            grown < 60 * 1024 * 1024, f"RSS grew {grown / 1e6:.0f} MB")
    c.close()


def check_reset_of_waiting_requests(t, binary, tmp):
    """Requests that wait (here: for their priority level's one seat) and are reset by the client
    still run until they get their seat or give up. A client resetting them to open more is
    cut off (GOAWAY ENHANCE_YOUR_CALM) once four times the stream limit wait to start: it
    cannot make the server hold an unbounded number of requests."""
    tokens = os.path.join(tmp, "tokens.csv")
    with open(tokens, "w") as f:
        f.write('admin,admin,1,"system:masters"\nattacker,attacker,2\n')
    server = Server(binary, data_dir=tmp + "/data-reset", https=True,
                    extra_args=[f"--cert-dir={tmp}/certs-reset", f"--token-auth-file={tokens}",
                                "--anonymous-auth=false", "--max-requests-inflight=10",
                                "--max-mutating-requests-inflight=5"]).start()
    admin = [("authorization", "Bearer admin")]
    attacker = [("authorization", "Bearer attacker")]
    try:
        a = H2(server.secure_port)
        group = "/apis/flowcontrol.apiserver.k8s.io/v1"
        level = {"metadata": {"name": "tiny"}, "spec": {"type": "Limited", "limited": {
            "nominalConcurrencyShares": 1, "lendablePercent": 0, "borrowingLimitPercent": 0,
            "limitResponse": {"type": "Queue", "queuing": {
                "queues": 1, "handSize": 1, "queueLengthLimit": 5000}}}}}
        schema = {"metadata": {"name": "attacker"}, "spec": {
            "priorityLevelConfiguration": {"name": "tiny"}, "matchingPrecedence": 100,
            "rules": [{"subjects": [{"kind": "User", "user": {"name": "attacker"}}],
                       "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                                          "namespaces": ["*"], "clusterScope": True}],
                       "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}}
        a.fetch("POST", f"{group}/prioritylevelconfigurations", json.dumps(level).encode(), admin)
        status, _, body = a.fetch("POST", f"{group}/flowschemas", json.dumps(schema).encode(), admin)
        uid = json.loads(body)["metadata"]["uid"]
        a.fetch("POST", "/api/v1/namespaces", json.dumps({"metadata": {"name": "big"}}).encode(), admin)
        for i in range(3):
            a.fetch("POST", "/api/v1/namespaces/big/configmaps",
                    json.dumps(configmap(f"big-{i}", {"v": "x" * 900_000})).encode(), admin)

        check_unadmitted_bodies(t, server.secure_port, admin)
        check_unread_lists(t, server, admin)

        # A client that never reads an answer (its window shut): the stream is reset after the
        # write timeout (60 s) instead of pinning the answer.
        stall = H2(server.secure_port, window=1)
        stall.auto_ack = False
        stall.pump(0.3)
        stalled = stall.request("GET", "/api/v1/namespaces/big/configmaps", headers=admin)
        stalled_at = time.monotonic()

        def classified():
            _, headers, _ = a.fetch("GET", "/version", headers=attacker)
            return headers.get("x-kubernetes-pf-flowschema-uid") == uid
        wait_for(classified, what="the attacker's FlowSchema to apply")
        a.close()

        # The attacker holds its level's seat: a 2.7 MB list it never reads (window 1 byte).
        c = H2(server.secure_port, window=1)
        c.auto_ack = False
        c.pump(0.3)
        hold = c.request("GET", "/api/v1/namespaces/big/configmaps", headers=attacker)
        c.wait(lambda: c.streams[hold]["headers"] is not None, what="the held list's head")
        sent = 0
        # Each round: 99 requests (the held list is the 100th stream), a moment for their
        # handlers to start and wait for the seat, then all reset.
        for _ in range(8):
            sids = []
            for _ in range(99):
                sid = c.conn.get_next_available_stream_id()
                c.conn.send_headers(sid, [(":method", "GET"), (":path", "/api/v1/namespaces"),
                                          (":scheme", "https"), (":authority", "127.0.0.1"),
                                          ("authorization", "Bearer attacker")], end_stream=True)
                sids.append(sid)
                sent += 1
            c.flush()
            c.pump(0.2)
            if c.terminated is not None or c.closed:
                break
            for sid in sids:
                c.conn.reset_stream(sid, error_code=8)
            c.flush()
            c.pump(0.05)
            if c.terminated is not None or c.closed:
                break
            if sent == 99:
                # Every place is now taken by a reset request that waits: requests with bodies
                # wait to start, and until they are admitted their bodies are not taken.
                total, _ = send_bodies(c, 10, 1 << 20, seconds=2,
                                       headers=[("authorization", "Bearer attacker")])
                t.check("bodies of requests waiting to start are not taken past the first "
                        "flow-control windows", total <= 320 * 1024,
                        f"the client sent {total} bytes of 10 MiB")
        deadline = time.monotonic() + 10
        while c.terminated is None and not c.closed and time.monotonic() < deadline:
            c.pump(0.2)
        t.check("resetting waiting requests to open more ends the connection (ENHANCE_YOUR_CALM)",
                c.terminated is not None and c.terminated.error_code == 11,
                f"sent {sent}, terminated={c.terminated}, closed={c.closed}")
        c.close()
        probe = H2(server.secure_port)
        status, _, _ = probe.fetch("GET", "/version", headers=admin)
        t.check("others are served while the reset requests wait", status == 200, str(status))
        probe.close()
        try:
            stall.wait(lambda: stall.streams[stalled]["reset"] is not None, timeout=90,
                       what="the stalled answer's reset")
        except AssertionError as e:
            print(e)
        t.check("an answer the client does not read is reset after the write timeout",
                stall.streams[stalled]["reset"] == 8 and time.monotonic() - stalled_at >= 55,
                f"{stall.streams[stalled]['reset']} after {time.monotonic() - stalled_at:.0f}s")
        stall.close()
    finally:
        server.stop()


def main():
    binary = sys.argv[1]
    t = Checks()
    with TempDir() as tmp:
        server = Server(binary, data_dir=tmp + "/data", https=True,
                        extra_args=[f"--cert-dir={tmp}/certs"]).start()
        try:
            check_basics(t, server, server.secure_port)
            check_limits(t, server, server.secure_port)
            t.check("server alive", server.alive())
        finally:
            server.stop()

        check_reset_of_waiting_requests(t, binary, tmp)

        # 200 watches on one connection need more than the default 100 streams.
        server = Server(binary, data_dir=tmp + "/data2", https=True,
                        extra_args=[f"--cert-dir={tmp}/certs2", "--max-watches-per-user=0",
                                    "--http2-max-streams-per-connection=250"]).start()
        try:
            c = H2(server.secure_port)
            c.pump(0.5)
            t.check("--http2-max-streams-per-connection is announced",
                    c.remote_settings.get(h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS) == 250,
                    str(c.remote_settings))
            c.close()
            c, others = check_watches(t, server, server.secure_port)
            # Graceful shutdown: GOAWAY, every watch stream ends cleanly, the server exits 0.
            # The frames are read raw from here: the h2 library takes GOAWAY as the end of the
            # connection, while the streams it spares may still send (RFC 9113 6.8).
            c.pump(0.3)
            server.proc.send_signal(15)
            goaway, ended = read_frames_until_closed(c, timeout=20)
            t.check("graceful shutdown sends GOAWAY (NO_ERROR)", goaway == 0, str(goaway))
            done = sum(1 for s in others if s in ended)
            t.check("every watch stream ends cleanly at shutdown", done == len(others),
                    f"{done} of {len(others)}")
            t.check("the server exits 0", server.proc.wait(timeout=20) == 0)
            c.close()
        finally:
            server.stop()

        # The soft open-file limit is raised to the hard one at start, and said so.
        server = Server(binary, data_dir=tmp + "/data4", max_open_files=(1024, 4096))
        try:
            server.start()
            with open(f"/proc/{server.proc.pid}/limits") as f:
                line = next(l for l in f if l.startswith("Max open files"))
            t.check("the open-file limit is raised to the hard limit at start",
                    line.split()[3:5] == ["4096", "4096"], line)
            t.check("... and logged", "open files: up to 4096 (raised from 1024" in server.read_log(),
                    server.read_log()[-300:])
        finally:
            server.stop()

        # --disable-http2-serving: HTTP/1.1 only.
        server = Server(binary, data_dir=tmp + "/data3", https=True,
                        extra_args=[f"--cert-dir={tmp}/certs3", "--disable-http2-serving=true"]).start()
        try:
            s = tls_socket(server.secure_port, ["h2", "http/1.1"])
            t.check("--disable-http2-serving: ALPN picks http/1.1",
                    s.selected_alpn_protocol() == "http/1.1", str(s.selected_alpn_protocol()))
            s.close()
        finally:
            server.stop()
    t.finish()


if __name__ == "__main__":
    main()
