#!/usr/bin/env bash
# The real-shape benchmarks of benches/realshape/README.md: the ping-pong GEMM at its real shape,
# each planted bug, and the library's FA3, DeepGEMM and CUTLASS multicast specs at larger
# parameters. Full check (every kind), each run bounded by --max-seconds and --max-memory.
#
# Usage (from anywhere; on a shared machine run it under `nice -n 10`):
#   benches/realshape/run.sh [--seconds S] [--phasecheck PATH] [--out FILE]
#
# Prints a Markdown table (file, params, verdict and kinds, states, wall time, max RSS) and
# writes it to FILE too (default: benches/realshape/results.md), with `uptime` before and after.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
seconds=60
pc="$repo/target/release/phasecheck"
out="$here/results.md"
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --phasecheck) pc="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done

runs=(
  "benches/realshape/pingpong_gemm.phase|"
  "benches/realshape/pingpong_gemm.phase|--param WARPS=1"
  "benches/realshape/pingpong_gemm_bug_early_release.phase|"
  "benches/realshape/pingpong_gemm_bug_start_phase.phase|"
  "benches/realshape/pingpong_gemm_bug_state_per_tile.phase|"
  "benches/realshape/pingpong_gemm_bug_store_reuse.phase|"
  "benches/realshape/pingpong_gemm_bug_tx_only_a.phase|"
  "benches/realshape/pingpong_gemm_bug_warp_arrives.phase|"
  "specs/hopper/fa3_fwd_persistent_ws_uniform.phase|--param TILES=4"
  "specs/hopper/deepgemm_fp8_gemm_persistent.phase|--param STAGES=4 --param KITERS=2"
  "specs/hopper/cutlass_pipeline_tma_async_cluster_multicast.phase|--param ITERS=8"
)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
{
  echo "commit $(git -C "$repo" rev-parse --short HEAD); --max-seconds $seconds --max-memory 4096; uptime before: $(uptime)"
  echo
  echo "| file | params | verdict | states | wall | max RSS |"
  echo "|---|---|---|---|---|---|"
} > "$tmp/table"
for r in "${runs[@]}"; do
  f=${r%%|*}
  params=${r#*|}
  # shellcheck disable=SC2086
  /usr/bin/time -v "$pc" check "$repo/$f" $params --max-seconds "$seconds" --max-memory 4096 \
    > "$tmp/out" 2> "$tmp/time" || true
  verdict=$(grep -m1 '^verdict:' "$tmp/out" | sed 's/^verdict: *//')
  states=$(grep -m1 '^stats:' "$tmp/out" | sed 's/^stats: *\([0-9]*\) states.*/\1/')
  wall=$(grep 'Elapsed (wall clock)' "$tmp/time" | sed 's/.*: //')
  rss=$(grep 'Maximum resident set size' "$tmp/time" | sed 's/.*: //')
  echo "| $(basename "$f" .phase) | ${params:-(defaults)} | $verdict | $states | $wall | $((rss / 1024)) MB |" >> "$tmp/table"
done
echo >> "$tmp/table"
echo "uptime after: $(uptime)" >> "$tmp/table"
cat "$tmp/table"
cp "$tmp/table" "$out"
