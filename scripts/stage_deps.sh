#!/usr/bin/env bash
# Stage build-time headers into .deps/include for a machine that has the runtime libraries but
# not the -dev packages (the lent GPU machine: nothing can be installed there). Copied from this
# machine's Debian packages (libsqlite3-dev, libssl-dev, nlohmann-json3-dev, libcli11-dev,
# libfmt-dev, libcurl4-openssl-dev); .deps/ is git-ignored and travels to the GPU machine through the device tool's
# `carry`. Never committed.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.deps/include
rm -rf "$dest" && mkdir -p "$dest"
cp /usr/include/sqlite3.h /usr/include/sqlite3ext.h "$dest"/
cp -r /usr/include/openssl "$dest"/
cp /usr/include/x86_64-linux-gnu/openssl/*.h "$dest"/openssl/
[ -d /usr/include/x86_64-linux-gnu/curl ] && cp -r /usr/include/x86_64-linux-gnu/curl "$dest"/
for d in nlohmann CLI fmt; do [ -d /usr/include/$d ] && cp -r /usr/include/$d "$dest"/; done
du -sh .deps
