#!/usr/bin/env bash
# One command from a fresh Debian 12 / Ubuntu machine to a working kbv: system packages (when
# run as root with apt), PyTorch pinned to the GPU machines' 2.11.0, and `pip install .`, which
# makes the C++ build (engine, CLI, native extension, tests) in ./build and the `kbv` command.
# Ray (for kbv run --ray) is the plain package: the dashboard and its extras are not needed.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  need=()
  for pkg in cmake ninja-build g++ nlohmann-json3-dev libcli11-dev libfmt-dev libgtest-dev \
             libssl-dev libsqlite3-dev libcpp-httplib-dev libcurl4-openssl-dev \
             clang-format chromium; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
  done
  if [ ${#need[@]} -gt 0 ]; then
    echo "[setup] apt-get install ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  fi
fi

echo "[setup] python packages (torch 2.11.0 is large the first time)"
"$PYTHON" -m pip install -q --disable-pip-version-check \
  "torch==2.11.0" numpy ninja nanobind "scikit-build-core>=0.10" \
  pytest pytest-xdist ruff \
  "ray==2.60.0"  # kbv run --ray; plain ray (no [default]): its core runs clusters and tests

# One build for both: pip's build (scikit-build-core) runs in ./build with the tests on, so the
# kbv command is installed from the tree the tests use (two builds were half of a fresh CI's
# set-up on two cores). A later `cmake --build build` rebuilds the same tree.
echo "[setup] building ./build (engine, CLI, native extension, tests) and installing the kbv command"
"$PYTHON" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps \
  -C build-dir=build -C cmake.define.KBV_BUILD_TESTS=ON .
echo "[setup] done: $(command -v kbv || echo "build/kbv")"
