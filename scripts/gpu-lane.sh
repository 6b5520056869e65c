#!/usr/bin/env bash
# GPU lane, step 2 (ON the GPU machine, from the repo root): unpack .debs into a private prefix, build with CUDA,
# run every meson suite (gpu included) and compute-sanitizer over the cuda stage, the engine's long-chunk prefill
# attention (test_engk_attn --sanitize) and its wide-shape quantized decode pick (test_engk_qgemv --sanitize);
# logs + summary.json to $OUT.
#   bash scripts/gpu-lane-fetch.sh            # here, once: fills .debs/ (gitignored; carry it to the GPU machine)
#   OUT=/tmp/out bash scripts/gpu-lane.sh     # there
# Knobs: GPU_ARCH (90), RC_PREFIX (/tmp/rcprefix), RC_BUILD (build-gpu), RC_MESON_OPTS (extra meson options),
#        RC_SANITIZE_GOLDEN (golden/llama.h5),
#        RC_SANITIZERS ("memcheck racecheck"; initcheck and synccheck also work), RC_BENCH=1 (meson test --benchmark),
#        RC_TEST_ARGS (extra meson test arguments), RC_ENGINE_EXTRA=1 (scripts/gpu-engine.sh's sanitizer runs and llama3-8b bench, log in engine.log),
#        RC_TEST_SHARD=I/N (of the tests RC_TEST_ARGS selects, in meson's list order, only the I-th of every N: a suite
#        that outgrows one device call runs as N calls, e.g. the engine suite with its build, ~10 min on an H100 in
#        session 41, as RC_TEST_ARGS="--suite engine" RC_TEST_SHARD=1/2 and 2/2).
# Every step runs even after one fails; the last line is "N passed, N failed, N skipped" over the meson tests, the
# sanitizer runs and any setup step that failed; before it, one "skipped N: REASON (tests)" line per reason a test
# gave for skipping (the fault tests skip without -Dfaults=true: RC_MESON_OPTS=-Dfaults=true, or
# scripts/gpu-harness.sh, runs them). Files in $OUT: lane.log, testlog.txt, sanitizers.log, summary.json.
set -u
cd "$(dirname "$0")/.." || exit 2

OUT=${OUT:-/tmp/out}
PREFIX=${RC_PREFIX:-/tmp/rcprefix}
BUILD=${RC_BUILD:-build-gpu}
GPU_ARCH=${GPU_ARCH:-90}
GOLDEN=${RC_SANITIZE_GOLDEN:-golden/llama.h5}
SANITIZERS=${RC_SANITIZERS:-memcheck racecheck}
mkdir -p "$OUT" || exit 2
LOG=$OUT/lane.log
SANLOG=$OUT/sanitizers.log
WORK=$(mktemp -d) || exit 2
: > "$LOG"
: > "$SANLOG"
: > "$WORK/steps"

say() { echo "gpu-lane: $*" | tee -a "$LOG"; }

# step NAME CMD...: CMD's output goes to $STEP_LOG (default lane.log); the status is recorded, the lane goes on.
step() {
    local name=$1 t0=$SECONDS rc
    shift
    local to=${STEP_LOG:-$LOG}
    printf '\n===== %s: %s\n' "$name" "$*" >> "$to"
    "$@" >> "$to" 2>&1
    rc=$?
    printf '===== %s: exit %d (%d s)\n' "$name" "$rc" $((SECONDS - t0)) >> "$to"
    printf '%s %d %d\n' "$name" "$rc" $((SECONDS - t0)) >> "$WORK/steps"
    say "$name: exit $rc ($((SECONDS - t0)) s)"
    return "$rc"
}

# ---- the private prefix (.debs unpacked, their .pc files pointed at it) and the build environment ----
# shellcheck source=scripts/gpu-env.sh
source scripts/gpu-env.sh
gpu_env

MESON=(meson)
command -v meson > /dev/null || MESON=(python3 -m mesonbuild.mesonmain)

setup() {
    local opts=(-Dcuda=enabled -Dtests=enabled "-Dgpu_arch=$GPU_ARCH")
    # shellcheck disable=SC2206 # RC_MESON_OPTS: extra meson options, word-split on purpose (e.g. -Dfaults=true)
    opts+=(${RC_MESON_OPTS:-})
    if [ -f "$BUILD/build.ninja" ]; then
        "${MESON[@]}" setup --reconfigure "$BUILD" "${opts[@]}"
    else
        "${MESON[@]}" setup "$BUILD" "${opts[@]}"
    fi
}

info() {
    nvidia-smi -L
    "$NVCC" --version | tail -2
    "${MESON[@]}" --version
    pkg-config --modversion gsl cmocka libcjson libcrypto libpcre2-8 libutf8proc
    uname -a
}

say "repo $(pwd), out $OUT, prefix $PREFIX, build $BUILD, gpu_arch $GPU_ARCH"
step info info
step prefix make_prefix
step setup setup
cuda_stale "$BUILD" # a reused build-gpu: its CUDA units again where a header changed (gpu-env.sh)
step build "${MESON[@]}" compile -C "$BUILD"
# shard_tests I N: the names of the tests RC_TEST_ARGS selects whose 1-based place in meson's list is I modulo N
shard_tests() {
    # shellcheck disable=SC2086
    "${MESON[@]}" test -C "$BUILD" --list ${RC_TEST_ARGS:-} 2> /dev/null | list_shard "$1" "$2"
}
shard=()
if [ -n "${RC_TEST_SHARD:-}" ]; then
    if ! [[ $RC_TEST_SHARD =~ ^([1-9][0-9]*)/([1-9][0-9]*)$ ]] ||
        [ "${BASH_REMATCH[1]}" -gt "${BASH_REMATCH[2]}" ]; then
        say "RC_TEST_SHARD must be I/N with 1 <= I <= N, not '$RC_TEST_SHARD'"
        exit 2
    fi
    mapfile -t shard < <(shard_tests "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}")
    say "shard $RC_TEST_SHARD: ${#shard[@]} tests"
fi
# an empty shard runs nothing (no names would run every test RC_TEST_ARGS selects)
if [ -z "${RC_TEST_SHARD:-}" ] || [ ${#shard[@]} -gt 0 ]; then
    # RC_TEST_ARGS: extra meson test arguments (e.g. --no-suite slow); with a shard's names, meson runs what both select
    # shellcheck disable=SC2086
    step test "${MESON[@]}" test -C "$BUILD" --print-errorlogs --num-processes 12 ${RC_TEST_ARGS:-} \
        ${shard[@]+"${shard[@]}"}
fi
cp "$BUILD/meson-logs/testlog.txt" "$OUT/testlog.txt" 2> /dev/null
if [ "${RC_BENCH:-0}" = 1 ]; then
    step bench "${MESON[@]}" test -C "$BUILD" --benchmark --suite gpu --verbose
fi

SAN=$(command -v compute-sanitizer || echo "$CUDA_HOME/bin/compute-sanitizer")
for tool in $SANITIZERS; do
    extra=()
    [ "$tool" = memcheck ] && extra=(--leak-check full)
    STEP_LOG=$SANLOG step "sanitizer.$tool" "$SAN" --tool "$tool" "${extra[@]}" --error-exitcode 86 \
        "$BUILD/harness/harness" compare --stage cuda --golden "$GOLDEN"
done
# sanitize_self NAME BIN WHY: BIN --sanitize (each kernel form once, small enough for compute-sanitizer) under each
# tool of $SANITIZERS as steps sanitizer.NAME_TOOL; skipped, and said, where BIN --sanitize exits 77 (WHY)
sanitize_self() {
    local name=$1 bin=$2 why=$3 tool
    "$bin" --sanitize > /dev/null 2>&1
    if [ $? = 77 ]; then
        say "sanitizer.${name}_*: skipped ($(basename "$bin") --sanitize: $why)"
        return 0
    fi
    for tool in $SANITIZERS; do
        STEP_LOG=$SANLOG step "sanitizer.${name}_$tool" "$SAN" --tool "$tool" --error-exitcode 86 "$bin" --sanitize
    done
}
# the engine's long-chunk prefill attention forms (256-row blocks; the pipelined one syncs by mbarriers), which no
# golden run picks, launched once each on llama3-8b-shaped heads
sanitize_self attn "$BUILD/tests/engine/test_engk_attn" "no tensor-core prefill on this GPU"
# the quantized decode pick that only wide shapes reach (int4's persistent gate|up), once on a llama3-8b-like shape
sanitize_self qgemv "$BUILD/tests/engine/test_engk_qgemv" "no GPU"

if [ "${RC_ENGINE_EXTRA:-0}" = 1 ]; then  # engine sanitizer runs and the llama3-8b bench
    RC_SKIP_TESTS=1 STEP_LOG=$OUT/engine.log step engine-extra bash scripts/gpu-engine.sh "$BUILD"
    tail -n 30 "$OUT/engine.log"
fi

# ---- summary.json and the closing line ----
summarize() {
    python3 - "$BUILD/meson-logs/testlog.json" "$WORK/steps" "$SANLOG" "$OUT/testlog.txt" "$OUT/summary.json" <<'PY'
import json, os, re, sys
testlog, steps_path, sanlog, testtxt, out = sys.argv[1:6]
PASS, FAIL, SKIP = {"OK", "EXPECTEDFAIL"}, {"FAIL", "TIMEOUT", "ERROR", "UNEXPECTEDPASS"}, {"SKIP"}
suites, tests = {}, []
if os.path.exists(testlog):
    for line in open(testlog):
        line = line.strip()
        if not line:
            continue
        t = json.loads(line)
        res = t.get("result", "ERROR")
        kind = "pass" if res in PASS else "skip" if res in SKIP else "fail"
        name = t.get("name", "?")  # "project:suite+suite / test"
        names = t.get("suite") or name.split(" / ")[0].split(":")[-1].split("+")
        names = [n.split(":")[-1] for n in names]
        row = {"name": name, "suites": names, "result": res, "seconds": round(t.get("duration", 0.0), 2)}
        if kind == "skip":  # the test's own words: its last line naming a skip, else its last line
            lines = [ln.strip() for ln in (t.get("stdout") or "").splitlines() if ln.strip()]
            said = [ln for ln in lines if re.search(r"skip", ln, re.I)]
            row["skip_reason"] = re.sub(r"^(SKIP|skipped)\s*:?\s*", "", (said or lines or ["(no reason printed)"])[-1],
                                        flags=re.I)
        tests.append(row)
        for n in names:
            suites.setdefault(n, {"pass": 0, "fail": 0, "skip": 0})[kind] += 1
steps = []
for line in open(steps_path):
    name, rc, secs = line.split()
    steps.append({"name": name, "rc": int(rc), "seconds": int(secs)})
san_text = open(sanlog, errors="replace").read()
sanitizers = {}
for block in re.split(r"\n===== (?=sanitizer\.\w+: (?!exit \d+ \())", "\n" + san_text)[1:]:
    tool = block.split(":", 1)[0].split(".", 1)[1]
    m = re.search(r"ERROR SUMMARY: (\d+) error", block) or \
        re.search(r"RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) errors?", block)
    rc = next((s["rc"] for s in steps if s["name"] == "sanitizer." + tool), None)
    sanitizers[tool] = {"errors": int(m.group(1)) if m else None, "rc": rc,
                        "verdicts": re.findall(r"^VERDICT .*$", block, re.M)}
verdicts = []
if os.path.exists(testtxt):
    verdicts = sorted(set(re.findall(r"^VERDICT .*$", open(testtxt, errors="replace").read(), re.M)))
n_pass = sum(1 for t in tests if t["result"] in PASS)
n_skip = sum(1 for t in tests if t["result"] in SKIP)
n_fail = len(tests) - n_pass - n_skip
for tool, s in sanitizers.items():
    if s["rc"] == 0 and s["errors"] == 0:
        n_pass += 1
    else:
        n_fail += 1
setup_failed = [s["name"] for s in steps if s["name"] in ("prefix", "setup", "build") and s["rc"]]
if not tests and not any(s["name"] == "build" and s["rc"] for s in steps):
    setup_failed.append("test (no testlog.json)")
n_fail += len(setup_failed)
skip_reasons = {}
for t in tests:
    if "skip_reason" in t:
        skip_reasons.setdefault(t["skip_reason"], []).append(t["name"].split(" / ")[-1])
summary = {"tool": "scripts/gpu-lane.sh", "passed": n_pass, "failed": n_fail, "skipped": n_skip,
           "skip_reasons": skip_reasons,
           "suites": suites, "steps": steps, "failed_steps": setup_failed, "sanitizers": sanitizers,
           "verdicts": verdicts, "tests": tests}
with open(out + ".tmp", "w") as f:
    json.dump(summary, f, indent=2)
os.replace(out + ".tmp", out)
for name, c in sorted(suites.items()):
    print(f"suite {name}: {c['pass']} passed, {c['fail']} failed, {c['skip']} skipped")
for tool, s in sanitizers.items():
    print(f"sanitizer {tool}: {s['errors'] if s['errors'] is not None else 'no'} errors, exit {s['rc']}")
for v in verdicts:
    print(v)
for why, names in sorted(skip_reasons.items(), key=lambda kv: -len(kv[1])):
    print(f"skipped {len(names)}: {why} ({', '.join(names[:6])}{', ...' if len(names) > 6 else ''})")
with open(os.path.join(os.path.dirname(steps_path), "nfail"), "w") as f:
    f.write(str(n_fail))
print(f"{n_pass} passed, {n_fail} failed, {n_skip} skipped")
PY
}

if command -v python3 > /dev/null; then
    summarize 2>&1 | tee -a "$LOG"
    status=${PIPESTATUS[0]}
else
    status=1
fi
nfail=$(cat "$WORK/nfail" 2> /dev/null || echo 1)
rm -rf "$WORK"
if [ "$status" -ne 0 ]; then
    echo '{"tool": "scripts/gpu-lane.sh", "error": "the summary could not be made (python3?)"}' > "$OUT/summary.json"
    echo "0 passed, 1 failed, 0 skipped" | tee -a "$LOG"
    exit 1
fi
[ "$nfail" = 0 ]
