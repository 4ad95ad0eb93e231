#!/usr/bin/env bash
# Benchmarks of the checker (release build). Prints a Markdown table for BENCHMARKS.md.
# Usage: benches/run.sh   (from the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${NO_BUILD:-}" = 1 ] || cargo build --release -q
bin=target/release/phasecheck
echo "| spec | params | states | transitions | depth | seconds (median of 5) |"
echo "|---|---|---|---|---|---|"
run() {
  local spec=$1; shift
  local secs=()
  local line
  for _ in 1 2 3 4 5; do
    line=$($bin check "$spec" --format json "$@" || true)
    secs+=("$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["stats"]["seconds"])' "$line")")
  done
  local med
  med=$(printf '%s\n' "${secs[@]}" | sort -g | sed -n 3p)
  python3 - "$line" "$med" "$spec" "$*" <<'PY'
import json, sys
r = json.loads(sys.argv[1]); s = r["stats"]
print(f"| {sys.argv[3]} | {sys.argv[4] or '(defaults)'} | {s['states']} | {s['transitions']} | {s['depth']} | {float(sys.argv[2]):.3f} |")
PY
}
run specs/guide/double_buffer.phase --param ITERS=8
run benches/double_buffer_scaling.phase --param ITERS=8 --param CONSUMERS=2
run benches/double_buffer_scaling.phase --param ITERS=16 --param CONSUMERS=3
run benches/double_buffer_scaling.phase --param ITERS=8 --param CONSUMERS=4 --param STAGES=3
