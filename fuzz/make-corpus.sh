#!/usr/bin/env bash
# Seed corpus (the library, the malformed inputs, the GPU fixtures, the fuzz regressions) and the
# libFuzzer dictionary (the language's keywords and operations, its punctuation, hostile text).
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p corpus/pipeline
for f in $(find ../specs ../tests/malformed ../gpu-conformance/tests/fixtures ../gpu-conformance/tests/fuzz-regressions -name '*.phase'); do
  cp "$f" "corpus/pipeline/$(echo "$f" | tr '/.' '__')"
done
words=$(sed -n '/^pub const OPS/,/^];/p;/^pub const KEYWORDS/,/^];/p' ../model/src/lang/parser.rs | grep -o '"[a-z_]*"')
{
  for w in $words; do echo "$w"; done
  for p in '(' ')' '[' ']' '{' '}' ',' ';' '..' '==' '!=' '<=' '>=' '&&' '||' '//' '/*' '*/' '0x' '.count' 'expect = ' 'version = '; do
    printf '"%s"\n' "$p"
  done
  printf '"\\x0d"\n"\\x5c"\n"??/"\n"\\x1b[31m"\n"\\xef\\xbb\\xbf"\n"\\x0a"\n"9223372036854775807"\n"65536"\n'
} > pipeline.dict
echo "corpus: $(ls corpus/pipeline | wc -l) files; dictionary: $(wc -l < pipeline.dict) entries"
