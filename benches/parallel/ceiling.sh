#!/usr/bin/env bash
# The host's own ceiling for parallel search: N copies of the same single-thread search started at
# once (separate processes, nothing shared but the host), against one alone. If N independent
# searches each run k times slower than one alone, no N-thread search of that workload can beat
# N / k, however little its threads share (BENCHMARKS.md, "Where the 16-thread search loses its
# time").
#
#   benches/parallel/ceiling.sh [BIN] ["N1 N2 ..."]      (default: target/release/phasecheck, "4 8 16")
#
# Prints one line per N: the wall and user seconds of each copy (/usr/bin/time), then their mean
# and its ratio to the mean of two runs alone (one before, one after).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
bin=${1:-$repo/target/release/phasecheck}
counts=${2:-"4 8 16"}
spec=$repo/benches/double_buffer_scaling.phase
inst=(--param STAGES=4 --param CONSUMERS=4 --param ITERS=16 --no-por --no-symmetry --threads 1 --format json)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
batch() { # n: n copies at once; prints "wall user" per copy
  local n=$1 i
  for i in $(seq "$n"); do
    ( /usr/bin/time -f "%e %U" "$bin" check "$spec" "${inst[@]}" >/dev/null 2>"$tmp/c$i" ) &
  done
  wait
  for i in $(seq "$n"); do tail -1 "$tmp/c$i"; done
}
mean() { awk '{ s += $1 } END { printf "%.2f", s / NR }'; }
echo "benches/parallel/ceiling.sh at $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?'); $(nproc) cores; $(uptime)"
first=$(batch 1)
lines=()
for n in $counts; do lines+=("$n|$(batch "$n" | tr '\n' ',')"); done
last=$(batch 1)
alone=$(printf '%s\n%s\n' "$first" "$last" | mean)
echo "1 alone: wall user $first, then $last (mean wall $alone s)"
for l in "${lines[@]}"; do
  n=${l%%|*}; runs=${l#*|}
  m=$(echo "$runs" | tr ',' '\n' | grep . | mean)
  echo "$n at once: wall user ${runs%,}; mean wall $m s, $(awk -v m="$m" -v a="$alone" 'BEGIN { printf "%.2f", m / a }')x one alone"
done
