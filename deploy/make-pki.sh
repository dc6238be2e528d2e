#!/bin/sh
# Makes the credentials a kwatch control plane shares, once (an existing admin.crt is kept):
#   ca.crt/ca.key            the CA that signs the rest (clients trust ca.crt; --client-ca-file)
#   serving.crt/serving.key  the certificate every replica serves (--tls-cert-file/-private-key-file)
#   admin.crt/admin.key      a client certificate for user kwatch-admin in group system:masters
#   sa.key                   the ServiceAccount token key every replica signs and checks with
#   kubeconfig               for the admin, at SERVER, with paths relative to DIR
# Usage: make-pki.sh DIR SERVER SAN[,SAN...]     e.g. make-pki.sh pki https://127.0.0.1:6443 \
#          DNS:localhost,IP:127.0.0.1,DNS:kwatch-1
# OWNER (environment, optional): uid[:gid] that gets the keys a replica reads (serving, sa).
set -eu
dir=$1 server=$2 sans=$3
mkdir -p "$dir"
chmod 0755 "$dir"
cd "$dir"
if [ -s admin.crt ] && [ -s kubeconfig ]; then exit 0; fi
umask 077
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
key ca.key
openssl req -x509 -new -key ca.key -days 3650 -subj "/CN=kwatch-ca" -out ca.crt \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
sign() {  # name subject extensions
  key "$1.key"
  openssl req -new -key "$1.key" -subj "$2" -out "$1.csr"
  printf '%b' "$3" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 365 \
    -out "$1.crt" -extfile "$1.ext" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}
sign serving "/CN=kwatch" \
  "subjectAltName=$sans\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n"
sign admin "/O=system:masters/CN=kwatch-admin" \
  "keyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n"
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out sa.key 2>/dev/null
cat > kubeconfig <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: kwatch
  cluster:
    server: $server
    certificate-authority: ca.crt
contexts:
- name: kwatch
  context:
    cluster: kwatch
    user: kwatch-admin
current-context: kwatch
users:
- name: kwatch-admin
  user:
    client-certificate: admin.crt
    client-key: admin.key
KUBECONFIG
chmod 0644 ca.crt serving.crt admin.crt
if [ -n "${OWNER:-}" ]; then chown "$OWNER" serving.key sa.key; fi
