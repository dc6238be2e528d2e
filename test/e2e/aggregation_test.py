"""API aggregation as kubectl sees it: APIServices (apiregistration.k8s.io/v1) served and
validated as kube-aggregator does, a local APIService for every group/version kwatch serves
(built-in ones registered at start-up, a CustomResourceDefinition's for as long as it serves
them), `kubectl get apiservices` with kube's columns; then a metrics.k8s.io extension server the
test runs (HTTPS, its own CA, behind a Service whose Endpoints hold 127.0.0.1, so the server
runs with --unsafe-webhook-loopback-endpoints): the availability kube writes as the Service,
Endpoints and server appear, requests and a watch passed through with the caller in
X-Remote-User and without its credentials, 503 while the extension is down and recovery.

Usage: aggregation_test.py <path to kwatch-apiserver>
"""
import base64
import hashlib
import http.client
import json
import socket
import ssl
import struct
import sys
import time

from cryptography.hazmat.primitives import serialization

from harness import (Checks, Server, TempDir, WatchStream, WebSocketWatch, extension_api_objects,
                     kubectl_runner, wait_for)
from pki import CA
from webhook_server import WebhookServer

GV = "/apis/metrics.k8s.io/v1beta1"


class MetricsServer(WebhookServer):
    """A tiny metrics.k8s.io/v1beta1 extension server: discovery, node and pod metrics, its
    OpenAPI document, and a watch of nodes that sends two events and then stays quiet."""

    def __init__(self, directory):
        self.seen = []  # (path, headers, X-Remote-Group values)
        self.watches_cut = 0  # quiet watches whose connection the aggregator closed
        self.failing_discovery = False  # answer 503 to 4 of every 5 discovery GETs
        self.echoed = []  # (opcode, payload) of each message the echo WebSocket got
        self.discovery_answers = []  # the status of each discovery GET
        super().__init__(directory, name="metrics",
                         dns_names=("metrics-server.kube-system.svc",), on_get=self.get)

    def echo(self, h):
        """A WebSocket that answers each message with "echo:" and the message, same type."""
        key = h.headers["Sec-WebSocket-Key"]
        accept = base64.b64encode(hashlib.sha1(
            (key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
        h.send_response(101)
        h.send_header("Upgrade", "websocket")
        h.send_header("Connection", "Upgrade")
        h.send_header("Sec-WebSocket-Accept", accept)
        h.end_headers()
        h.wfile.flush()
        h.close_connection = True
        while True:
            head = h.rfile.read(2)
            if len(head) < 2:
                return
            opcode, n = head[0] & 0x0F, head[1] & 0x7F
            if n == 126:
                n = struct.unpack(">H", h.rfile.read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", h.rfile.read(8))[0]
            mask = h.rfile.read(4) if head[1] & 0x80 else b"\0\0\0\0"
            payload = bytes(b ^ mask[i % 4] for i, b in enumerate(h.rfile.read(n)))
            if opcode == 8:
                h.wfile.write(ws_frame(8, payload[:2]))
                h.wfile.flush()
                return
            if opcode in (1, 2):
                with self.lock:
                    self.echoed.append((opcode, payload))
                h.wfile.write(ws_frame(opcode, b"echo:" + payload))
                h.wfile.flush()

    def get(self, h):
        path = h.path.split("?")[0]
        with self.lock:
            self.seen.append((h.path, {k.lower(): v for k, v in h.headers.items()},
                              h.headers.get_all("X-Remote-Group") or []))

        def send_json(body, status=200, headers=()):
            data = json.dumps(body).encode()
            h.send_response(status)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(data)))
            for name, value in headers:
                h.send_header(name, value)
            h.end_headers()
            h.wfile.write(data)

        if path == GV:
            with self.lock:
                fail = self.failing_discovery and len(self.discovery_answers) % 5 != 4
                self.discovery_answers.append(503 if fail else 200)
            if fail:
                return send_json({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                  "code": 503}, 503)
            return send_json({"kind": "APIResourceList", "apiVersion": "v1",
                              "groupVersion": "metrics.k8s.io/v1beta1",
                              "resources": [
                                  {"name": "nodes", "kind": "NodeMetrics", "namespaced": False,
                                   "verbs": ["get", "list"]},
                                  {"name": "pods", "kind": "PodMetrics", "namespaced": True,
                                   "verbs": ["get", "list"]}]})
        if path == "/openapi/v2":
            # Past the 16 MiB of an extension's v2 document the aggregator reads: not merged.
            return send_json({"swagger": "2.0", "paths": {}, "definitions": {
                "io.k8s.metrics.pkg.apis.metrics.v1beta1.Oversized": {
                    "type": "object", "description": "x" * (17 << 20)}}})
        if path == "/openapi/v3/apis/metrics.k8s.io/v1beta1":
            schema = "io.k8s.metrics.pkg.apis.metrics.v1beta1.NodeMetrics"
            return send_json({
                "openapi": "3.0.0", "info": {"title": "metrics", "version": "v1beta1"},
                # kubectl explain finds a resource's schema through its path's GET.
                "paths": {GV + "/nodes/{name}": {"get": {
                    "x-kubernetes-action": "get",
                    "x-kubernetes-group-version-kind": {
                        "group": "metrics.k8s.io", "version": "v1beta1", "kind": "NodeMetrics"},
                    "responses": {"200": {"content": {"application/json": {"schema": {
                        "$ref": "#/components/schemas/" + schema}}}}}}}},
                "components": {"schemas": {schema: {
                    "type": "object",
                    "description": "NodeMetrics sets resource usage metrics of a node.",
                    "properties": {
                        "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                        "metadata": {"type": "object"},
                        "window": {"type": "string", "description": "The sampling window."},
                        "usage": {"type": "object", "additionalProperties": {"type": "string"}}},
                    "x-kubernetes-group-version-kind": [
                        {"group": "metrics.k8s.io", "kind": "NodeMetrics",
                         "version": "v1beta1"}]}}}})
        if path == GV + "/nodes" and "watch=1" in h.path:
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.send_header("Transfer-Encoding", "chunked")
            h.end_headers()
            for i in range(2):
                ev = json.dumps({"type": "ADDED", "object": {
                    "kind": "NodeMetrics", "apiVersion": "metrics.k8s.io/v1beta1",
                    "metadata": {"name": f"node-{i}"}}}).encode() + b"\n"
                h.wfile.write(b"%x\r\n%s\r\n" % (len(ev), ev))
                h.wfile.flush()
            # Quiet from here on; the aggregator closing the connection ends it early.
            h.connection.settimeout(0.1)
            deadline = time.monotonic() + 20
            while not self.release.is_set() and time.monotonic() < deadline:
                try:
                    if h.connection.recv(1) == b"":
                        break
                except socket.timeout:
                    continue
                except (OSError, ssl.SSLError):
                    break
            else:
                try:
                    h.wfile.write(b"0\r\n\r\n")
                except OSError:
                    pass
                return
            with self.lock:
                self.watches_cut += 1
            return
        if path == GV + "/echo" and h.headers.get("Upgrade", "").lower() == "websocket":
            return self.echo(h)
        if path == GV + "/pods":
            # Headers of its own, and two warnings (one with quotes in it).
            return send_json({"kind": "PodMetricsList", "apiVersion": "metrics.k8s.io/v1beta1",
                              "metadata": {}, "items": []},
                             headers=[("X-Metrics-Source", "e2e"),
                                      ("Warning", '299 - "metrics are estimates"'),
                                      ("Warning", '299 - "a \\"quoted\\" word"'),
                                      ("Connection", "close")])
        if path == GV + "/nodes":
            return send_json({"kind": "NodeMetricsList", "apiVersion": "metrics.k8s.io/v1beta1",
                              "metadata": {}, "items": [
                                  {"metadata": {"name": "node-0"},
                                   "timestamp": "2026-11-27T00:00:00Z", "window": "10s",
                                   "usage": {"cpu": "250m", "memory": "1Gi"}}]})
        return send_json({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                          "reason": "NotFound", "code": 404}, 404)


def ws_frame(opcode, payload):
    """One unmasked WebSocket frame (a server's)."""
    n = len(payload)
    head = bytes([0x80 | opcode])
    if n < 126:
        head += bytes([n])
    elif n < 65536:
        head += bytes([126]) + struct.pack(">H", n)
    else:
        head += bytes([127]) + struct.pack(">Q", n)
    return head + payload


def api_services(kc):
    code, out = kc("get", "apiservices", "-o", "json")
    if code != 0:
        return {}
    return {s["metadata"]["name"]: s for s in json.loads(out)["items"]}


def checks_of(t, server, tmp):
    kc = kubectl_runner(server, tmp)
    if kc is None:
        print("kubectl is not installed: skipping")
        sys.exit(77)
    services = wait_for(lambda: (lambda s: "v1.apps" in s and s)(api_services(kc)), timeout=10,
                        what="the local APIServices") or {}
    core = services.get("v1.", {})
    t.check("every served group/version has a local APIService (core as \"v1.\")",
            {"v1.", "v1.apps", "v2.autoscaling", "v1.authorization.k8s.io",
             "v1beta1.admissionregistration.k8s.io"} <= set(services)
            and "v1.apiregistration.k8s.io" not in services, sorted(services))
    t.check("... with kube's priorities and label",
            core.get("spec", {}).get("groupPriorityMinimum") == 18000
            and services.get("v2.autoscaling", {}).get("spec", {}).get("versionPriority") == 30
            and core.get("metadata", {}).get("labels", {}).get(
                "kube-aggregator.kubernetes.io/automanaged") == "onstart", core)
    conditions = core.get("status", {}).get("conditions", [])
    t.check("... Available: Local", any(c.get("type") == "Available" and c.get("status") == "True"
                                        and c.get("reason") == "Local" for c in conditions),
            conditions)
    code, out = kc("get", "apiservices")
    lines = out.splitlines()
    t.check("kubectl get apiservices prints NAME SERVICE AVAILABLE AGE",
            code == 0 and lines[0].split() == ["NAME", "SERVICE", "AVAILABLE", "AGE"]
            and any(ln.split()[:3] == ["v1.apps", "Local", "True"] for ln in lines), out)

    remote = {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
              "metadata": {"name": "v1beta1.metrics.k8s.io"},
              "spec": {"group": "metrics.k8s.io", "version": "v1beta1",
                       "groupPriorityMinimum": 100, "versionPriority": 100,
                       "insecureSkipTLSVerify": True,
                       "service": {"namespace": "kube-system", "name": "metrics-server"}}}
    code, out = kc("apply", "-f", "-", stdin=json.dumps(remote))
    got = api_services(kc).get("v1beta1.metrics.k8s.io", {})
    t.check("a remote APIService is created with kube's default port and no status yet",
            code == 0 and got.get("spec", {}).get("service", {}).get("port") == 443, out)
    bad = json.loads(json.dumps(remote))
    bad["metadata"]["name"] = "v1.metrics.k8s.io"
    bad["spec"]["caBundle"] = "Zm9v"
    code, out = kc("apply", "-f", "-", stdin=json.dumps(bad))
    t.check("a bad APIService is refused with kube's words",
            code != 0 and "must be `spec.version+\".\"+spec.group`: \"v1beta1.metrics.k8s.io\"" in out
            and "may not be true if caBundle is present" in out, out)

    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.reg.example.com"},
           "spec": {"group": "reg.example.com", "scope": "Namespaced",
                    "names": {"plural": "widgets", "kind": "Widget"},
                    "versions": [
                        {"name": "v1", "served": True, "storage": True,
                         "schema": {"openAPIV3Schema": {"type": "object"}}},
                        {"name": "v2", "served": False, "storage": False,
                         "schema": {"openAPIV3Schema": {"type": "object"}}}]}}
    kc("apply", "-f", "-", stdin=json.dumps(crd))
    got = wait_for(lambda: api_services(kc).get("v1.reg.example.com"), timeout=10,
                   what="the definition's APIService") or {}
    t.check("a definition's served version gets a local APIService (1000/100, label true)",
            got.get("spec", {}).get("groupPriorityMinimum") == 1000
            and got.get("metadata", {}).get("labels", {}).get(
                "kube-aggregator.kubernetes.io/automanaged") == "true"
            and "v2.reg.example.com" not in api_services(kc), got)
    kc("delete", "crd", "widgets.reg.example.com")
    gone = wait_for(lambda: "v1.reg.example.com" not in api_services(kc), timeout=10,
                    what="the definition's APIService gone")
    t.check("... and loses it with the definition", bool(gone))
    code, out = kc("delete", "apiservice", "v1.apps")
    t.check("a built-in one deleted by hand stays deleted while the server runs",
            code == 0 and "v1.apps" not in api_services(kc), out)
    t.check("... and a user's remote APIService is left alone",
            "v1beta1.metrics.k8s.io" in api_services(kc))


def waited(condition, timeout, what):
    """wait_for's value, or False when it timed out (for a check to report, not abort)."""
    try:
        return wait_for(condition, timeout=timeout, what=what)
    except AssertionError:
        return False


def available(kc, name="v1beta1.metrics.k8s.io"):
    service = api_services(kc).get(name, {})
    for c in service.get("status", {}).get("conditions", []):
        if c.get("type") == "Available":
            return c
    return {}


def check_extension(t, server, tmp):
    kc = kubectl_runner(server, tmp)
    metrics = MetricsServer(tmp)
    try:
        kc("delete", "apiservice", "v1beta1.metrics.k8s.io", "--ignore-not-found")
        kc("create", "namespace", "kube-system")
        service = {"apiVersion": "v1", "kind": "Service",
                   "metadata": {"name": "metrics-server", "namespace": "kube-system"},
                   "spec": {"ports": [{"name": "https", "port": 443,
                                       "targetPort": metrics.port}]}}
        kc("apply", "-f", "-", stdin=json.dumps(service))
        api_service = {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                       "metadata": {"name": "v1beta1.metrics.k8s.io"},
                       "spec": {"group": "metrics.k8s.io", "version": "v1beta1",
                                "groupPriorityMinimum": 100, "versionPriority": 100,
                                "caBundle": metrics.ca_bundle(),
                                "service": {"namespace": "kube-system",
                                            "name": "metrics-server"}}}
        kc("apply", "-f", "-", stdin=json.dumps(api_service))
        c = wait_for(lambda: (lambda a: a.get("reason") == "EndpointsNotFound" and a)(
            available(kc)), timeout=10, what="EndpointsNotFound") or available(kc)
        t.check("without Endpoints the APIService is False (EndpointsNotFound) with kube's message",
                c.get("status") == "False" and c.get("message") ==
                'cannot find endpoints for service/metrics-server in "kube-system"', c)
        code, out = kc("get", "apiservices", "v1beta1.metrics.k8s.io")
        t.check("kubectl shows AVAILABLE False (EndpointsNotFound)",
                "False (EndpointsNotFound)" in out and "kube-system/metrics-server" in out, out)
        status, body = server.request("GET", GV + "/nodes")
        t.check("a request for the group while it is not available is 503 service unavailable",
                status == 503 and str(body).strip() == "service unavailable", (status, body))
        endpoints = {"apiVersion": "v1", "kind": "Endpoints",
                     "metadata": {"name": "metrics-server", "namespace": "kube-system"},
                     "subsets": [{"addresses": [{"ip": "127.0.0.1"}],
                                  "ports": [{"name": "https", "port": metrics.port}]}]}
        kc("apply", "-f", "-", stdin=json.dumps(endpoints))
        c = wait_for(lambda: (lambda a: a.get("status") == "True" and a)(available(kc)),
                     timeout=10, what="Available") or available(kc)
        t.check("with its endpoint and a discovery check passed it is True (Passed)",
                c.get("reason") == "Passed" and c.get("message") == "all checks passed", c)
        checks = [h for p, h, g in metrics.seen if p == GV]
        t.check("... the check came as system:kube-aggregator in system:masters",
                any(h.get("x-remote-user") == "system:kube-aggregator" for h in checks)
                and any("system:masters" in g for p, h, g in metrics.seen if p == GV), checks[:1])
        code, out = kc("get", "--raw", GV + "/nodes")
        t.check("kubectl get --raw of an aggregated path is answered by the extension",
                code == 0 and json.loads(out).get("kind") == "NodeMetricsList", out)
        proxied = [h for p, h, g in metrics.seen if p.startswith(GV + "/nodes")]
        last = proxied[-1] if proxied else {}
        # kubectl's identity: anonymous over plain HTTP, its token's user over HTTPS (HTTP/2).
        caller = "kubectl-admin" if server.kubectl_http2 else "system:anonymous"
        t.check("... as the caller in X-Remote-User, without its credentials",
                last.get("x-remote-user") == caller and "authorization" not in last, last)
        # A ServiceAccount's token authenticates the request here; the extension gets the
        # account's name, never the token, nor the identity headers the client made up.
        kc("create", "serviceaccount", "reader")
        code, token = kc("create", "token", "reader")
        status, body = server.request("GET", GV + "/nodes", headers={
            "X-Remote-User": "forged-admin", "X-Remote-Group": "system:masters",
            "Authorization": "Bearer " + token.strip()})
        forged = [(h, g) for p, h, g in metrics.seen if p.startswith(GV + "/nodes")][-1]
        t.check("a client's own X-Remote-* and Authorization headers are not passed on",
                status == 200 and forged[0].get("x-remote-user") ==
                "system:serviceaccount:default:reader" and "system:masters" not in forged[1]
                and "authorization" not in forged[0], (status, forged))
        w = WatchStream(server, GV + "/nodes?watch=1")
        events = w.take(2, timeout=10)
        t.check("a watch streams through from the extension",
                w.status == 200 and [e["object"]["metadata"]["name"] for e in events] ==
                ["node-0", "node-1"], (w.status, events))
        w.close()
        cut = wait_for(lambda: metrics.watches_cut >= 1, timeout=10,
                       what="the upstream watch closed")
        t.check("a client that hangs up on a quiet proxied watch ends the upstream request at "
                "once (no connection left open per abandoned watch)", bool(cut),
                metrics.watches_cut)
        code, out = kc("get", "pods", "-A")
        t.check("other groups are served as before", code == 0, out)
        # Discovery: kubectl finds the extension's resources.
        code, out = kc("api-resources", "--api-group=metrics.k8s.io")
        t.check("kubectl api-resources lists the extension's resources",
                code == 0 and "nodes" in out and "PodMetrics" in out, out)
        status, groups = server.request("GET", "/apis")
        names = [g["name"] for g in groups.get("groups", [])] if isinstance(groups, dict) else []
        status2, group = server.request("GET", "/apis/metrics.k8s.io")
        t.check("the legacy /apis and /apis/metrics.k8s.io list the group",
                "metrics.k8s.io" in names and isinstance(group, dict)
                and group.get("preferredVersion", {}).get("version") == "v1beta1", (names, group))
        code, out = kc("get", "nodes.metrics.k8s.io")
        t.check("kubectl get nodes.metrics.k8s.io goes through the aggregator",
                code == 0 and "node-0" in out, out)
        code, out = kc("explain", "nodes", "--api-version=metrics.k8s.io/v1beta1")
        t.check("kubectl explain reads the extension's OpenAPI through the aggregator",
                code == 0 and "NodeMetrics sets resource usage metrics of a node." in out
                and "window" in out, out)
        kc("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "Node",
                                                  "metadata": {"name": "node-0"}}))
        code, out = kc("top", "node")
        t.check("kubectl top node shows the extension's metrics",
                code == 0 and "node-0" in out and "250m" in out, out)
        read = wait_for(lambda: any(p == "/openapi/v2" for p, _, _ in metrics.seen), timeout=20,
                        what="the aggregator reading the extension's /openapi/v2")
        status, doc = server.request("GET", "/openapi/v2")
        t.check("an extension's /openapi/v2 past 16 MiB is read and not merged", bool(read) and
                status == 200 and "io.k8s.metrics.pkg.apis.metrics.v1beta1.Oversized" not in
                doc.get("definitions", {}), status)
        # kube's discovery check does not verify the extension's certificate: with a caBundle
        # of another CA the APIService stays Available (the check's GET still arrives), while
        # requests through it fail, their TLS handshake refused.
        other = CA(tmp, name="other-ca")
        wrong = json.loads(json.dumps(api_service))
        wrong["spec"]["caBundle"] = base64.b64encode(
            other.cert.public_bytes(serialization.Encoding.PEM)).decode()
        checks_before = len([p for p, h, g in metrics.seen if p == GV])
        kc("apply", "-f", "-", stdin=json.dumps(wrong))
        refused = waited(lambda: server.request("GET", GV + "/nodes")[0] == 503, timeout=10,
                         what="a request through the wrong caBundle to fail")
        arrived = waited(lambda: len([p for p, h, g in metrics.seen if p == GV]) >
                         checks_before + 1, timeout=15, what="a discovery check to arrive")
        c = available(kc)
        t.check("a caBundle that does not match: requests fail (503), the discovery check, "
                "which does not verify, passes (Available stays True)",
                bool(refused) and bool(arrived) and c.get("status") == "True"
                and c.get("reason") == "Passed", (refused, arrived, c))
        kc("apply", "-f", "-", stdin=json.dumps(api_service))
        wait_for(lambda: server.request("GET", GV + "/nodes")[0] == 200, timeout=10,
                 what="requests through the right caBundle again")
        # kube's check makes 5 GETs at once and one that passes is enough: with 4 of every 5
        # discovery GETs answered 503, three rounds of checks keep the APIService True.
        with metrics.lock:
            metrics.failing_discovery = True
            start = len([p for p, h, g in metrics.seen if p == GV])
        rounds = waited(lambda: len([p for p, h, g in metrics.seen if p == GV]) >= start + 15,
                        timeout=20, what="three rounds of discovery checks")
        c = available(kc)
        with metrics.lock:
            metrics.failing_discovery = False
            answered = metrics.discovery_answers[-15:]
        t.check("4 of every 5 discovery GETs failing: the APIService stays Available "
                "(5 attempts at once, one success enough)",
                bool(rounds) and c.get("status") == "True" and 503 in answered, (c, answered))
        # A WebSocket through the aggregator carries the client's messages too (a console, a
        # port forward), with their type.
        import websocket
        got = []
        try:
            ws = websocket.create_connection(f"ws://127.0.0.1:{server.port}{GV}/echo", timeout=10)
            ws.send("hello")
            got.append(ws.recv_data())
            ws.send_binary(b"\x00\x02")
            got.append(ws.recv_data())
            ws.close()
        except (websocket.WebSocketException, OSError) as e:
            got.append(repr(e))
        t.check("a client's WebSocket messages reach the extension and its answers come back, "
                "text as text, binary as binary",
                got == [(1, b"echo:hello"), (2, b"echo:\x00\x02")]
                and metrics.echoed[:2] == [(1, b"hello"), (2, b"\x00\x02")],
                (got, metrics.echoed))
        # Headers both ways, as kube's proxy passes them: the client's (but credentials and
        # the connection's own), and the extension's with its warnings.
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        conn.request("GET", GV + "/pods", headers={"X-Trace-Id": "t-1", "Accept-Encoding": "gzip",
                                                   "Kubectl-Command": "kubectl get"})
        resp = conn.getresponse()
        resp.read()
        conn.close()
        seen = [h for p, h, g in metrics.seen if p.startswith(GV + "/pods")][-1]
        t.check("the client's own headers reach the extension (Accept-Encoding: kwatch's)",
                seen.get("x-trace-id") == "t-1" and seen.get("kubectl-command") == "kubectl get"
                and seen.get("accept-encoding") != "gzip", seen)
        t.check("the extension's headers come back, its warnings as warnings, not its "
                "connection's",
                resp.status == 200 and resp.getheader("X-Metrics-Source") == "e2e"
                and resp.headers.get_all("Warning") == ['299 - "metrics are estimates"',
                                                        '299 - "a \\"quoted\\" word"']
                and (resp.getheader("Connection") or "").lower() != "close",
                (resp.status, resp.getheaders()))
        code, out = kc("get", "--raw", GV + "/pods")
        t.check("kubectl shows the extension's warnings",
                code == 0 and "Warning: metrics are estimates" in out
                and 'Warning: a "quoted" word' in out, out)
        # The extension goes away: 503 for its group only, then it comes back.
        metrics.stop()
        w.close()
        c = wait_for(lambda: (lambda a: a.get("reason") == "FailedDiscoveryCheck" and a)(
            available(kc)), timeout=15, what="FailedDiscoveryCheck") or available(kc)
        t.check("with the extension down the APIService turns False (FailedDiscoveryCheck)",
                c.get("status") == "False" and "failing or missing response from "
                "https://metrics-server.kube-system.svc:443/apis/metrics.k8s.io/v1beta1" in
                c.get("message", ""), c)
        status, body = server.request("GET", GV + "/nodes")
        t.check("... its requests are 503", status == 503, (status, body))
        def apiservice_metric(metric_name, **labels):
            labels["name"] = "v1beta1.metrics.k8s.io"
            values = [v for n, lbl, v in server.metrics() if n == metric_name
                      and all(lbl.get(k) == want for k, want in labels.items())]
            return sum(values) if values else None
        down = wait_for(lambda: apiservice_metric("aggregator_unavailable_apiservice") == 1,
                        timeout=10, what="the unavailable gauge")
        total = apiservice_metric("aggregator_unavailable_apiservice_total",
                                  reason="FailedDiscoveryCheck")
        t.check("... and kube's aggregator_unavailable_apiservice metrics say so",
                bool(down) and (total or 0) >= 1, total)
        code, out = kc("get", "configmaps", "-A")
        t.check("... and kubectl on other groups works", code == 0, out)
        metrics.restart()
        c = wait_for(lambda: (lambda a: a.get("status") == "True" and a)(available(kc)),
                     timeout=15, what="Available again")
        code, out = kc("get", "--raw", GV + "/nodes")
        t.check("the extension back, it is Available again and answers", bool(c) and code == 0,
                (c, out))
        up = wait_for(lambda: apiservice_metric("aggregator_unavailable_apiservice") == 0,
                      timeout=10, what="the unavailable gauge back to 0")
        t.check("... and the gauge is 0 again", bool(up))
    finally:
        metrics.stop()


def b_call(server, method, path, body=None, token="admin-token"):
    from harness import json_exchange
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    return json_exchange(conn, method, path, body, {"Content-Type": "application/json"}, token)


def check_second_kwatch(t, server, tmp, binary, front_proxy_ca):
    """A second kwatch (B) serves a custom resource to the first (A) as an extension API server:
    B trusts A's proxy certificate for the user A names in X-Remote-* headers and authorizes
    that user with its own RBAC."""
    import os
    import urllib.request
    tokens = os.path.join(tmp, "b-tokens.csv")
    with open(tokens, "w") as f:
        f.write('admin-token,admin,1,"system:masters"\n')
    ext = Server(binary, https=True, extra_args=[
        f"--token-auth-file={tokens}", "--authorization-mode=RBAC", f"--cert-dir={tmp}/b-certs",
        f"--requestheader-client-ca-file={front_proxy_ca.cert_file}",
        "--requestheader-allowed-names=front-proxy-client",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-"]).start()
    try:
        group = "ext.example.com"
        status, body = b_call(ext, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", {
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"widgets.{group}"},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"plural": "widgets", "kind": "Widget"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {
                                       "type": "object", "description": "A widget of B's.",
                                       "properties": {"spec": {"type": "object", "properties": {
                                           "size": {"type": "integer",
                                                    "description": "How big."}}}}}}}]}})
        path = f"/apis/{group}/v1/namespaces/default/widgets"
        wait_for(lambda: b_call(ext, "GET", path)[0] == 200, timeout=20, what="B serves widgets")
        b_call(ext, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", {
            "metadata": {"name": "widget-reader"},
            "rules": [{"apiGroups": [group], "resources": ["widgets"],
                       "verbs": ["get", "list", "watch"]}]})
        b_call(ext, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
            "metadata": {"name": "alice-reads-widgets"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "widget-reader"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                          "name": "alice"}]})
        b_call(ext, "POST", path, {"apiVersion": f"{group}/v1", "kind": "Widget",
                                   "metadata": {"name": "w1"}, "spec": {"size": 3}})
        kc = kubectl_runner(server, tmp)
        kc("create", "namespace", "ext")
        for obj in extension_api_objects(group, "v1", ext.secure_port):
            kc("apply", "-f", "-", stdin=json.dumps(obj))
        c = wait_for(lambda: (lambda a: a.get("status") == "True" and a)(
            available(kc, f"v1.{group}")), timeout=15, what="B's APIService available")
        t.check("a second kwatch's APIService is Available (its discovery check passed as "
                "system:kube-aggregator through request header authentication)", bool(c),
                available(kc, f"v1.{group}"))
        code, out = kc("get", f"widgets.{group}", "--as", "alice")
        t.check("kubectl get through A as alice: B authorizes alice with its own RBAC",
                code == 0 and "w1" in out, out)
        code, out = kc("get", f"widgets.{group}", "--as", "bob")
        t.check("... and refuses bob in its own words",
                code != 0 and 'User "bob" cannot list resource "widgets" in API group '
                '"ext.example.com" in the namespace "default"' in out, out)
        w = WatchStream(server, path + "?watch=1", headers={"Impersonate-User": "alice"})
        first = w.take(1, timeout=10)
        b_call(ext, "POST", path, {"apiVersion": f"{group}/v1", "kind": "Widget",
                                   "metadata": {"name": "w2"}, "spec": {"size": 4}})
        second = w.take(1, timeout=10)
        t.check("a watch through A streams B's events",
                [e.get("object", {}).get("metadata", {}).get("name") for e in first + second] ==
                ["w1", "w2"], first + second)
        w.close()
        ws = WebSocketWatch(server, path + "?watch=1", headers={"Impersonate-User": "alice"})
        events = ws.take(2, timeout=10)
        t.check("a WebSocket watch through A: the upgrade passed to B, B's events relayed as "
                "text messages", ws.status == 101 and
                [e.get("object", {}).get("metadata", {}).get("name") for e in events] ==
                ["w1", "w2"] and ws.opcodes == [1, 1], (ws.status, ws.error, events, ws.opcodes))
        b_call(ext, "POST", path, {"apiVersion": f"{group}/v1", "kind": "Widget",
                                   "metadata": {"name": "w3"}, "spec": {"size": 5}})
        third = ws.take(1, timeout=10)
        t.check("... and events written later arrive through it",
                [e.get("object", {}).get("metadata", {}).get("name") for e in third] == ["w3"],
                third)
        ws.close()
        refused = WebSocketWatch(server, path + "?watch=1", headers={"Impersonate-User": "bob"})
        t.check("a WebSocket watch B refuses is refused with B's status (403)",
                refused.status == 403, (refused.status, refused.error))
        code, out = kc("get", f"widgets.{group}", "-w", "--as", "alice", "--request-timeout=3s")
        t.check("kubectl get -w through A prints B's table and its rows",
                "NAME" in out and "w1" in out and "w2" in out and "w3" in out, out)
        code, out = kc("explain", "widgets", f"--api-version={group}/v1", "--as", "alice")
        t.check("kubectl explain through A reads B's OpenAPI", code == 0 and
                "A widget of B's." in out, out)
        # kube's aggregator merges an extension's /openapi/v2 into its own (clients that read
        # only v2): B's Widget definition and its group's paths, beside A's own definitions.
        def merged_v2():
            status, doc = server.request("GET", "/openapi/v2")
            return (status == 200 and isinstance(doc, dict) and
                    "com.example.ext.v1.Widget" in doc.get("definitions", {}) and doc)
        doc = wait_for(merged_v2, timeout=30, what="B's definitions in A's /openapi/v2")
        t.check("A's /openapi/v2 has B's Widget and the paths of B's group",
                any(p.startswith(f"/apis/{group}/v1/") for p in doc.get("paths", {})),
                sorted(doc.get("paths", {}))[:3])
        t.check("... beside A's own definitions and paths",
                "io.k8s.api.core.v1.Pod" in doc["definitions"] and
                "/api/v1/namespaces/{namespace}/pods" in doc["paths"])
        status, pb = server.request("GET", "/openapi/v2", headers={
            "Accept": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"}, raw=True)
        t.check("... and in the protobuf form kubectl reads", status == 200 and
                b"com.example.ext.v1.Widget" in pb, status)
        # B itself does not take X-Remote-User from a client without A's certificate.
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        req = urllib.request.Request(f"https://127.0.0.1:{ext.secure_port}{path}",
                                     headers={"X-Remote-User": "alice"})
        try:
            urllib.request.urlopen(req, context=ctx, timeout=10)
            forged = 200
        except urllib.error.HTTPError as e:
            forged = e.code
        t.check("B ignores X-Remote-User from a client without the front proxy's certificate",
                forged == 403, forged)
        code, out = kc("get", "apiservices", f"v1.{group}")
        t.check("kubectl get apiservices shows it True", "True" in out, out)
    finally:
        ext.stop()


def main():
    binary = sys.argv[1]
    t = Checks()
    with TempDir() as tmp:
        front_proxy_ca = CA(tmp, "front-proxy-ca")
        proxy_cert, proxy_key = front_proxy_ca.client("front-proxy-client", cn="front-proxy-client")
        server = Server(binary, data_dir=tmp + "/data",
                        extra_args=("--unsafe-webhook-loopback-endpoints=true",
                                    f"--proxy-client-cert-file={proxy_cert}",
                                    f"--proxy-client-key-file={proxy_key}",
                                    # As kubeadm configures kube-apiserver.
                                    f"--requestheader-client-ca-file={front_proxy_ca.cert_file}",
                                    "--requestheader-allowed-names=front-proxy-client",
                                    "--requestheader-username-headers=X-Remote-User",
                                    "--requestheader-group-headers=X-Remote-Group",
                                    "--requestheader-extra-headers-prefix=X-Remote-Extra-")).start()
        try:
            checks_of(t, server, tmp)
            kc = kubectl_runner(server, tmp)
            code, out = kc("get", "configmap", "-n", "kube-system",
                           "extension-apiserver-authentication", "-o", "json")
            data = json.loads(out).get("data", {}) if code == 0 else {}
            with open(front_proxy_ca.cert_file) as f:
                ca_pem = f.read().strip()
            t.check("kube-system/extension-apiserver-authentication publishes the front proxy CA "
                    "and the request header settings, lists as JSON arrays",
                    ca_pem in data.get("requestheader-client-ca-file", "")
                    and data.get("requestheader-allowed-names") == '["front-proxy-client"]'
                    and data.get("requestheader-username-headers") == '["X-Remote-User"]'
                    and data.get("requestheader-extra-headers-prefix") == '["X-Remote-Extra-"]',
                    data)
            server.stop()
            server.start()
            kc = kubectl_runner(server, tmp)
            back = wait_for(lambda: "v1.apps" in api_services(kc), timeout=10,
                            what="v1.apps registered again")
            t.check("a restart registers the built-in ones again", bool(back))
            # Ready means registered (kube's autoregister-completion): a fresh server's built-in
            # APIServices are all there as soon as /readyz answers 200.
            fresh = Server(binary).start()
            try:
                status, listed = fresh.request("GET",
                                               "/apis/apiregistration.k8s.io/v1/apiservices")
                names = [i["metadata"]["name"] for i in (listed or {}).get("items", [])]
                t.check("once /readyz is 200, every built-in group/version has its APIService",
                        status == 200 and {"v1.", "v1.apps", "v1.rbac.authorization.k8s.io",
                                           "v2.autoscaling"} <= set(names), names)
            finally:
                fresh.stop()
            check_extension(t, server, tmp)
            check_second_kwatch(t, server, tmp, binary, front_proxy_ca)
            t.check("server alive", server.alive())
        finally:
            server.stop()
    t.finish()


if __name__ == "__main__":
    main()
