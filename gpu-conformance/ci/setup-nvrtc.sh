#!/usr/bin/env bash
# Installs NVRTC and the CCCL (libcu++) headers from the Python package index into a venv, then
# exports the paths the NVRTC compile tests read. Sourced by .ci/run; safe to source again (the
# venv is reused when it already has both wheels). Works with `set -euo pipefail` in the caller.
#
#   PHASECHECK_NVRTC_LIB      full path of libnvrtc.so.13 (cudarc's dynamic loader is pointed at it)
#   PHASECHECK_CCCL_INCLUDE   folder holding cuda/barrier (the CCCL include root)
#   LD_LIBRARY_PATH           gains the wheel's lib folder (libnvrtc-builtins is loaded from there)

_pc_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
_pc_venv="${PHASECHECK_NVRTC_VENV:-$_pc_root/target/nvrtc-venv}"
_pc_py="${PYTHON:-python3}"

if [ ! -x "$_pc_venv/bin/python" ]; then
  "$_pc_py" -m venv "$_pc_venv"
fi
if ! "$_pc_venv/bin/python" -m pip show -q nvidia-cuda-nvrtc nvidia-cuda-cccl >/dev/null 2>&1; then
  "$_pc_venv/bin/python" -m pip install -q --disable-pip-version-check \
    'nvidia-cuda-nvrtc==13.0.*' 'nvidia-cuda-cccl==13.0.*'
fi

_pc_site="$("$_pc_venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
_pc_cu="$_pc_site/nvidia/cu13"
_pc_lib="$(ls "$_pc_cu"/lib/libnvrtc.so.13* 2>/dev/null | grep -v builtins | head -n1 || true)"
if [ -z "$_pc_lib" ] || [ ! -f "$_pc_cu/include/cccl/cuda/barrier" ]; then
  echo "setup-nvrtc.sh: the wheels did not install libnvrtc / cuda/barrier under $_pc_cu" >&2
  return 1 2>/dev/null || exit 1
fi
export PHASECHECK_NVRTC_LIB="$_pc_lib"
export PHASECHECK_CCCL_INCLUDE="$_pc_cu/include/cccl"
case ":${LD_LIBRARY_PATH:-}:" in
  *":$_pc_cu/lib:"*) ;;
  *) export LD_LIBRARY_PATH="$_pc_cu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;;
esac
echo "setup-nvrtc.sh: NVRTC $PHASECHECK_NVRTC_LIB, CCCL $PHASECHECK_CCCL_INCLUDE" >&2
unset _pc_root _pc_venv _pc_py _pc_site _pc_cu _pc_lib
