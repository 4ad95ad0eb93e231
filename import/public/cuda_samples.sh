#!/usr/bin/env bash
# Imports and checks the cuda-samples kernel MatrixMulAsyncCopyLargeChunkAWBarrier
# (NVIDIA/cuda-samples, Samples/3_CUDA_Features/globalToShmemAsyncCopy) at the block size the
# sample launches it with (BLOCK_SIZE 16: a 16x16 block, matrices of two tiles). Nothing of the
# sample is kept in this repository: the wrapper written here is the sample's device code (the
# file up to its host helpers, the host-only headers left out) and an explicit instantiation.
#
#   source gpu-conformance/ci/setup-nvrtc.sh
#   pip install 'nvidia-cuda-runtime==13.0.*' 'nvidia-cuda-crt==13.0.*'   # cuda_runtime.h
#   SAMPLES_DIR=/path/to/cuda-samples CUDA_INCLUDE=/path/to/cu13/include \
#     import/public/cuda_samples.sh [PHASECHECK_BINARY]
#
# Results: docs/import.md ("Public kernels").
set -euo pipefail
PC="${1:-$(cd "$(dirname "$0")/../.." && pwd)/target/release/phasecheck}"
: "${SAMPLES_DIR:?set SAMPLES_DIR to a cuda-samples checkout}"
: "${CUDA_INCLUDE:?set CUDA_INCLUDE to a folder with cuda_runtime.h}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
S="$SAMPLES_DIR/Samples/3_CUDA_Features/globalToShmemAsyncCopy/globalToShmemAsyncCopy.cu"
B="${BLOCK_SIZE:-16}"
end="$(grep -n '^void ConstantInit' "$S" | head -n 1 | cut -d: -f1)"
{
  echo '#line 1 "globalToShmemAsyncCopy.cu"'
  head -n "$((end - 1))" "$S" | sed -E 's@^#include <(helper_.*|stdio.h|stdlib.h|string.h|math.h|assert.h)>@// (a host header left out)@'
  echo "template __global__ void MatrixMulAsyncCopyLargeChunkAWBarrier<$B>(float*, const float*, const float*, int, int);"
} > "$WORK/g2s.cu"
entry="_Z37MatrixMulAsyncCopyLargeChunkAWBarrierILi${B}EEvPfPKfS2_ii"
echo "== MatrixMulAsyncCopyLargeChunkAWBarrier<$B> (block ${B}x${B}, wA = wB = $((2 * B)))"
set +e
"$PC" import "$WORK/g2s.cu" --entry "$entry" --block "$B,$B" --param 3=$((2 * B)) --param 4=$((2 * B)) \
  -o "$WORK/g2s.phase" -- -I "$CUDA_INCLUDE" -default-device 2> "$WORK/g2s.facts"
code=$?
set -e
grep -E '^import: |^  (assumed|unresolved)|error' "$WORK/g2s.facts" | cut -c1-300 | head -n 20 || true
echo "import exit $code"
if [ -s "$WORK/g2s.phase" ]; then
  if [ -n "${KEEP:-}" ]; then cp "$WORK/g2s.phase" "$KEEP/"; fi
  "$PC" check "$WORK/g2s.phase" --max-seconds "${MAX_SECONDS:-60}" 2>/dev/null \
    | grep -E '^(verdict|stats|violation|root cause)' | cut -c1-300 || true
fi
