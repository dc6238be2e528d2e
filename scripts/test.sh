#!/usr/bin/env bash
# Installs what is missing, builds everything and runs every test (unit, integration and the
# kubectl end-to-end scenario) through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh -DKWATCH_BUILD_TESTS=ON
cd build
rc=0
ctest --output-on-failure -j 2 --timeout 600 || rc=$?
if [ "$rc" -ne 0 ]; then
  # After the summary, so that a log kept only by its tail still says why.
  ../scripts/failed-tests-digest .
  exit "$rc"
fi
../scripts/fuzz.sh --smoke
