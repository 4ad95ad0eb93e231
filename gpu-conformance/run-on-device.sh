#!/usr/bin/env bash
# Runs the GPU conformance suite on the H200 machine: two commands, each timed.
#   From the repo root, with a release binary at .device/phasecheck (built on the dev machine:
#   cargo build --release && mkdir -p .device && cp target/release/phasecheck .device/; carry
#   libz3.so.4 beside it, see ../shared/GPU.md). Results go to $OUT/ (default
#   gpu-conformance/results/) as <date>-h200-$TAG.* (TAG defaults to `final`).
#
# 1. The library, the protocols the H200 once judged OUTSIDE (tests/repros) and the real tile sizes
#    in dynamic shared memory (tests/realtile), both backends, both modes, default budgets: the
#    suite whose wall the README quotes. The log gets a progress line per spec and backend as it is
#    judged, and one at least every 5 s while a spec is planned, NVRTC compiles or a kernel runs;
#    the report is rewritten as specs finish, so a run cut short keeps what it did.
# 2. The real-shape protocols (benches/realshape) with the outcome budget raised: their bugs need
#    1-5 M states of the enumeration, past the default 200,000.
set -u
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH="$PWD/.device:/usr/local/cuda/lib64:/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
export PHASECHECK_CCCL_INCLUDE="${PHASECHECK_CCCL_INCLUDE:-/usr/local/cuda/include/cccl}"
OUT="${OUT:-gpu-conformance/results}"
mkdir -p "$OUT"
BIN="${PHASECHECK_BIN:-.device/phasecheck}"
P="$OUT/$(date -u +%F)-h200-${TAG:-final}"

if [ ! -x "$BIN" ]; then
  echo "run-on-device.sh: no executable $BIN (build with cargo build --release and copy it there)" >&2
  exit 2
fi
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; echo "host cores: $(nproc)"; } > "$P-device.txt" 2>&1

run() { # NAME TIMEOUT ARGS...: one timed command, its report, its log, its never-seen notes
  local name=$1 limit=$2; shift 2
  /usr/bin/time -v timeout "$limit" "$BIN" gpu run "$@" --backend both --mode both --out "$name.json" > "$name-run.log" 2> "$name-stderr.log"
  echo "exit status: $?" >> "$name-run.log"
  [ -s "$name.json" ] && "$BIN" gpu notes "$name.json" > "$name-never-seen.md" 2>> "$name-run.log"
  grep -hE "^[0-9]+ cases:.*wall|specs planned|kernels compiled|Elapsed|Maximum resident" "$name-run.log" "$name-stderr.log"
}
run "$P" 300 specs gpu-conformance/tests/repros gpu-conformance/tests/realtile
run "$P-realshape" 250 benches/realshape --outcome-limit 5000000 --outcome-seconds 120
