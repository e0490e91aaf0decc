#!/usr/bin/env bash
# scripts/check-layers.py: the tree and the programs in $QRSTORE_BIN agree with the layers; an
# include from a lower stage to a higher one, and a client that links the server, are caught.
set -euo pipefail
bin=${QRSTORE_BIN:?set QRSTORE_BIN to the bin folder of a build}
bin=$(cd "$bin" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

python3 scripts/check-layers.py --binaries "$bin"

# A planner header that includes the commit stage is named.
mkdir -p "$tmp/tree/planner"
printf '#pragma once\n#include "commit/outcome.h"\n' > "$tmp/tree/planner/bad.h"
if python3 scripts/check-layers.py --root "$tmp/tree" > "$tmp/out" 2>&1; then
  echo "FAIL: an upward include passed"; cat "$tmp/out"; exit 1
fi
grep -q 'planner/bad.h:2: planner includes commit/outcome.h' "$tmp/out" || { echo "FAIL: not named"; cat "$tmp/out"; exit 1; }

# A client program that holds the server's code is named.
mkdir -p "$tmp/bin"
for p in qrstore-bench qrstore-row-bench qrstore-engine-perf; do ln -s "$bin/$p" "$tmp/bin/$p"; done
ln -s "$bin/qrstore-server" "$tmp/bin/qrstore-client"
if python3 scripts/check-layers.py --binaries "$tmp/bin" > "$tmp/out" 2>&1; then
  echo "FAIL: a client linking the server passed"; cat "$tmp/out"; exit 1
fi
grep -q "qrstore-client: .*ServerImpl" "$tmp/out" || { echo "FAIL: not named"; cat "$tmp/out"; exit 1; }
grep -q "qrstore-client: links the ZooKeeper library" "$tmp/out" || { echo "FAIL: ldd not checked"; cat "$tmp/out"; exit 1; }

# Bad input exits 2.
set +e
python3 scripts/check-layers.py --root "$tmp/nowhere" > /dev/null 2>&1; rc=$?
set -e
[ "$rc" = 2 ] || { echo "FAIL: a missing --root exited $rc"; exit 1; }
echo "PASS"
