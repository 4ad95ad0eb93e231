#!/usr/bin/env bash
# Imports and checks cuda-samples kernels (NVIDIA/cuda-samples at c94ff366aed18c797b8a85dfaac7817b0228b420):
#
# - every kernel of Samples/3_CUDA_Features/globalToShmemAsyncCopy (BLOCK_SIZE, default 16: a
#   16x16 block, matrices of two tiles, as the sample launches them; the shared-state pipeline
#   kernel's block is BLOCK_SIZE x (BLOCK_SIZE + 2));
# - normVecByDotProductAWBarrier of Samples/0_Introduction/simpleAWBarrier (a block of AW_BLOCK
#   threads, default 64, and as many vector elements: the sample's block size comes from the
#   occupancy API at run time; the import is of one CTA, so grid.sync() is two __syncthreads
#   under stated assumptions).
#
# Nothing of the samples is kept in this repository: the wrappers written here are each
# sample's device code (the file up to its host helpers, the host-only headers left out) and,
# for the templates, explicit instantiations.
#
#   source gpu-conformance/ci/setup-nvrtc.sh
#   target/nvrtc-venv/bin/pip install 'nvidia-cuda-runtime==13.0.*' 'nvidia-cuda-crt==13.0.*'   # cuda_runtime.h
#   SAMPLES_DIR=/path/to/cuda-samples CUDA_INCLUDE=/path/to/cu13/include \
#     import/public/cuda_samples.sh [PHASECHECK_BINARY]
#
# KERNELS picks some of them (default: all); KEEP=DIR keeps the specs. Results: docs/import.md
# ("Public kernels").
set -euo pipefail
PC="${1:-$(cd "$(dirname "$0")/../.." && pwd)/target/release/phasecheck}"
: "${SAMPLES_DIR:?set SAMPLES_DIR to a cuda-samples checkout}"
: "${CUDA_INCLUDE:?set CUDA_INCLUDE to a folder with cuda_runtime.h}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
B="${BLOCK_SIZE:-16}"
AW="${AW_BLOCK:-64}"
HOST_HEADERS='s@^#include <(helper_.*|stdio.h|stdlib.h|string.h|math.h|assert.h)>@// (a host header left out)@'

# the device part of a sample: the file up to the first line matching $2
device_part() {
  local src="$1" stop="$2" name="$3" end
  end="$(grep -n "$stop" "$src" | head -n 1 | cut -d: -f1)"
  echo "#line 1 \"$name\""
  head -n "$((end - 1))" "$src" | sed -E "$HOST_HEADERS"
}

# import and check: the kernel's name, the wrapper, its entry, then import's arguments
run() {
  local k="$1" cu="$2" entry="$3"
  shift 3
  case " ${KERNELS:-$k} " in *" $k "*) ;; *) return 0 ;; esac
  echo "== $k ($*)"
  set +e
  "$PC" import "$cu" --entry "$entry" "$@" -o "$WORK/$k.phase" -- -I "$CUDA_INCLUDE" -default-device \
    2> "$WORK/$k.facts"
  local code=$?
  set -e
  grep -E '^import: |^  (assumed|unresolved)|error' "$WORK/$k.facts" | cut -c1-300 | head -n 20 || true
  echo "import exit $code"
  if [ -s "$WORK/$k.phase" ]; then
    if [ -n "${KEEP:-}" ]; then cp "$WORK/$k.phase" "$KEEP/"; fi
    local start
    start=$(date +%s.%N)
    "$PC" check "$WORK/$k.phase" --max-seconds "${MAX_SECONDS:-60}" 2>/dev/null \
      | grep -E '^(verdict|stats|violation|root cause|  from: )' | cut -c1-300 || true
    echo "check wall $(echo "$(date +%s.%N) - $start" | bc) s"
  fi
}

G="$SAMPLES_DIR/Samples/3_CUDA_Features/globalToShmemAsyncCopy/globalToShmemAsyncCopy.cu"
{
  device_part "$G" '^void ConstantInit' globalToShmemAsyncCopy.cu
  for k in MatrixMulAsyncCopyMultiStageLargeChunk MatrixMulAsyncCopyLargeChunk MatrixMulAsyncCopyLargeChunkAWBarrier \
    MatrixMulAsyncCopyMultiStageSharedState MatrixMulAsyncCopyMultiStage MatrixMulAsyncCopySingleStage; do
    echo "template __global__ void $k<$B>(float*, const float*, const float*, int, int);"
  done
  for k in MatrixMulNaive MatrixMulNaiveLargeChunk; do
    echo "template __global__ void $k<$B>(float*, float*, float*, int, int);"
  done
} > "$WORK/g2s.cu"
# the matrices are two tiles wide (wA = wB = 2 * BLOCK_SIZE: param 3 and 4)
W=$((2 * B))
for k in MatrixMulAsyncCopyMultiStageLargeChunk MatrixMulAsyncCopyLargeChunk MatrixMulAsyncCopyLargeChunkAWBarrier \
  MatrixMulAsyncCopyMultiStage MatrixMulAsyncCopySingleStage; do
  run "$k" "$WORK/g2s.cu" "_Z${#k}${k}ILi${B}EEvPfPKfS2_ii" --block "$B,$B" --param "3=$W" --param "4=$W"
done
k=MatrixMulAsyncCopyMultiStageSharedState
run "$k" "$WORK/g2s.cu" "_Z${#k}${k}ILi${B}EEvPfPKfS2_ii" --block "$B,$((B + 2))" --param "3=$W" --param "4=$W"
for k in MatrixMulNaive MatrixMulNaiveLargeChunk; do
  run "$k" "$WORK/g2s.cu" "_Z${#k}${k}ILi${B}EEvPfS0_S0_ii" --block "$B,$B" --param "3=$W" --param "4=$W"
done

A="$SAMPLES_DIR/Samples/0_Introduction/simpleAWBarrier/simpleAWBarrier.cu"
device_part "$A" '^int runNormVecByDotProductAWBarrier' simpleAWBarrier.cu > "$WORK/aw.cu"
# params: vecA, vecB, partialResults, size (one element per thread)
run normVecByDotProductAWBarrier "$WORK/aw.cu" _Z28normVecByDotProductAWBarrierPfS_Pdi --block "$AW" --param "3=$AW"
