#!/usr/bin/env bash
# Imports and checks the libcu++ barrier tests (NVIDIA/cccl, libcudacxx/test/libcudacxx/cuda/barrier)
# at the CCCL release that matches the NVRTC wheel's headers (CCCL 3.0.1, the one
# gpu-conformance/ci/setup-nvrtc.sh installs). Nothing of CCCL is kept in this repository:
# the sources are read from a clone (CCCL_REPO, cloned into a temporary folder when unset),
# and each test is wrapped in a three-line kernel written here, which calls the test's `main`
# as the libcu++ NVRTC runner does (its device branch), with the block size the test asks for.
#
#   source gpu-conformance/ci/setup-nvrtc.sh
#   import/public/libcudacxx_barrier_tests.sh [PHASECHECK_BINARY]
#
# Prints, per test: the import's summary line and exit status, then `check`'s verdict line and
# time. The results are in docs/import.md ("Public kernels").
set -euo pipefail
COMMIT=f19d875da0d8bfb2e38c109b2b40522b8abbbbc3 # tag v3.0.1
PC="${1:-$(cd "$(dirname "$0")/../.." && pwd)/target/release/phasecheck}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
REPO="${CCCL_REPO:-}"
if [ -z "$REPO" ]; then
  git clone -q --filter=blob:none --no-checkout https://github.com/NVIDIA/cccl "$WORK/cccl"
  REPO="$WORK/cccl"
fi
git -C "$REPO" archive "$COMMIT" libcudacxx/test/support libcudacxx/test/libcudacxx/cuda/barrier | tar x -C "$WORK"
T="$WORK/libcudacxx/test/libcudacxx/cuda/barrier"
# test name and the block size its main sets (cuda_thread_count)
for test in ${TESTS:-cp_async_bulk cp_async_bulk_tensor_1d cp_async_bulk_tensor_2d cp_async_bulk_tensor_3d cp_async_bulk_tensor_4d cp_async_bulk_tensor_5d arrive_tx_thread arrive_tx_warp arrive_tx_cta expect_tx_thread expect_tx_warp expect_tx_cta}; do
  threads="$(grep -o 'cuda_thread_count = [0-9]*' "$T/$test.pass.cpp" | grep -o '[0-9]*$')"
  block="${BLOCK:-$threads}"
  # a tensor test's box (SMEM_DIMS, ints) is in the tensor map its host code builds: pass its bytes
  tma=()
  dims="$(grep -o 'uint32_t, [0-9]*> SMEM_DIMS{[0-9, ]*}' "$T/$test.pass.cpp" | head -n1 | grep -o '{.*}' | tr -d '{} ' || true)"
  if [ -n "$dims" ]; then
    tma=(--tma-bytes "smem_buffer=$((4 * ${dims//,/ * }))")
  fi
  cat > "$T/${test}_kernel.cu" <<CU
#define main __device__ libcudacxx_test_main
#include "$test.pass.cpp"
#undef main
extern "C" __global__ void __launch_bounds__($threads) ${test}_kernel() { libcudacxx_test_main(0, nullptr); }
CU
  echo "== $test (cuda_thread_count $threads, imported with block $block ${tma[*]})"
  set +e
  "$PC" import "$T/${test}_kernel.cu" --block "$block" "${tma[@]}" -o "$WORK/$test.phase" -- -DNDEBUG -I "$WORK/libcudacxx/test/support" 2> "$WORK/$test.facts"
  code=$?
  set -e
  grep -E '^import: .*(exact|role)|^  (assumed|unresolved)' "$WORK/$test.facts" || true
  echo "import exit $code"
  if [ -s "$WORK/$test.phase" ]; then
    start=$(date +%s.%N)
    "$PC" check "$WORK/$test.phase" --max-seconds "${MAX_SECONDS:-120}" 2>/dev/null | grep -E '^(verdict|stats|violation)' | cut -c1-200 || true
    echo "check wall $(echo "$(date +%s.%N) - $start" | bc) s"
  fi
done
