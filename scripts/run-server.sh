#!/usr/bin/env bash
# Installs what is missing, builds, and runs kwatch-apiserver on https://127.0.0.1:6443 with
# embedded storage persisted in ./data, RBAC on and no anonymous access. It makes (once, and
# reuses) a client CA and an admin client certificate (group system:masters) in data/pki and
# writes data/kubeconfig for that admin, with the server's CA verified. Extra arguments are
# passed to the server (e.g. --port=8080 to also serve plain HTTP for local experiments).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh -DKWATCH_BUILD_TESTS=OFF
mkdir -p data/pki
chmod 0700 data/pki
pki="$PWD/data/pki"
umask 077
# The CA that signs client certificates (--client-ca-file) and the admin's certificate. The
# server makes its own serving CA (ca.crt) in the same directory on first start.
if [[ ! -s "$pki/client-ca.crt" || ! -s "$pki/client-ca.key" ]]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 3650 \
    -subj "/CN=kwatch-client-ca" -keyout "$pki/client-ca.key" -out "$pki/client-ca.crt" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    2>/dev/null
  rm -f "$pki/admin.crt"
fi
if [[ ! -s "$pki/admin.crt" || ! -s "$pki/admin.key" ]] ||
   ! openssl x509 -checkend 2592000 -noout -in "$pki/admin.crt" >/dev/null; then
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -subj "/O=system:masters/CN=kwatch-admin" -keyout "$pki/admin.key" -out "$pki/admin.csr" \
    2>/dev/null
  openssl x509 -req -in "$pki/admin.csr" -CA "$pki/client-ca.crt" -CAkey "$pki/client-ca.key" \
    -CAcreateserial -days 365 -out "$pki/admin.crt" \
    -extfile <(printf 'keyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n') \
    2>/dev/null
  rm -f "$pki/admin.csr"
fi
cat > data/kubeconfig <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: kwatch
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority: $pki/ca.crt
contexts:
- name: kwatch
  context:
    cluster: kwatch
    user: kwatch-admin
current-context: kwatch
users:
- name: kwatch-admin
  user:
    client-certificate: $pki/admin.crt
    client-key: $pki/admin.key
KUBECONFIG
echo "kwatch: point kubectl at it with:  export KUBECONFIG=$PWD/data/kubeconfig"
echo "kwatch: then try:                  kubectl get namespaces"
exec build/server/kwatch-apiserver --data-dir=data/store --cert-dir="$pki" \
  --client-ca-file="$pki/client-ca.crt" "$@"
