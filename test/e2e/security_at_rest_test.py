"""Secrets encrypted at rest (--encryption-provider-config) and the audit log (--audit-log-path),
as an operator sees them: the API serves plaintext while storage (etcd's values, or the embedded
store's log and snapshots) holds only ciphertext; key rotation by listing a new key first and
replacing the objects; plaintext from before encryption read through identity; a value no key
reads is a 500 naming its key; one audit line per request with its user, verb and code, both
stages of a watch, and rotation by size.

Usage: security_at_rest_test.py <path to kwatch-apiserver>
"""
import base64
import glob
import http.client
import json
import os
import re
import sys

from harness import Checks, Server, TempDir, WatchStream, storage_backend, wait_for

KEY1 = base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()
KEY2 = base64.b64encode(b"fedcba9876543210").decode()
NS = "/api/v1/namespaces/default/secrets"


def config_text(*providers):
    """An EncryptionConfiguration in YAML, as kube's documentation writes it."""
    lines = ["apiVersion: apiserver.config.k8s.io/v1", "kind: EncryptionConfiguration",
             "resources:", "  - resources:", "      - secrets", "    providers:"]
    for p in providers:
        if p == "identity":
            lines.append("      - identity: {}   # plaintext from before encryption")
        else:
            name, secret = p
            lines += ["      - aesgcm:", "          keys:", f"            - name: {name}",
                      f"              secret: {secret}"]
    return "\n".join(lines) + "\n"


def secret(name, value):
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
            "data": {"password": base64.b64encode(value.encode()).decode()}}


def call(server, method, path, body=None, token=None):
    """(status, parsed body, headers) of one request."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        headers = {"User-Agent": "security-e2e/1.0"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        data = None
        if body is not None:
            data = json.dumps(body)
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        raw = resp.read()
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = raw.decode(errors="replace")
        return resp.status, parsed, {k.lower(): v for k, v in resp.getheaders()}
    finally:
        conn.close()


class Stored:
    """The bytes storage holds for a key: etcdctl on etcd3, the data directory's files otherwise."""

    def __init__(self, server, data_dir):
        self.server = server
        self.data_dir = data_dir

    def etcd_value(self, key):
        p = self.server.etcd.etcdctl("get", key, "-w", "json")
        kvs = json.loads(p.stdout).get("kvs") or []
        return base64.b64decode(kvs[0]["value"]) if kvs else None

    def files_contain(self, needle):
        """Whether any file of the embedded store's data directory holds these bytes."""
        for path in glob.glob(os.path.join(self.data_dir, "**"), recursive=True):
            if os.path.isfile(path):
                with open(path, "rb") as f:
                    if needle in f.read():
                        return True
        return False


def main():
    binary = sys.argv[1]
    t = Checks()
    etcd = storage_backend() == "etcd3"
    with TempDir() as tmp:
        data = os.path.join(tmp, "data")
        enc = os.path.join(tmp, "encryption.yaml")
        audit = os.path.join(tmp, "audit", "audit.log")
        tokens = os.path.join(tmp, "tokens.csv")
        with open(tokens, "w") as f:
            f.write('alice-token,alice,1001,"dev,ops"\n')
        base = [] if etcd else ["--data-dir-snapshot-bytes=4096"]  # snapshots as well as the log

        def start(*extra):
            return Server(binary, data_dir=data, extra_args=base + list(extra)).start()

        # Phase 0: no encryption. A secret stored in plaintext, as by an older deployment.
        server = start()
        try:
            status, _, _ = call(server, "POST", NS, secret("legacy", "legacy-plain-value"))
            t.check("a secret is created before encryption is configured", status == 201, status)
        finally:
            server.stop()

        # Phase 1: aesgcm key1, identity after it. Audited, with a bearer token.
        with open(enc, "w") as f:
            f.write(config_text(("key1", KEY1), "identity"))
        server = start(f"--encryption-provider-config={enc}", f"--audit-log-path={audit}",
                       f"--token-auth-file={tokens}")
        stored = Stored(server, data)
        audit_ids = {}
        try:
            status, body, headers = call(server, "POST", NS, secret("s1", "s1-TOPSECRET-one"),
                                         token="alice-token")
            t.check("create a secret through the API", status == 201, f"{status} {body}")
            audit_ids["create"] = headers.get("audit-id")
            t.check("the response carries an Audit-Id header",
                    re.fullmatch(r"[0-9a-f-]{36}", audit_ids["create"] or ""), headers)
            status, _, _ = call(server, "POST", NS, secret("s2", "s2-TOPSECRET-two"), token="alice-token")
            t.check("create a second secret", status == 201, status)
            status, body, headers = call(server, "GET", NS + "/s1", token="alice-token")
            audit_ids["get"] = headers.get("audit-id")
            t.check("read back in plaintext through the API",
                    status == 200 and base64.b64decode(body["data"]["password"]) == b"s1-TOPSECRET-one",
                    f"{status} {body}")
            status, body, headers = call(server, "GET", NS, token="alice-token")
            audit_ids["list"] = headers.get("audit-id")
            t.check("listed in plaintext",
                    status == 200 and sorted(i["metadata"]["name"] for i in body["items"]) ==
                    ["legacy", "s1", "s2"], body)
            status, body, headers = call(server, "GET", NS + "/nope", token="alice-token")
            audit_ids["missing"] = headers.get("audit-id")
            t.check("a missing secret is 404", status == 404, status)
            status, body, _ = call(server, "GET", NS + "/legacy")
            t.check("a plaintext secret from before reads through identity",
                    status == 200 and base64.b64decode(body["data"]["password"]) == b"legacy-plain-value",
                    f"{status} {body}")
            legacy = body
            # A watch: its stream starts, then ends when the client goes.
            w = WatchStream(server, NS + "?watch=true", headers={"Authorization": "Bearer alice-token"})
            t.check("a watch's head carries an Audit-Id", bool(w.headers.get("audit-id")), w.headers)
            audit_ids["watch"] = w.headers.get("audit-id")
            ev = w.next_event()
            t.check("the watch delivers a decrypted secret",
                    ev and ev["type"] == "ADDED" and "password" in ev["object"].get("data", {}), ev)
            w.close()
            # The server notices the hang-up, ends the stream and logs its ResponseComplete stage.
            wait_for(lambda: len([e for e in read_audit(audit)
                                  if e["auditID"] == audit_ids["watch"]]) == 2,
                     what="the watch's ResponseComplete audit line")

            if etcd:
                raw = stored.etcd_value("/registry/secrets/default/s1")
                t.check("etcd holds kube's aesgcm format for the secret",
                        raw is not None and raw.startswith(b"k8s:enc:aesgcm:v1:key1:"), raw[:40] if raw else raw)
                t.check("etcd's value does not hold the plaintext",
                        raw is not None and b"s1-TOPSECRET-one" not in raw and
                        base64.b64encode(b"s1-TOPSECRET-one") not in raw and b'"kind"' not in raw)
                raw_legacy = stored.etcd_value("/registry/secrets/default/legacy")
                t.check("the secret from before is still plaintext in etcd",
                        raw_legacy is not None and raw_legacy.startswith(b"{"))
                check_kube_format(t, server, stored)
            # kube's recipe to encrypt what was stored before: replace every secret unchanged.
            status, body, _ = call(server, "PUT", NS + "/legacy", legacy)
            t.check("an unchanged replace of the plaintext secret succeeds", status == 200, f"{status} {body}")
            t.check("and writes a new revision (stale data is rewritten)",
                    body["metadata"]["resourceVersion"] != legacy["metadata"]["resourceVersion"], body)
            if etcd:
                raw_legacy = stored.etcd_value("/registry/secrets/default/legacy")
                t.check("which etcd now holds encrypted with key1",
                        raw_legacy is not None and raw_legacy.startswith(b"k8s:enc:aesgcm:v1:key1:"))
        finally:
            server.stop()
        if not etcd:
            for value in (b"s1-TOPSECRET-one", b"s2-TOPSECRET-two"):
                t.check(f"no file of the data directory holds {value.decode()}",
                        not stored.files_contain(value) and
                        not stored.files_contain(base64.b64encode(value)))
            t.check("the data directory holds aesgcm values", stored.files_contain(b"k8s:enc:aesgcm:v1:key1:"))

        check_audit_log(t, audit, audit_ids)

        # Phase 2: rotation. key2 first (it writes), key1 still reads; no identity any more.
        with open(enc, "w") as f:
            f.write(config_text(("key2", KEY2), ("key1", KEY1)))
        server = start(f"--encryption-provider-config={enc}")
        stored.server = server
        try:
            status, body, _ = call(server, "GET", NS + "/s1")
            t.check("after rotation the old key still reads",
                    status == 200 and base64.b64decode(body["data"]["password"]) == b"s1-TOPSECRET-one",
                    f"{status} {body}")
            status, replaced, _ = call(server, "PUT", NS + "/s1", body)
            t.check("an unchanged replace rewrites it",
                    status == 200 and replaced["metadata"]["resourceVersion"] != body["metadata"]["resourceVersion"],
                    f"{status} {replaced}")
            status, legacy, _ = call(server, "GET", NS + "/legacy")
            status, _, _ = call(server, "PUT", NS + "/legacy", legacy)
            t.check("the formerly plaintext secret is rewritten too", status == 200, status)
            if etcd:
                raw = stored.etcd_value("/registry/secrets/default/s1")
                t.check("etcd holds the rewritten secret under key2",
                        raw is not None and raw.startswith(b"k8s:enc:aesgcm:v1:key2:"), raw[:40] if raw else raw)
                raw = stored.etcd_value("/registry/secrets/default/s2")
                t.check("a secret not rewritten stays under key1",
                        raw is not None and raw.startswith(b"k8s:enc:aesgcm:v1:key1:"), raw[:40] if raw else raw)
        finally:
            server.stop()

        # Phase 3: key1 retired. Rewritten secrets read; the one left behind is a 500 naming its
        # key, skipped by lists, and can only be deleted on purpose.
        with open(enc, "w") as f:
            f.write(config_text(("key2", KEY2)))
        server = start(f"--encryption-provider-config={enc}")
        try:
            status, body, _ = call(server, "GET", NS + "/s1")
            t.check("a rewritten secret reads with key2 alone",
                    status == 200 and base64.b64decode(body["data"]["password"]) == b"s1-TOPSECRET-one",
                    f"{status} {body}")
            status, body, _ = call(server, "GET", NS + "/legacy")
            t.check("so does the rewritten legacy secret", status == 200, f"{status} {body}")
            status, body, _ = call(server, "GET", NS + "/s2")
            t.check("a secret only key1 reads is a 500 naming its key",
                    status == 500 and "/registry/secrets/default/s2" in body.get("message", "") and
                    "decrypt" in body.get("message", ""), f"{status} {body}")
            status, body, _ = call(server, "GET", NS)
            t.check("lists skip it", status == 200 and
                    sorted(i["metadata"]["name"] for i in body["items"]) == ["legacy", "s1"], body)
            status, _, _ = call(server, "DELETE", NS + "/s2")
            t.check("a plain delete refuses it", status == 500, status)
            status, _, _ = call(server, "DELETE",
                                NS + "/s2?ignoreStoreReadErrorWithClusterBreakingPotential=true")
            t.check("it can be deleted on purpose", status == 200, status)
        finally:
            server.stop()

        # A broken configuration stops the start with a message naming the line.
        with open(enc, "w") as f:
            f.write(config_text(("key2", "bm90LTE2LWJ5dGVz")))
        bad = Server(binary, data_dir=data, extra_args=base + [f"--encryption-provider-config={enc}"])
        try:
            bad.start()
            t.check("a key of the wrong length stops the start", False)
        except AssertionError as e:
            t.check("a key of the wrong length stops the start, naming line and field",
                    "line 10: resources[0].providers[0].aesgcm.keys[0].secret" in str(e), str(e)[-300:])
        finally:
            bad.stop()

        check_audit_rotation(t, binary, tmp)
    t.finish()


def check_kube_format(t, server, stored):
    """An independent AES-GCM (Python's cryptography, when installed) opens what kwatch sealed,
    and seals a value the way kube-apiserver does, which kwatch then serves."""
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError:
        print("python3-cryptography is not installed: skipping the independent format checks")
        return
    key = base64.b64decode(KEY1)
    prefix = b"k8s:enc:aesgcm:v1:key1:"
    etcd_key = "/registry/secrets/default/s1"
    raw = stored.etcd_value(etcd_key)
    sealed = raw[len(prefix):]
    try:
        plain = AESGCM(key).decrypt(sealed[:12], sealed[12:], etcd_key.encode())
        ok = json.loads(plain)["data"]["password"] == base64.b64encode(b"s1-TOPSECRET-one").decode()
    except Exception as e:  # noqa: BLE001 - any failure is the check's failure
        ok, plain = False, repr(e)
    t.check("another AES-GCM opens the value: 12-byte nonce, ciphertext, tag, the key as AAD", ok, plain)
    # Sealed as kube seals it, put into etcd directly (etcd's JSON gateway takes binary values).
    obj = secret("from-kube", "sealed-elsewhere")
    obj["metadata"].update({"namespace": "default", "uid": "5b0e2c0a-6d5c-4c43-9a53-1c3ce1a0b9a1",
                            "creationTimestamp": "2026-01-01T00:00:00Z"})
    target = "/registry/secrets/default/from-kube"
    nonce = os.urandom(12)
    value = prefix + nonce + AESGCM(key).encrypt(nonce, json.dumps(obj).encode(), target.encode())
    client = server.etcd.members[0]["client"]
    conn = http.client.HTTPConnection("127.0.0.1", client, timeout=10)
    conn.request("POST", "/v3/kv/put", body=json.dumps(
        {"key": base64.b64encode(target.encode()).decode(), "value": base64.b64encode(value).decode()}))
    put_status = conn.getresponse().status
    conn.close()
    got = wait_for(lambda: (lambda r: r if r[0] == 200 else None)(call(server, "GET", NS + "/from-kube")),
                   what="the externally sealed secret") if put_status == 200 else (put_status, None, None)
    t.check("a value sealed outside kwatch in kube's format is served in plaintext",
            got[0] == 200 and base64.b64decode(got[1]["data"]["password"]) == b"sealed-elsewhere", got[:2])
    status, _, _ = call(server, "DELETE", NS + "/from-kube")
    t.check("and deleted like any other", status == 200, status)


def read_audit(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def check_audit_log(t, path, ids):
    mode = os.stat(path).st_mode & 0o777
    t.check("the audit log is private (0600)", mode == 0o600, oct(mode))
    events = read_audit(path)
    by_id = {}
    for e in events:
        by_id.setdefault(e["auditID"], []).append(e)
    t.check("every line is an audit.k8s.io/v1 Event at level Metadata",
            all(e["kind"] == "Event" and e["apiVersion"] == "audit.k8s.io/v1" and
                e["level"] == "Metadata" for e in events))
    for what, verb, code in (("create", "create", 201), ("get", "get", 200), ("list", "list", 200),
                             ("missing", "get", 404)):
        got = by_id.get(ids.get(what), [])
        e = got[0] if len(got) == 1 else {}
        t.check(f"one {what} line with user, verb and code",
                len(got) == 1 and e["stage"] == "ResponseComplete" and e["verb"] == verb and
                e["responseStatus"]["code"] == code and e["user"]["username"] == "alice" and
                e["user"]["groups"][:2] == ["dev", "ops"] and e["sourceIPs"] == ["127.0.0.1"] and
                e["userAgent"] == "security-e2e/1.0" and e["objectRef"]["resource"] == "secrets" and
                e["annotations"]["authorization.k8s.io/decision"] == "allow", got)
    t.check("the get names its object", by_id.get(ids.get("get"), [{}])[0].get("objectRef", {}).get("name") == "s1")
    # A failure's Status fields, as kube copies them into responseStatus at level Metadata.
    missing = by_id.get(ids.get("missing"), [{}])[0].get("responseStatus", {})
    t.check("the 404 line carries the Status's status, reason and message",
            missing.get("status") == "Failure" and missing.get("reason") == "NotFound" and
            'secrets "' in missing.get("message", "") and "not found" in missing["message"],
            missing)
    # The watch ended when its client went: both stages, once each.
    stages = [e["stage"] for e in read_audit(path) if e["auditID"] == ids.get("watch")]
    t.check("a watch is logged when it starts and when it ends",
            stages == ["ResponseStarted", "ResponseComplete"], stages)
    watch = [e for e in events if e["auditID"] == ids.get("watch")]
    t.check("with kube's verb watch", watch and watch[0]["verb"] == "watch", watch)
    with open(path) as f:
        text = f.read()
    t.check("no secret content reaches the audit log",
            "s1-TOPSECRET-one" not in text and base64.b64encode(b"s1-TOPSECRET-one").decode() not in text)


def check_audit_rotation(t, binary, tmp):
    directory = os.path.join(tmp, "rotating")
    path = os.path.join(directory, "audit.log")
    server = Server(binary, extra_args=[f"--audit-log-path={path}", "--audit-log-maxsize=1",
                                        "--audit-log-maxbackup=2"]).start()
    try:
        session = server.session()
        pad = "x" * 4000  # ~4.5 KB per line: 1 MiB in ~230 requests
        for i in range(1000):
            status, _ = session.request("GET", f"/healthz?pad={pad}&i={i}")
            if status != 200:
                break
        session.close()
    finally:
        server.stop()
    names = sorted(os.listdir(directory))
    backups = [n for n in names if n != "audit.log"]
    t.check("the audit log rotates past --audit-log-maxsize, keeping --audit-log-maxbackup files",
            "audit.log" in names and len(backups) == 2, names)
    t.check("rotated files are named like kube's (lumberjack)",
            all(re.fullmatch(r"audit-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d\.\d{3}\.log", n) for n in backups), backups)
    sizes = [os.path.getsize(os.path.join(directory, n)) for n in backups]
    t.check("each rotated file stays within 1 MiB", all(0 < s <= 1 << 20 for s in sizes), sizes)
    lines = sum(len(read_audit(os.path.join(directory, n))) for n in names)
    t.check("no line is lost or split across files",
            all(read_audit(os.path.join(directory, n)) is not None for n in names) and lines > 400, lines)
    modes = [oct(os.stat(os.path.join(directory, n)).st_mode & 0o777) for n in names]
    t.check("every audit file is 0600", all(m == "0o600" for m in modes), modes)


if __name__ == "__main__":
    main()
