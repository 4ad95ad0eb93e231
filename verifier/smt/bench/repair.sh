#!/usr/bin/env bash
# Runs `phasecheck repair` on every spec that `prove` refutes (and the explicit search
# confirms), from a per-spec table written by library.sh, and prints how many get a confirmed
# repair (exit 0), per folder. Usage: verifier/smt/bench/repair.sh [BIN] TABLE
#   TABLE: the all.tsv that library.sh leaves in its OUT_DIR.
set -u
bin=${1:-target/release/phasecheck}
table=${2:?the all.tsv of library.sh}
n=0; ok=0
while IFS=$'\t' read -r dir f verdict secs reason; do
  [ "$verdict" = refuted ] || continue
  n=$((n + 1))
  if timeout 120 "$bin" repair "$f" > /dev/null 2>&1; then
    ok=$((ok + 1)); echo "repaired   $f"
  else
    echo "no repair  $f"
  fi
done < "$table"
echo "confirmed repairs: $ok of $n refuted specs"
