"""Certificates for tests: client CAs and client certificates with any subject, validity and
extended key usage, made with python3-cryptography (ECDSA P-256), written as PEM files; and an
HTTPS client that presents them (or a bearer token) and verifies the server against a CA."""
import datetime
import http.client
import os
import ssl

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from harness import json_exchange


def _write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, 0o600)


def _key_pem(key):
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


class CA:
    """A self-signed CA in `directory`/<name>.crt and .key that signs client certificates."""

    def __init__(self, directory, name="test-ca"):
        self.directory = directory
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.timezone.utc)
        self.cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(now - datetime.timedelta(minutes=5))
                     .not_valid_after(now + datetime.timedelta(days=30))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                     .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False),
                                    critical=True)
                     .sign(self.key, hashes.SHA256()))
        self.cert_file = os.path.join(directory, name + ".crt")
        _write(self.cert_file, self.cert.public_bytes(serialization.Encoding.PEM))
        _write(os.path.join(directory, name + ".key"), _key_pem(self.key))

    def client(self, file_name, cn=None, orgs=(), valid_from_minutes=-5, valid_for_minutes=60,
               usages=(ExtendedKeyUsageOID.CLIENT_AUTH,)):
        """Writes `file_name`.crt/.key signed by this CA; returns (cert path, key path)."""
        key = ec.generate_private_key(ec.SECP256R1())
        attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
        if cn is not None:
            attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
        now = datetime.datetime.now(datetime.timezone.utc)
        start = now + datetime.timedelta(minutes=valid_from_minutes)
        builder = (x509.CertificateBuilder().subject_name(x509.Name(attrs))
                   .issuer_name(self.cert.subject).public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(start)
                   .not_valid_after(start + datetime.timedelta(minutes=valid_for_minutes)))
        if usages:
            builder = builder.add_extension(x509.ExtendedKeyUsage(list(usages)), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        cert_path = os.path.join(self.directory, file_name + ".crt")
        key_path = os.path.join(self.directory, file_name + ".key")
        _write(cert_path, cert.public_bytes(serialization.Encoding.PEM))
        _write(key_path, _key_pem(key))
        return cert_path, key_path


def server_certificate(ca, file_name, dns_names=("localhost",), ips=("127.0.0.1",)):
    """Writes `file_name`.crt/.key: a TLS server certificate signed by `ca` for these names and
    addresses; returns (cert path, key path)."""
    import ipaddress
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    names = [x509.DNSName(n) for n in dns_names] + [x509.IPAddress(ipaddress.ip_address(i))
                                                    for i in ips]
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, file_name)]))
            .issuer_name(ca.cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca.key, hashes.SHA256()))
    cert_path = os.path.join(ca.directory, file_name + ".crt")
    key_path = os.path.join(ca.directory, file_name + ".key")
    _write(cert_path, cert.public_bytes(serialization.Encoding.PEM))
    _write(key_path, _key_pem(key))
    return cert_path, key_path


def kubeconfig(path, port, ca_file, cert=None, key=None, token=None):
    """A kubeconfig for https://127.0.0.1:<port> trusting `ca_file`, with a client certificate or
    a bearer token."""
    user = []
    if cert:
        user += [f"    client-certificate: {cert}", f"    client-key: {key}"]
    if token:
        user.append(f"    token: {token}")
    with open(path, "w") as f:
        f.write("\n".join([
            "apiVersion: v1", "kind: Config",
            "clusters:", "- name: kwatch", "  cluster:", f"    server: https://127.0.0.1:{port}",
            f"    certificate-authority: {ca_file}",
            "contexts:", "- name: kwatch", "  context:", "    cluster: kwatch", "    user: u",
            "current-context: kwatch",
            "users:", "- name: u", "  user:" + ("" if user else " {}")] + user) + "\n")
    return path


class HttpsClient:
    """Requests to https://127.0.0.1:<port> trusting `ca`, as a client certificate (cert, key)
    and/or a bearer token; each returns (status, parsed JSON body or text)."""

    def __init__(self, port, ca, cert=None, token=None):
        self.port, self.ca, self.cert, self.token = port, ca, cert, token

    def call(self, method, path, body=None, headers=None):
        ctx = ssl.create_default_context(cafile=self.ca)
        if self.cert:
            ctx.load_cert_chain(*self.cert)
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=ctx, timeout=10)
        return json_exchange(conn, method, path, body, headers, self.token)
