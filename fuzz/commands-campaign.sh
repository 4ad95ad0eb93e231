#!/usr/bin/env bash
# The command-level fuzz campaign (docs/fuzzing.md) on every core: JOBS drivers of
# `phasecheck fuzz-commands`, each with its own seed and scratch folder, COUNT specs each, then one
# summary over all of them (the drivers' own lines, and the sums of their exit-status tables).
#
#   fuzz/commands-campaign.sh BIN OUTDIR JOBS COUNT FIRST_SEED [BOUND_SECONDS] [BOUND_MIB]
#
# Each driver is single-threaded and forks one child per command, so JOBS = the number of cores
# keeps every core busy. Findings land in OUTDIR/seed-N/crashes/; OUTDIR/summary.txt is the total.
set -euo pipefail
bin=$1 out=$2 jobs=$3 count=$4 first=$5 secs=${6:-1} mib=${7:-256}
mkdir -p "$out"
uptime >"$out/uptime-before.txt"
start=$(date +%s)
pids=()
for ((k = 0; k < jobs; k++)); do
  seed=$((first + k))
  "$bin" fuzz-commands --count "$count" --seed "$seed" --scratch "$out/seed-$seed" \
    --bound-seconds "$secs" --bound-mib "$mib" >/dev/null 2>"$out/seed-$seed.log" &
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
end=$(date +%s)
{
  echo "fuzz/commands-campaign.sh $bin $out $jobs $count $first $secs $mib"
  echo "$(nproc) cores; $((end - start)) s wall; $(cat "$out/uptime-before.txt")"
  cat "$out"/seed-*/summary.txt | grep '^fuzz-commands:'
  # Totals: the specs, the findings, and the exit-status rows summed over every driver.
  cat "$out"/seed-*/summary.txt | awk '
    /^fuzz-commands:/ {
      match($0, /: [0-9]+ mutated/); n += substr($0, RSTART + 2, RLENGTH - 10)
      match($0, /; [0-9]+ parse/); p += substr($0, RSTART + 2, RLENGTH - 8)
      match($0, /, [0-9]+ command runs/); r += substr($0, RSTART + 2, RLENGTH - 15)
      match($0, /: [0-9]+ panics/); pa += substr($0, RSTART + 2, RLENGTH - 9)
      match($0, / [0-9]+ bound overruns/); o += substr($0, RSTART + 1, RLENGTH - 15)
      match($0, / [0-9]+ internal errors/); ie += substr($0, RSTART + 1, RLENGTH - 16)
      match($0, / [0-9]+ lost files/); l += substr($0, RSTART + 1, RLENGTH - 11)
      match($0, / [0-9]+ runtime disagreements/); d += substr($0, RSTART + 1, RLENGTH - 23)
      next
    }
    NF >= 3 { k = $2; for (i = 3; i <= NF; i++) k = k " " $i; rows[k] += $1 }
    END {
      printf "total: %d mutated specs (%d parse), %d command runs: %d panics, %d bound overruns, %d internal errors, %d lost files, %d runtime disagreements\n", n, p, r, pa, o, ie, l, d
      for (k in rows) printf "  %8d  %s\n", rows[k], k | "sort -k2"
    }'
  echo "findings:"
  find "$out" -path '*/crashes/*.txt' -print -exec cat {} \; | head -200
} >"$out/summary.txt"
cat "$out/summary.txt"
exit $status
