#!/usr/bin/env bash
# Runs the whole GPU conformance suite on the H200 machine in one invocation.
#   From the repo root, with a release binary at .device/phasecheck (built on the dev machine:
#   cargo build --release && mkdir -p .device && cp target/release/phasecheck .device/).
#   Results go to $OUT/ (default gpu-conformance/results/): <date>-h200.json/.md, logs.
# Every step is guarded: a failing step is logged and the rest still runs. Prints a short summary
# table last, then the wall time.
set -u
start=$(date +%s.%N)
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}"
export PHASECHECK_CCCL_INCLUDE="${PHASECHECK_CCCL_INCLUDE:-/usr/local/cuda/include/cccl}"
OUT="${OUT:-gpu-conformance/results}"
mkdir -p "$OUT"
BIN="${PHASECHECK_BIN:-.device/phasecheck}"
DATE="$(date -u +%F)"
REPORT="$OUT/$DATE-h200.json"

if [ ! -x "$BIN" ]; then
  echo "run-on-device.sh: no executable $BIN (build with cargo build --release and copy it there)" >&2
  exit 2
fi
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true; } > "$OUT/device.txt" 2>&1

# 1. The suite: the library, the protocols the H200 once judged OUTSIDE (tests/repros), the
#    real tile sizes in dynamic shared memory (tests/realtile) and the real-shape protocols
#    (benches/realshape), both backends, both modes, one process tree
#    (children per faulting spec; a launch on the hardware's barriers that does not return is
#    ended by the host). The log gets a progress
#    line per spec and backend as it is judged, and one at least every 5 s while a kernel runs;
#    the report is rewritten as specs finish, so a run cut short keeps what it did. The outcome
#    budget is raised for the real shapes: two of the GEMM's bugs, whose `check` takes 1-3 s,
#    need 2-5 M states of the unreduced enumeration (48-80 s and 2-4.7 GB in a plan-only run on
#    a 2-core machine), past the default 200,000.
timeout 420 "$BIN" gpu run specs gpu-conformance/tests/repros gpu-conformance/tests/realtile benches/realshape --backend both --mode both --outcome-limit 5000000 --outcome-seconds 120 --out "$REPORT" 2>&1 | tee "$OUT/gpu-run.log" | grep --line-buffered -E "specs planned|kernels compiled|OUTSIDE|not forced|cases:" ; rc=${PIPESTATUS[0]}
echo "gpu run exit status: $rc" >> "$OUT/gpu-run.log"

# 2. If the combined run produced no report (crash, timeout), run each backend on its own so that
#    at least part of the results survives.
if [ ! -s "$REPORT" ] || [ "$rc" -eq 124 ]; then
  for b in ptx libcu; do
    timeout 120 "$BIN" gpu run specs gpu-conformance/tests/repros gpu-conformance/tests/realtile benches/realshape --backend "$b" --mode both --runs 1024 \
      --out "$OUT/$DATE-h200-$b.json" > "$OUT/gpu-run-$b.log" 2>&1 || echo "backend $b: exit $?" >> "$OUT/gpu-run-$b.log"
  done
fi

# 3. Summary: per backend and mode, cases within the model and bugs shown (from the .md tables).
echo
echo "== log tail =="
tail -n 5 "$OUT"/gpu-run*.log 2>/dev/null
echo
# 4. The hardware-notes section: outcomes the model allows that no stress block showed.
if [ -s "$REPORT" ]; then
  "$BIN" gpu notes "$REPORT" > "$OUT/$DATE-h200-never-seen.md" 2>> "$OUT/gpu-run.log" || echo "gpu notes: exit $?" >> "$OUT/gpu-run.log"
fi

echo "== summary (backend, mode: cases / within / unchecked / OUTSIDE / not judged / bug shown of buggy) =="
cat "$OUT"/"$DATE"-h200.md "$OUT"/"$DATE"-h200-ptx.md "$OUT"/"$DATE"-h200-libcu.md 2>/dev/null | awk -F'|' '
  /^\| [^-]/ && NF >= 12 && $2 !~ /spec/ {
    k = $3 "|" $4; n[k]++
    if ($7 ~ /within/) w[k]++; else if ($7 ~ /unchecked/) u[k]++; else if ($7 ~ /OUTSIDE/) o[k]++; else s[k]++
    if ($10 ~ /yes/) { b[k]++; bb[k]++ } else if ($10 ~ /no/) bb[k]++
  }
  END {
    printf "%-8s %-7s %6s %7s %9s %8s %10s %10s\n", "backend", "mode", "cases", "within", "unchecked", "OUTSIDE", "not-judged", "bug-shown"
    for (k in n) { split(k, p, "|"); printf "%-8s %-7s %6d %7d %9d %8d %10d %6d/%d\n", p[1], p[2], n[k], w[k], u[k], o[k], s[k], b[k], bb[k] }
  }'
end=$(date +%s.%N)
echo "wall time: $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f s", b - a }')"
