#!/usr/bin/env bash
# What the lent GPU machine has that kbv's build and measurement depend on (toolkit parts,
# profilers, libraries), written to $OUT/probe.txt.
OUT=${OUT:-results/gpu}
mkdir -p "$OUT"
{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,memory.total --format=csv
  echo "--- tools"; for t in ncu nsys nvcc cmake ninja; do echo "$t: $(command -v $t || echo missing)"; done
  nvcc --version | tail -2
  echo "--- CUPTI / NVML"
  ls -d /usr/local/cuda*/extras/CUPTI/lib64 /usr/local/cuda*/targets/*/lib/libcupti* 2>/dev/null | head
  find / -xdev \( -name nvml.h -o -name 'libnvidia-ml.so*' \) 2>/dev/null | head -5
  echo "--- runtime libraries"
  ldconfig -p | grep -E 'libcrypto.so|libsqlite3|libfmt' | head
  echo "--- python"
  python3 -c 'import sys, torch; print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.backends.cudnn.version())'
  python3 -c 'import nanobind, sys; print("nanobind", nanobind.__version__)'
  ncu --version 2>&1 | tail -1
  nproc; free -g | head -2
} > "$OUT/probe.txt" 2>&1
cat "$OUT/probe.txt"
