#!/usr/bin/env bash
# Imports and checks ThunderKittens' educational H100 GEMM, level 08 (HazyResearch/ThunderKittens,
# kernels/gemm/educational_h100/level_08.cu): one producer warpgroup (thread 0 issues the TMA
# loads of the next k-tile on one barrier), two consumer warpgroups (wgmma on the current tile),
# a block-wide __syncthreads between rounds, then the consumers' TMA stores. ThunderKittens
# includes the C++ standard library, which NVRTC lacks, so the PTX comes from nvcc (the wheel's,
# with the host g++), with the flags of TK's kernels/common.mk for an H100: -std=c++20 -O3
# --use_fast_math --expt-extended-lambda --expt-relaxed-constexpr -DNDEBUG -lineinfo
# -DKITTENS_HOPPER -arch=sm_90a. Nothing of ThunderKittens is kept in this repository.
#
#   source gpu-conformance/ci/setup-nvrtc.sh
#   target/nvrtc-venv/bin/pip install 'nvidia-cuda-nvcc==13.0.*' 'nvidia-nvvm==13.0.*' \
#       'nvidia-cuda-runtime==13.0.*' 'nvidia-cuda-crt==13.0.*'
#   TK_DIR=/path/to/ThunderKittens CUDA_HOME=target/nvrtc-venv/lib/python3.11/site-packages/nvidia/cu13 \
#     import/public/thunderkittens_level08.sh [PHASECHECK_BINARY]
#
# The problem size is the field `N` of the kernel's `__grid_constant__ matmul_globals` (three
# `gl`s of 384 bytes, then N: byte 1152 of param 0), given with --param 0+1152=N; N = 128 is two
# k-tiles. Every TMA box is one 64x64 bf16 tile: --tma-bytes __shm=8192.
# Results: docs/import.md ("Public kernels").
set -euo pipefail
PC="${1:-$(cd "$(dirname "$0")/../.." && pwd)/target/release/phasecheck}"
: "${TK_DIR:?set TK_DIR to a ThunderKittens checkout}"
: "${CUDA_HOME:?set CUDA_HOME to a folder with bin/nvcc and include/cuda_runtime.h}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
N="${N:-128}"
K="$TK_DIR/kernels/gemm/educational_h100"
(cd "$K" && "$CUDA_HOME/bin/nvcc" -ptx -o "$WORK/level_08.ptx" level_08.cu -std=c++20 -O3 --use_fast_math \
  --expt-extended-lambda --expt-relaxed-constexpr -DNDEBUG -lineinfo -DKITTENS_HOPPER -arch=sm_90a \
  -I "$TK_DIR/include" -I "$TK_DIR/prototype" -I "$CUDA_HOME/include" 2> "$WORK/nvcc.log") || {
  tail -n 20 "$WORK/nvcc.log"
  exit 1
}
# the one field the kernel reads of its globals is N, at byte 1152
grep -qE 'ld\.param\.u32[[:space:]]+%r[0-9]+, \[%rd[0-9]+\+1152\]' "$WORK/level_08.ptx" || {
  echo "level_08.ptx does not read N at byte 1152 of its param: the layout of matmul_globals changed" >&2
  exit 1
}
echo "== level_08 kernel (block 384, N = $N)"
set +e
"$PC" import "$WORK/level_08.ptx" --entry _Z6kernel14matmul_globals --block 384 --param "0+1152=$N" \
  --tma-bytes __shm=8192 -o "$WORK/level_08.phase" 2> "$WORK/level_08.facts"
code=$?
set -e
grep -E '^import: |^  (role|unresolved)|error' "$WORK/level_08.facts" | cut -c1-300 | head -n 40 || true
grep -E '^  assumed' "$WORK/level_08.facts" | sed -E 's/^  assumed +[^ ]+ +(\([^)]*\) )?//' | cut -c1-120 | sort | uniq -c || true
echo "import exit $code"
if [ -s "$WORK/level_08.phase" ]; then
  if [ -n "${KEEP:-}" ]; then cp "$WORK/level_08.phase" "$KEEP/"; fi
  "$PC" check "$WORK/level_08.phase" --max-seconds "${MAX_SECONDS:-120}" 2>/dev/null \
    | grep -E '^(verdict|stats|violation|root cause)' | cut -c1-300 || true
fi
