#!/usr/bin/env bash
# Installs the Debian 12 packages kwatch needs to build, test and benchmark, skipping what is
# already present. Idempotent; needs root (or sudo) only when something is missing.
set -euo pipefail

packages=(
  g++ cmake ninja-build ccache pkg-config
  libboost1.81-dev libboost-json1.81-dev libspdlog-dev
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  libre2-dev libssl-dev openssl zlib1g-dev
  # HTTP/2: the library; for the tests and benchmarks, its client tools and a Python client.
  libnghttp2-dev nghttp2-client python3-h2
  etcd-server etcd-client
  # The HA topology's load balancer (deploy/local-cluster, e2e.ha).
  haproxy
  curl python3 python3-kubernetes python3-websocket python3-yaml python3-cryptography python3-protobuf python3-cbor2
  gnuplot-nox
  # The fuzz targets (scripts/fuzz.sh): clang 14 and its runtime libraries (libFuzzer, ASan,
  # UBSan), which clang only recommends.
  clang clang-14 libclang-rt-14-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# kubectl for the end-to-end tests: Debian's kubernetes-client, unless some kubectl is present.
if ! command -v kubectl >/dev/null 2>&1; then
  missing+=(kubernetes-client)
fi

if [ ${#missing[@]} -gt 0 ]; then
  echo "kwatch: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
