#!/usr/bin/env bash
# scripts/check-sizes.py: the tree keeps the size rules; a function over 150 lines and a file
# over 800 lines are named with file:line and length, what tests/ and build folders hold is not
# checked, and bad input exits 2.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

python3 scripts/check-sizes.py

# A function of $2 lines (signature to closing brace) named $1, in a namespace.
function_of() {
  echo "namespace x {"
  echo "int $1(int a) {"
  for ((i = 0; i < $2 - 3; ++i)); do echo "  a += $i;"; done
  echo "  return a;"
  echo "}"
  echo "}  // namespace x"
}

# A class whose member function, defined in the class after a brace-initialized member, is long.
member_of() {
  echo "struct S {"
  echo "  int n_{0};"
  echo "  S() : n_{1} {}"
  echo "  int Long() const {"
  for ((i = 0; i < $1 - 3; ++i)); do echo "    n_ += $i;  // { not a brace"; done
  echo "    return n_;"
  echo "  }"
  echo "};"
}

mkdir -p "$tmp/tree/planner" "$tmp/tree/tests/unit" "$tmp/tree/build/planner"
function_of Fits 150 > "$tmp/tree/planner/fits.cc"
python3 scripts/check-sizes.py --root "$tmp/tree" > "$tmp/out" || { echo "FAIL: 150 lines refused"; cat "$tmp/out"; exit 1; }

function_of Long 151 > "$tmp/tree/planner/long.cc"
member_of 160 > "$tmp/tree/planner/member.h"
function_of Skipped 400 > "$tmp/tree/tests/unit/skipped.cc"
function_of Skipped 400 > "$tmp/tree/build/planner/skipped.cc"
{ function_of A 100; function_of B 100; function_of C 100; function_of D 100; function_of E 100
  function_of F 100; function_of G 100; function_of H 100; function_of I 10; } > "$tmp/tree/planner/big.cc"
set +e
python3 scripts/check-sizes.py --root "$tmp/tree" > "$tmp/out" 2>&1; rc=$?
set -e
[ "$rc" = 1 ] || { echo "FAIL: violations exited $rc"; cat "$tmp/out"; exit 1; }
grep -qx 'planner/long.cc:2: function Long is 151 lines (max 150)' "$tmp/out" || { echo "FAIL: long function not named"; cat "$tmp/out"; exit 1; }
grep -qx 'planner/member.h:4: function Long is 160 lines (max 150)' "$tmp/out" || { echo "FAIL: long member not named"; cat "$tmp/out"; exit 1; }
grep -qx 'planner/big.cc:1: the file is 828 lines (max 800)' "$tmp/out" || { echo "FAIL: long file not named"; cat "$tmp/out"; exit 1; }
if grep -q 'skipped\|Fits\|big.cc:.*function' "$tmp/out"; then echo "FAIL: named what fits or is skipped"; cat "$tmp/out"; exit 1; fi
grep -q 'check-sizes: 4 files checked: 3 over the limits' "$tmp/out" || { echo "FAIL: summary"; cat "$tmp/out"; exit 1; }

# Bad input exits 2; --help exits 0.
set +e
python3 scripts/check-sizes.py --root "$tmp/nowhere" > /dev/null 2>&1; rc=$?
[ "$rc" = 2 ] || { echo "FAIL: a missing --root exited $rc"; exit 1; }
python3 scripts/check-sizes.py --max-function-lines 0 > /dev/null 2>&1; rc=$?
[ "$rc" = 2 ] || { echo "FAIL: --max-function-lines 0 exited $rc"; exit 1; }
python3 scripts/check-sizes.py --bogus > /dev/null 2>&1; rc=$?
[ "$rc" = 2 ] || { echo "FAIL: an unknown flag exited $rc"; exit 1; }
python3 scripts/check-sizes.py --help > "$tmp/out" 2>&1; rc=$?
set -e
[ "$rc" = 0 ] && grep -q 'heuristic' "$tmp/out" || { echo "FAIL: --help exited $rc"; cat "$tmp/out"; exit 1; }
echo "PASS"
