#!/usr/bin/env bash
# The partial-order reduction before and after a change: states, wall time and peak RSS of two
# release binaries on the same protocols, one search thread each, every kind checked.
# Usage: benches/por_compare.sh OLD_BINARY NEW_BINARY [MAX_SECONDS]   (from the repository root)
# Prints a Markdown table for BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
old=$1 new=$2 limit=${3:-120}
cases=(
  "benches/double_buffer_scaling.phase --param STAGES=4 --param CONSUMERS=4 --param ITERS=16"
  "benches/double_buffer_scaling.phase --param STAGES=4 --param CONSUMERS=8 --param ITERS=32"
  "specs/hopper/cutlass_pipeline_tma_async_cluster_multicast.phase"
  "specs/hopper/cutlass_pipeline_tma_async_cluster_multicast.phase --param ITERS=8"
  "benches/outside/cutlass_gemm_cluster2x1_multicast_pipeline.phase"
  "benches/outside/cutlass_gemm_cluster2x1_multicast_pipeline_bug_empty_count_one_cta.phase"
  "specs/hopper/fa3_fwd_persistent_ws_uniform.phase --param TILES=4"
  "specs/hopper/deepgemm_fp8_gemm_persistent.phase --param STAGES=4 --param KITERS=2"
  "benches/realshape/pingpong_gemm.phase"
  "benches/realshape/pingpong_gemm_bug_tx_only_a.phase"
  "benches/outside/cccl_pipeline_partitioned_cp_async.phase"
  "benches/outside/cutlass_sm80_mma_multistage_cp_async.phase"
)
one() {
  local bin=$1; shift
  local out
  out=$( { /usr/bin/time -f "TIME %e %M" "$bin" check "$@" --threads 1 --max-seconds "$limit" --max-memory 4096 --format json; } 2>&1 || true)
  python3 - "$out" <<'PY'
import json, re, sys
out = sys.argv[1]
t = re.search(r"TIME ([0-9.]+) ([0-9]+)", out)
j = json.loads(out[out.index("{"):out.rindex("}") + 1])
verdict = j["verdict"]
if verdict == "violated":
    verdict += " (" + ", ".join(sorted({v["kind"] for v in j["violations"]})) + ")"
if j.get("bound"):
    verdict += f", stopped by {j['bound']}"
print(f"{verdict} | {j['stats']['states']:,} | {float(t.group(1)):.2f} s | {int(t.group(2)) // 1024} MiB")
PY
}
echo "| protocol | before: verdict | states | wall | peak RSS | after: verdict | states | wall | peak RSS |"
echo "|---|---|---|---|---|---|---|---|---|"
for c in "${cases[@]}"; do
  # shellcheck disable=SC2086
  echo "| \`$c\` | $(one "$old" $c) | $(one "$new" $c) |"
done
