#!/usr/bin/env bash
# Imports and checks DeepGEMM's sm90 kernels (deepseek-ai/DeepGEMM, deep_gemm/include/deep_gemm/
# impls): sm90_bf16_gemm_impl and sm90_fp8_gemm_1d2d_impl, each instantiated as DeepGEMM's JIT
# would for one small GEMM (one block, two k-blocks, two stages, one TMA and one math warpgroup,
# no multicast), compiled by NVRTC for sm_90a with the JIT's own NVRTC flags (-default-device,
# --device-int128, C++20). Nothing of DeepGEMM or CUTLASS is kept in this repository; the wrapper
# written here is an explicit instantiation, plus two things NVRTC lacks: the few <utility> names
# DeepGEMM uses (from libcu++), and cudaGridDependencySynchronize() (the griddepcontrol.wait it is).
#
#   source gpu-conformance/ci/setup-nvrtc.sh
#   pip install 'nvidia-cuda-runtime==13.0.*' 'nvidia-cuda-crt==13.0.*'   # cuda_runtime_api.h for cute
#   DEEPGEMM_DIR=/path/to/DeepGEMM CUTLASS_DIR=/path/to/cutlass CUDA_INCLUDE=/path/to/cu13/include \
#     import/public/deepgemm_sm90.sh [PHASECHECK_BINARY]
#
# The tensor maps' boxes are host-side: --tma-bytes gives them (A: BLOCK_K x BLOCK_M elements,
# B: BLOCK_K x BLOCK_N, D: the swizzle atom's columns x BLOCK_M, SFA: BLOCK_M floats).
# Results: docs/import.md ("Public kernels").
set -euo pipefail
PC="${1:-$(cd "$(dirname "$0")/../.." && pwd)/target/release/phasecheck}"
: "${DEEPGEMM_DIR:?set DEEPGEMM_DIR to a DeepGEMM checkout}"
: "${CUTLASS_DIR:?set CUTLASS_DIR to a CUTLASS checkout}"
: "${CUDA_INCLUDE:?set CUDA_INCLUDE to a folder with cuda_runtime_api.h}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/shim"
{
  echo '// NVRTC has no C++ standard library (its built-in headers have std::move/forward): the'
  echo '// other names DeepGEMM takes from <utility>, from libcu++'
  echo '#pragma once'
  echo '#include <cuda/std/utility>'
  echo '#include <cuda/std/type_traits>'
  echo 'namespace std {'
  for n in integer_sequence make_integer_sequence index_sequence make_index_sequence; do
    echo "using cuda::std::$n;"
  done
  echo '}'
} > "$WORK/shim/utility"
prelude() {
  echo "// cudaGridDependencySynchronize() is what this PTX instruction is (NVRTC's headers leave it out)"
  echo '#define cudaGridDependencySynchronize() asm volatile("griddepcontrol.wait;" ::: "memory")'
  echo "#include <deep_gemm/impls/$1.cuh>"
}
TMAP='const __grid_constant__ cute::TmaDescriptor'
# fp8's K: 128 is one k-block (one scale of B, written by one thread); 256 is two k-blocks, whose
# two scales two threads of warp 1 write (20 thread roles: `check` stops at its bound)
FP8_K="${FP8_K:-128}"
{
  prelude sm90_bf16_gemm
  echo '// K-major A and B; M, N, K = 64, 64, 128; one group; BLOCK 64 x 64 x 64; 128-byte swizzles;'
  echo '// 2 stages; 128 TMA + 128 math threads; no multicast; 1 SM; a normal GEMM into bf16'
  echo 'template __global__ void deep_gemm::sm90_bf16_gemm_impl<cute::UMMA::Major::K, cute::UMMA::Major::K,'
  echo '    64, 64, 128, 1, 64, 64, 64, 128, 128, 128, 2, 128, 128, 1, false, 1,'
  echo "    deep_gemm::GemmType::Normal, false, cutlass::bfloat16_t>(int*, uint32_t, uint32_t, uint32_t, $TMAP, $TMAP, $TMAP);"
} > "$WORK/sm90_bf16_gemm.cu"
{
  prelude sm90_fp8_gemm_1d2d
  echo "// K-major SFB; M, N, K = 64, 64, $FP8_K; one group; BLOCK 64 x 64 x 128; 128-byte swizzles;"
  echo '// 2 stages; 128 TMA + 128 math threads; no multicast; 1 SM; a normal GEMM into bf16'
  echo 'template __global__ void deep_gemm::sm90_fp8_gemm_1d2d_impl<cute::UMMA::Major::K,'
  echo "    64, 64, $FP8_K, 1, 64, 64, 128, 128, 128, 128, 2, 128, 128, 1, false, 1,"
  echo '    deep_gemm::GemmType::Normal, cutlass::bfloat16_t, deep_gemm::epilogue::transform::EpilogueIdentity>('
  echo "    float*, int*, uint32_t, uint32_t, uint32_t, $TMAP, $TMAP, $TMAP, $TMAP);"
} > "$WORK/sm90_fp8_gemm_1d2d.cu"
run() {
  local k="$1"
  shift
  echo "== $k ($*)"
  set +e
  "$PC" import "$WORK/$k.cu" "$@" -o "$WORK/$k.phase" -- \
    -I "$WORK/shim" -I "$DEEPGEMM_DIR/deep_gemm/include" -I "$CUTLASS_DIR/include" -I "$CUDA_INCLUDE" \
    -default-device --device-int128 -std=c++20 --diag-suppress=39,161,174,177,186,940 2> "$WORK/$k.facts"
  local code=$?
  set -e
  grep -E '^import: |^  (role|assumed|unresolved)|error' "$WORK/$k.facts" | cut -c1-300 | head -n 60 || true
  echo "import exit $code"
  if [ -s "$WORK/$k.phase" ]; then
    if [ -n "${KEEP:-}" ]; then cp "$WORK/$k.phase" "$KEEP/"; fi
    "$PC" check "$WORK/$k.phase" --max-seconds "${MAX_SECONDS:-120}" 2>/dev/null \
      | grep -E '^(verdict|stats|violation|root cause)' | cut -c1-300 || true
  fi
}
# params: bf16 (grouped_layout, m, n, k, map_a, map_b, map_cd); fp8 (sfb, grouped_layout, m, n,
# k, map_a, map_b, map_d, map_sfa)
run sm90_bf16_gemm --tma-bytes 4=8192 --tma-bytes 5=8192 --tma-bytes 6=8192
run sm90_fp8_gemm_1d2d --tma-bytes 5=8192 --tma-bytes 6=8192 --tma-bytes 7=8192 --tma-bytes 8=256
