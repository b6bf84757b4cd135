#!/usr/bin/env bash
# The GPU machine's kbv build, shared by every bench/gpu_*.sh script: Release, no tests (the
# machine has no GoogleTest and the tests run in CI). Usage: bench/gpu_build.sh LOG_FILE
# Prints the log's tail and exits non-zero when the build fails. An up-to-date build is a no-op;
# a build/ left by an older checkout is rebuilt, never used as is.
set -uo pipefail
cd "$(dirname "$0")/.."
LOG=${1:?usage: bench/gpu_build.sh LOG_FILE}
mkdir -p "$(dirname "$LOG")"
{ cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKBV_BUILD_TESTS=OFF &&
  cmake --build build -j"$(nproc)"; } > "$LOG" 2>&1 || { tail -40 "$LOG"; exit 1; }
# kbv serve links cpp-httplib staged from this project's Debian machine (scripts/stage_deps.sh);
# should one of its libraries not load here, kbv is built again without the service rather
# than not start at all.
missing=$(ldd build/kbv 2>/dev/null | grep "not found" || true)
if [ -n "$missing" ]; then
  echo "$missing" >> "$LOG"
  echo "kbv: a library does not load here; building without kbv serve" | tee -a "$LOG"
  { cmake -S . -B build -DKBV_WITH_SERVE=OFF && cmake --build build -j"$(nproc)"; } >> "$LOG" 2>&1 ||
    { tail -40 "$LOG"; exit 1; }
fi
# Said on stdout, not only in the log: a build without the service (cpp-httplib not staged in
# .deps: run scripts/stage_deps.sh here first) cost session 19 its GRPO benchmark.
if grep -q "kbv serve (cpp-httplib) ON" "$LOG"; then echo "kbv serve: built"; else
  echo "kbv serve: NOT built (stage .deps with scripts/stage_deps.sh before the device call)"; fi
