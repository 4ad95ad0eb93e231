#!/usr/bin/env bash
# Runs `phasecheck prove` at the declared values on every spec under the given folders (default
# specs/) and prints, per folder, how many are proved / refuted (and confirmed) / unknown, the
# specs that took longer than the 10 s a verdict may take, and the first reason of each unknown,
# grouped. Usage: verifier/smt/bench/library.sh [BIN] [FOLDER...]
#   BIN defaults to target/release/phasecheck; one JSON line per spec is kept in $OUT_DIR
#   (default: a temporary folder) for a closer look.
set -u
bin=${1:-target/release/phasecheck}
shift || true
folders=("$@")
[ ${#folders[@]} -eq 0 ] && folders=(specs)
out=${OUT_DIR:-$(mktemp -d)}
mkdir -p "$out"
: > "$out/all.tsv"
for f in $(find "${folders[@]}" -name '*.phase' | sort); do
  t0=$(date +%s.%N)
  js=$(timeout 60 "$bin" prove "$f" --format json 2>/dev/null | tail -1)
  code=$?
  t1=$(date +%s.%N)
  secs=$(echo "$t1 - $t0" | bc)
  [ -z "$js" ] && js='{"verdict":"crash"}'
  verdict=$(echo "$js" | jq -r '.verdict // "crash"')
  reason=$(echo "$js" | jq -r '.reason // ""' | head -1 | sed -E 's/`[^`]*`/`_`/g; s/[0-9]+/N/g' | cut -c1-110)
  printf '%s\t%s\t%s\t%.1f\t%s\n' "$(dirname "$f")" "$f" "$verdict" "$secs" "$reason" >> "$out/all.tsv"
done
echo "folder                 specs  proved refuted unknown  decided  >10s"
awk -F'\t' '{n[$1]++; v[$1","$3]++; if ($4>10) slow[$1]++; N++; V[$3]++; if ($4>10) S++}
  END {for (d in n) printf "%-22s %5d %7d %7d %7d  %5.1f %%  %4d\n", d, n[d], v[d",proved"], v[d",refuted"], n[d]-v[d",proved"]-v[d",refuted"], 100*(v[d",proved"]+v[d",refuted"])/n[d], slow[d];
       printf "%-22s %5d %7d %7d %7d  %5.1f %%  %4d\n", "all", N, V["proved"], V["refuted"], N-V["proved"]-V["refuted"], 100*(V["proved"]+V["refuted"])/N, S}' "$out/all.tsv" | sort
echo
echo "reasons of unknown (first reason, numbers and names elided):"
awk -F'\t' '$3!="proved" && $3!="refuted" {print $5}' "$out/all.tsv" | sort | uniq -c | sort -rn
echo
echo "slower than 10 s:"
awk -F'\t' '$4>10 {print "  " $2 " " $4 " s " $3}' "$out/all.tsv"
echo "(per spec: $out/all.tsv)"
