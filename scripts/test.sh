#!/usr/bin/env bash
# The test command: C++ unit tests (GoogleTest through CTest), then the Python tests, which run
# kbv end to end on the CPU over the bundled suite and the wrong-candidate examples.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
ctest --test-dir build --output-on-failure -j"$(nproc)"
KBV_BIN=${KBV_BIN:-$PWD/build/kbv} KBV_NATIVE_DIR=${KBV_NATIVE_DIR:-$PWD/build} \
  "$PYTHON" -m pytest -n "${KBV_TEST_JOBS:-2}" --durations=20 tests/python "$@"
