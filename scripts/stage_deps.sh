#!/usr/bin/env bash
# Stage build-time headers into .deps/include for a machine that has the runtime libraries but
# not the -dev packages (the lent GPU machine: nothing can be installed there). Copied from this
# machine's Debian packages (libsqlite3-dev, libssl-dev, nlohmann-json3-dev, libcli11-dev,
# libfmt-dev, libcurl4-openssl-dev); .deps/ is git-ignored and travels to the GPU machine through the device tool's
# `carry`. Never committed.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.deps/include
# Every header the GPU build needs must be here first: a header left out is a build failure on the
# GPU machine, found only after its start (minutes of the session's device time). Run
# scripts/setup.sh (which installs the -dev packages) before this script on a fresh machine.
missing=()
for h in sqlite3.h openssl/ssl.h x86_64-linux-gnu/curl/curl.h nlohmann/json.hpp CLI/CLI.hpp \
         fmt/format.h httplib.h; do
  [ -e /usr/include/$h ] || missing+=("/usr/include/$h")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "stage_deps: missing ${missing[*]}: run scripts/setup.sh first (it installs the -dev packages)" >&2
  exit 1
fi
rm -rf "$dest" && mkdir -p "$dest"
cp /usr/include/sqlite3.h /usr/include/sqlite3ext.h "$dest"/
cp -r /usr/include/openssl "$dest"/
cp /usr/include/x86_64-linux-gnu/openssl/*.h "$dest"/openssl/
[ -d /usr/include/x86_64-linux-gnu/curl ] && cp -r /usr/include/x86_64-linux-gnu/curl "$dest"/
for d in nlohmann CLI fmt; do [ -d /usr/include/$d ] && cp -r /usr/include/$d "$dest"/; done
# cpp-httplib (kbv serve): Debian's is a compiled library, a declarations-only header and
# libcpp-httplib.so, which links brotli (the GPU image may lack it). The libraries go to
# .deps/lib, where CMake finds them and the build's rpath points; bench/gpu_build.sh builds
# without kbv serve if one of them still does not load there.
rm -rf .deps/lib
httplib_so=$(ls /usr/lib/x86_64-linux-gnu/libcpp-httplib.so.0.* 2>/dev/null | sort | tail -1 || true)
if [ -f /usr/include/httplib.h ] && [ -n "$httplib_so" ]; then
  mkdir -p .deps/lib
  cp /usr/include/httplib.h "$dest"/
  cp -L "$httplib_so" .deps/lib/
  soname=$(objdump -p "$httplib_so" | awk '/SONAME/ {print $2}')
  [ -n "$soname" ] && [ "$soname" != "$(basename "$httplib_so")" ] &&
    ln -sf "$(basename "$httplib_so")" ".deps/lib/$soname"
  ln -sf "$(basename "$httplib_so")" .deps/lib/libcpp-httplib.so
  for lib in libbrotlidec.so.1 libbrotlienc.so.1 libbrotlicommon.so.1; do
    [ -e /usr/lib/x86_64-linux-gnu/$lib ] && cp -L /usr/lib/x86_64-linux-gnu/$lib .deps/lib/
  done
fi
du -sh .deps
