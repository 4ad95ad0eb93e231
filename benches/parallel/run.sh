#!/usr/bin/env bash
# Parallel search: the same check at 1, 2, 4, 8 and 16 expansion threads, with the wall time, the
# states per second and the speedup over one thread (BENCHMARKS.md, "Parallel search").
#
#   benches/parallel/run.sh [BIN] [OUT.md]      (THREADS="1 16" runs those thread counts only)
#
# Each instance runs once per thread count under /usr/bin/time -v (wall, peak RSS); the instances
# are chosen to take >= 10 s on one thread of a current x86-64 core, so that the figure is about the
# search and not its start.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
bin=${1:-$repo/target/release/phasecheck}
out=${2:-$here/results.md}
spec=$repo/benches/double_buffer_scaling.phase
# ring(4,4,16) with every reduction off (the raw engine, ~0.9 M states) and ring(4,8,32) and
# ring(4,6,64) with the defaults (symmetry and the partial-order reduction on).
instances=(
  "--param STAGES=4 --param CONSUMERS=4 --param ITERS=16 --no-por --no-symmetry"
  "--param STAGES=4 --param CONSUMERS=8 --param ITERS=32"
  "--param STAGES=4 --param CONSUMERS=6 --param ITERS=64"
)
tmp=$(mktemp -d)
{
  echo "\`benches/parallel/run.sh\` at $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?'); $(nproc) cores; $(uptime)"
  echo
  echo "| instance | threads | verdict | states | wall (s) | states/s | speedup | max RSS (MiB) |"
  echo "|---|---|---|---|---|---|---|---|"
} >"$out"
for inst in "${instances[@]}"; do
  base=""
  for t in ${THREADS:-1 2 4 8 16}; do
    # shellcheck disable=SC2086
    /usr/bin/time -v "$bin" check "$spec" $inst --threads "$t" --format json --max-seconds 300 \
      >"$tmp/out.json" 2>"$tmp/time.txt" || true
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s}' "$tmp/time.txt")
    rss=$(awk -F': ' '/Maximum resident set size/ {printf "%.0f", $2 / 1024}' "$tmp/time.txt")
    read -r verdict states < <(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d=d[0] if isinstance(d,list) else d; print(d.get("verdict","?"), d.get("stats",{}).get("states","?"))' "$tmp/out.json")
    [ -z "$base" ] && base=$wall
    rate=$(python3 -c "print(f'{$states / $wall:,.0f}')" 2>/dev/null || echo "?")
    speed=$(python3 -c "print(f'{$base / $wall:.1f}x')")
    echo "| \`$inst\` | $t | $verdict | $states | $wall | $rate | $speed | $rss |" | tee -a "$out"
  done
done
rm -rf "$tmp"
