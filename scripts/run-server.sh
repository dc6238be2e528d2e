#!/usr/bin/env bash
# Installs what is missing, builds, and runs kwatch-apiserver on 127.0.0.1:8080 with embedded
# storage persisted in ./data. Extra arguments are passed to the server.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh -DKWATCH_BUILD_TESTS=OFF
mkdir -p data
cat > data/kubeconfig <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: kwatch
  cluster:
    server: http://127.0.0.1:8080
contexts:
- name: kwatch
  context:
    cluster: kwatch
    user: kwatch
current-context: kwatch
users:
- name: kwatch
  user: {}
KUBECONFIG
echo "kwatch: point kubectl at it with:  export KUBECONFIG=$PWD/data/kubeconfig"
echo "kwatch: then try:                  kubectl get namespaces"
exec build/server/kwatch-apiserver --data-dir=data/store "$@"
