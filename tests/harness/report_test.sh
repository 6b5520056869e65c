#!/bin/sh
# report_test.sh HARNESS GOLDEN [CALIB_IDS HELDOUT_IDS]: `harness report` writes <commit>.json/.md/.html atomically into --out, refuses
# to overwrite them without --force, the HTML is self-contained with inline SVG, and `report --diff` exits 0
# on no change or an improvement and 1 on a regression (worst scaled error grown beyond the margin, or an engine
# bench row slower than its measured noise allows; --bench or <out>/<commit>.bench.json; or a quantization scheme's
# ΔNLL grown beyond its margin: --quality or <out>/<commit>.quality.json, a `harness quant-quality --json` table made
# here from the ids files); --faults records a `harness faults --json` run's results.
set -u
harness=$1 golden=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/report_test.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # WHAT WANT GOT
    if [ "$2" != "$3" ]; then
        echo "FAIL: $1: got '$3', want '$2'"
        fail=1
    fi
}
"$harness" report --out "$tmp/r" --golden "$golden" --no-faults
check "report exit code" 0 $?
json=$(ls "$tmp/r"/*.json 2>/dev/null | head -n 1)
base=${json%.json}
[ -n "$json" ] && [ -s "$base.md" ] && [ -s "$base.html" ] || { echo "FAIL: report files missing"; ls -l "$tmp/r"; exit 1; }
check "files in --out" 3 "$(ls -A "$tmp/r" | wc -l | tr -d ' ')"
grep -q '"format":[[:space:]]*"refchain-report"' "$json" || { echo "FAIL: not a report JSON"; fail=1; }
grep -q '"commit":' "$json" && grep -q '"dirty":' "$json" && grep -q '"device":' "$json" ||
    { echo "FAIL: commit, dirty flag or device missing"; fail=1; }
grep -q '<svg' "$base.html" || { echo "FAIL: no inline SVG chart"; fail=1; }
if grep -Eq '<script|<link|src="http|href="http' "$base.html"; then
    echo "FAIL: the HTML is not self-contained"
    fail=1
fi
grep -q 'Chain verdicts' "$base.md" || { echo "FAIL: markdown summary missing"; fail=1; }
before=$(cksum "$json")

"$harness" report --out "$tmp/r" --golden "$golden" --no-faults >"$tmp/again.out" 2>&1
check "second report exit code" 2 $?
grep -q 'refusing to overwrite' "$tmp/again.out" || { echo "FAIL: no refusal message"; cat "$tmp/again.out"; fail=1; }
check "report unchanged after the refusal" "$before" "$(cksum "$json")"
"$harness" report --out "$tmp/r" --golden "$golden" --no-faults --force >/dev/null
check "--force exit code" 0 $?
check "no temp files left" 3 "$(ls -A "$tmp/r" | wc -l | tr -d ' ')"

"$harness" report --diff "$json" "$json" >"$tmp/diff0.out"
check "diff of a report with itself" 0 $?
sed 's/"worst_scaled":[[:space:]]*[-0-9.e+]*/"worst_scaled": 0.001/' "$json" >"$tmp/worse.json"
"$harness" report --diff "$json" "$tmp/worse.json" >"$tmp/diff1.out"
check "diff with a regression" 1 $?
grep -q 'REGRESSION' "$tmp/diff1.out" || { echo "FAIL: regression not named"; cat "$tmp/diff1.out"; fail=1; }
"$harness" report --diff "$tmp/worse.json" "$json" >"$tmp/diff2.out"
check "diff with an improvement" 0 $?
"$harness" report --diff "$json" "$tmp/none.json" >/dev/null 2>&1
check "diff with a missing report" 2 $?

# speed: --bench records an engine bench table (md and json); a row 20% slower is a regression in --diff
bench_row='{"id": "resident/p16", "ok": true, "prompt_len": 16, "ms_tok": MS, "decode_spread_ms": 0.01, "prefill_ms": 30, "prefill_spread_ms": 0.1}'
bench_json() { printf '{"format": "refchain-bench", "device": "H200", "shape": "llama3-8b", "dtype": "bf16", "rows": [%s]}\n' \
    "$(echo "$bench_row" | sed "s/MS/$1/")"; }
bench_json 4.0 >"$tmp/bench_a.json"
bench_json 4.8 >"$tmp/bench_b.json"
"$harness" report --out "$tmp/s" --golden "$golden" --no-faults --commit aaa --bench "$tmp/bench_a.json" >/dev/null
check "report --bench exit code" 0 $?
grep -q '^| resident/p16 | 16 | 30.00 |' "$tmp/s/aaa.md" || { echo "FAIL: no speed table in the markdown"; fail=1; }
grep -q '"bench":' "$tmp/s/aaa.json" || { echo "FAIL: no bench in the report JSON"; fail=1; }
cp "$tmp/bench_b.json" "$tmp/s/bbb.bench.json" # found next to the report without --bench
"$harness" report --out "$tmp/s" --golden "$golden" --no-faults --commit bbb >/dev/null
grep -q '"ms_tok":[[:space:]]*4.8' "$tmp/s/bbb.json" || { echo "FAIL: <commit>.bench.json not picked up"; fail=1; }
"$harness" report --diff "$tmp/s/aaa.json" "$tmp/s/bbb.json" >"$tmp/diff3.out"
check "diff with a 20% slower decode" 1 $?
grep -q 'REGRESSION resident/p16 .*decode ms/token 4 -> 4.8' "$tmp/diff3.out" || { echo "FAIL: speed regression not named"; cat "$tmp/diff3.out"; fail=1; }
"$harness" report --diff "$tmp/s/bbb.json" "$tmp/s/aaa.json" >/dev/null
check "diff with a faster decode" 0 $?
"$harness" report --out "$tmp/s" --golden "$golden" --no-faults --commit ccc --bench "$json" >"$tmp/bad.out" 2>&1
check "--bench with a report instead of a bench table" 2 $?
grep -q 'not an engine bench table' "$tmp/bad.out" || { echo "FAIL: bad --bench not named"; cat "$tmp/bad.out"; fail=1; }
[ ! -e "$tmp/s/ccc.json" ] || { echo "FAIL: a report was written despite a bad --bench"; fail=1; }
grep -q 'Quantization quality' "$base.md" && { echo "FAIL: a quality section without a quality table"; fail=1; }

# fault results: --faults records a `harness faults --json` file instead of running the catalogue again
printf '{"format": "refchain-fault-results", "faults": [{"fault": "rope_sin_sign", "stage": "ref", "expected_link": "architecture", "expected_probe": "L0.attn.q_rope", "detected": true, "link": "architecture", "first_probe": "L0.attn.q_rope", "link_ok": true, "probe_ok": true, "result": "ok"}], "catalogued": 1, "runnable": 1, "detected": 1, "link_correct": 1, "probe_correct": 1, "detection_rate": 1, "attribution_accuracy": 1}\n' >"$tmp/faults.json"
mkdir -p "$tmp/f"
"$harness" report --out "$tmp/f" --golden "$golden" --commit f1 --faults "$tmp/faults.json" >/dev/null
check "report --faults exit code" 0 $?
grep -q 'Detection rate \*\*1/1\*\*' "$tmp/f/f1.md" && grep -q '^| rope_sin_sign | ref |' "$tmp/f/f1.md" ||
    { echo "FAIL: --faults results not in the markdown"; fail=1; }
"$harness" report --out "$tmp/f" --golden "$golden" --commit f2 --faults "$json" >"$tmp/badf.out" 2>&1
check "--faults with a report instead of fault results" 2 $?
grep -q 'not fault results' "$tmp/badf.out" || { echo "FAIL: bad --faults not named"; cat "$tmp/badf.out"; fail=1; }
[ ! -e "$tmp/f/f2.json" ] || { echo "FAIL: a report was written despite a bad --faults"; fail=1; }

# quantization quality: quant-quality's table recorded (md and json); every ΔNLL set to 0.5 is a regression in --diff
if [ $# -ge 4 ]; then
    "$harness" quant-quality --model "$golden" --calib "$3" --eval "$4" --group 32 --greedy 2 --json "$tmp/qq_a.json" \
        >/dev/null
    check "quant-quality --json exit code" 0 $?
    mkdir -p "$tmp/q"
    "$harness" report --out "$tmp/q" --golden "$golden" --no-faults --commit a1 --quality "$tmp/qq_a.json" >/dev/null
    check "report --quality exit code" 0 $?
    grep -q '^## Quantization quality' "$tmp/q/a1.md" && grep -q '^| int4-g32 | asymmetric | gptq | ' "$tmp/q/a1.md" ||
        { echo "FAIL: no quality table in the markdown"; fail=1; }
    grep -q '"quality":' "$tmp/q/a1.json" || { echo "FAIL: no quality in the report JSON"; fail=1; }
    sed 's/"dnll":[[:space:]]*[-0-9.e+]*/"dnll": 0.5/' "$tmp/qq_a.json" >"$tmp/q/b1.quality.json"
    "$harness" report --out "$tmp/q" --golden "$golden" --no-faults --commit b1 >/dev/null
    grep -q '"dnll":[[:space:]]*0.5' "$tmp/q/b1.json" || { echo "FAIL: <commit>.quality.json not picked up"; fail=1; }
    "$harness" report --diff "$tmp/q/a1.json" "$tmp/q/b1.json" >"$tmp/diff4.out"
    check "diff with a grown ΔNLL" 1 $?
    grep -q 'REGRESSION int4-g32 asymmetric gptq .*ΔNLL .* -> +5.00000e-01' "$tmp/diff4.out" ||
        { echo "FAIL: quality regression not named"; cat "$tmp/diff4.out"; fail=1; }
    "$harness" report --diff "$tmp/q/b1.json" "$tmp/q/a1.json" >/dev/null
    check "diff with a smaller ΔNLL" 0 $?
    "$harness" report --out "$tmp/q" --golden "$golden" --no-faults --commit c1 --quality "$json" >"$tmp/badq.out" 2>&1
    check "--quality with a report instead of a quality table" 2 $?
    grep -q 'not a quantization quality table' "$tmp/badq.out" || { echo "FAIL: bad --quality not named"; fail=1; }
    [ ! -e "$tmp/q/c1.json" ] || { echo "FAIL: a report was written despite a bad --quality"; fail=1; }
fi
[ "$fail" -eq 0 ] && echo "ok: report and report --diff"
exit "$fail"
