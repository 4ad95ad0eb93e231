#!/usr/bin/env bash
# Imports and checks CUTLASS's pipeline unit tests (NVIDIA/cutlass, test/unit/pipeline): the
# kernel of each test file (its `KERNEL` section) instantiated for a 1x1 cluster, compiled by
# NVRTC for sm_90a with -DCUTLASS_UNIT_TEST_PIPELINE=1 (the flag under which producer_commit
# completes the transaction bytes itself, since no TMA copy is issued). Nothing of CUTLASS is
# kept in this repository: the test files are read from a checkout (CUTLASS_DIR), and the
# wrapper written here keeps the test's own includes except the host-side ones (gtest, thrust,
# the testbed, host references), then the KERNEL section as it is (a #line keeps the test's
# line numbers), then an explicit instantiation.
#
#   source gpu-conformance/ci/setup-nvrtc.sh
#   pip install 'nvidia-cuda-runtime==13.0.*' 'nvidia-cuda-crt==13.0.*'   # cuda_runtime_api.h for cute
#   CUTLASS_DIR=/path/to/cutlass CUDA_INCLUDE=/path/to/cu13/include \
#     import/public/cutlass_pipeline_tests.sh [PHASECHECK_BINARY]
#
# Prints, per test: the import's summary and every assumed/unresolved fact, then `check`'s
# verdict and stats lines. Results: docs/import.md ("Public kernels").
set -euo pipefail
PC="${1:-$(cd "$(dirname "$0")/../.." && pwd)/target/release/phasecheck}"
: "${CUTLASS_DIR:?set CUTLASS_DIR to a CUTLASS checkout}"
: "${CUDA_INCLUDE:?set CUDA_INCLUDE to a folder with cuda_runtime_api.h}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
T="$CUTLASS_DIR/test/unit/pipeline"
# test file, the kernel's parameter type, the instantiation's stages, block, --param values
run() {
  local test="$1" arg="$2" stages="$3" block="$4" params="$5"
  local src="$T/$test.cu" cu="$WORK/$test.cu"
  local start
  start="$(grep -n '^/* *KERNEL' "$src" | cut -d: -f1)"
  {
    head -n "$start" "$src" | grep -E '^(#include|using namespace)' \
      | grep -vE 'cutlass_unit_test|thrust|testbed|reference/host|GPU_Clock|print_error|core_io|cluster_launch' || true
    echo "#line $start \"$test.cu\""
    # the KERNEL section ends at the first line of 50+ slashes
    awk -v s="$start" 'NR >= s { print; if (length($0) >= 50 && $0 ~ /^\/+$/) exit }' "$src"
    echo "template __global__ void pipeline_device<Shape<_1,_1,_1>, $stages>($arg);"
  } > "$cu"
  echo "== $test (cluster 1x1, $stages stages, block $block, $params)"
  set +e
  # shellcheck disable=SC2086
  "$PC" import "$cu" --block "$block" $params -o "$WORK/$test.phase" -- \
    -I "$CUTLASS_DIR/include" -I "$CUDA_INCLUDE" -default-device -DCUTLASS_UNIT_TEST_PIPELINE=1 \
    2> "$WORK/$test.facts"
  local code=$?
  set -e
  grep -E '^import: |^  (role|assumed|unresolved)|error' "$WORK/$test.facts" | cut -c1-300 | head -n 40 || true
  echo "import exit $code"
  if [ -s "$WORK/$test.phase" ]; then
    if [ -n "${KEEP:-}" ]; then cp "$WORK/$test.phase" "$KEEP/"; fi
    "$PC" check "$WORK/$test.phase" --max-seconds "${MAX_SECONDS:-120}" 2>/dev/null | grep -E '^(verdict|stats|violation)' | cut -c1-200 || true
  fi
}
ITERS="${ITERS:-4}"
run pipeline_tma_async 'uint32_t' "${STAGES:-2}" 128 "--param 0=$ITERS"
run pipeline_tma_async_warp_specialized 'KernelParams' "${STAGES:-2}" 384 "--param 0=$ITERS"
