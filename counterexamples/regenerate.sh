#!/bin/sh
# Regenerate the counterexample corpus: one minimized trace per violation kind found in every
# spec under specs/. Run from the repository root. `check` exits 1 when it finds violations
# (expected here); anything else (2: a bad spec, 3: a search bound) is an error.
set -u
cd "$(dirname "$0")/.."
rm -f counterexamples/*.json
cargo run --release --quiet -- check specs/ --trace-dir counterexamples/ --format json > /dev/null
rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -ne 1 ]; then
  echo "phasecheck check failed with exit status $rc" >&2
  exit "$rc"
fi
echo "$(ls counterexamples/*.json | wc -l) traces in counterexamples/"
