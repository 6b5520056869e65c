#!/usr/bin/env bash
# Variants of the engine timed against each other in one GPU call (from the repo root, .debs/ carried): each
# variant's build, then `engine bench` of every variant in turn, PASSES times over, so that a host's drift lands on
# every variant alike (absolute times move between hosts and calls: compare only within one run).
#   OUT=/tmp/out bash scripts/gpu-ab.sh [-p PASSES] [-w "WEIGHTS ..."] [-n] VARIANT... [-- BENCH_ARGS...]
# VARIANT is NAME=DEFINES[@ENV]:
#   DEFINES  nvcc flags for its build (NVCC_APPEND_FLAGS, e.g. "-DNORM_W_STAGE=0"; empty: the tree as it is);
#            variants with the same DEFINES share one build, build-ab-N, which a later call reuses only if it was
#            built with the same DEFINES (a stamp in it; otherwise it is built afresh: ninja does not see the flags),
#            its CUDA units compiled again where a header changed since (gpu-env.sh cuda_stale)
#   ENV      settings for its runs, VAR=VALUE separated by ';' (e.g. REFCHAIN_QGEMV_PICKS=p4096x14336=i8u4p)
# WEIGHTS: `engine bench --weights` values, bf16 for none (default "bf16"). BENCH_ARGS default to
# --shape llama3-8b --prompt-len 16 --steps 32 --rounds 2 --no-stream. -n prints the plan and does nothing else.
# Prints one line per resident row of a run (pass, weights, prompt length, variant, ms/token, tok/s, % of the floor,
# the prefill's ms), then each variant's means (ms/token, prefill ms) per weights and prompt length;
# writes $OUT/ab.tsv and the whole bench output to $OUT/ab.log. Knobs: GPU_ARCH (90), RC_PREFIX (/tmp/rcprefix),
# AB_JOBS (ninja jobs a build; default the cores over the builds). Exit 0 iff every build and run succeeded, 1 if a
# run failed, 2 on bad usage or a failed build.
set -u
cd "$(dirname "$0")/.." || exit 2
USAGE="usage: OUT=DIR scripts/gpu-ab.sh [-p PASSES] [-w \"WEIGHTS ...\"] [-n] NAME=DEFINES[@ENV]... [-- BENCH_ARGS...]"
OUT=${OUT:-/tmp/out}
PASSES=2 WEIGHTS=bf16 DRY=0
while getopts "p:w:n" o; do
    case $o in
    p) PASSES=$OPTARG ;;
    w) WEIGHTS=$OPTARG ;;
    n) DRY=1 ;;
    *) echo "$USAGE" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[[ $PASSES =~ ^[1-9][0-9]?$ ]] || { echo "gpu-ab: -p takes 1..99 passes, not '$PASSES'" >&2; exit 2; }
names=() defs=() envs=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
    spec=$1
    shift
    name=${spec%%=*} rest=${spec#*=}
    if [ "$name" = "$spec" ] || ! [[ $name =~ ^[A-Za-z0-9_.+-]+$ ]]; then
        echo "gpu-ab: variant '$spec' is not NAME=DEFINES[@ENV] (NAME of letters, digits and _.+-)" >&2
        exit 2
    fi
    for n in "${names[@]}"; do
        [ "$n" = "$name" ] && { echo "gpu-ab: variant name '$name' given twice" >&2; exit 2; }
    done
    e=""
    [[ $rest == *@* ]] && e=${rest#*@}
    names+=("$name") defs+=("${rest%%@*}") envs+=("$e")
done
[ ${#names[@]} -ge 1 ] || { echo "$USAGE" >&2; exit 2; }
[ "${1:-}" = -- ] && shift
bargs=("$@")
[ ${#bargs[@]} -gt 0 ] || bargs=(--shape llama3-8b --prompt-len 16 --steps 32 --rounds 2 --no-stream)
read -r -a wts <<<"$WEIGHTS"
[ ${#wts[@]} -ge 1 ] || { echo "gpu-ab: -w names no weights" >&2; exit 2; }

# one build per distinct DEFINES
udefs=() bdir=()
for i in "${!names[@]}"; do
    k=-1
    for j in "${!udefs[@]}"; do [ "${udefs[$j]}" = "${defs[$i]}" ] && k=$j; done
    if [ $k -lt 0 ]; then
        udefs+=("${defs[$i]}")
        k=$((${#udefs[@]} - 1))
    fi
    bdir+=("build-ab-$k")
done
for i in "${!names[@]}"; do
    echo "variant ${names[$i]}: build ${bdir[$i]} (nvcc ${defs[$i]:-as is}), runs with ${envs[$i]:-no settings}"
done
echo "runs: $PASSES passes x weights (${wts[*]}) x ${#names[@]} variants: engine bench ${bargs[*]}"
[ $DRY = 1 ] && exit 0

PREFIX=${RC_PREFIX:-/tmp/rcprefix}
# shellcheck source=scripts/gpu-env.sh
source scripts/gpu-env.sh
[ -d "$PREFIX/usr" ] || make_prefix >/dev/null || { echo "gpu-ab: cannot unpack .debs into $PREFIX" >&2; exit 2; }
gpu_env
mkdir -p "$OUT" || exit 2
LOG=$OUT/ab.log TSV=$OUT/ab.tsv
: >"$LOG"
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader 2>&1 | tee -a "$LOG"

t0=$SECONDS
jobs=${AB_JOBS:-$(($(nproc) / ${#udefs[@]} > 0 ? $(nproc) / ${#udefs[@]} : 1))}
pids=()
for k in "${!udefs[@]}"; do
    b=build-ab-$k
    if [ -f "$b/build.ninja" ] && [ "$(cat "$b/.ab-defines" 2>/dev/null)" != "${udefs[$k]}" ]; then
        rm -rf "$b" # built with other flags: ninja would keep its objects
    fi
    (
        [ -f "$b/build.ninja" ] ||
            meson setup "$b" -Dcuda=enabled -Dtests=disabled -Dgpu_arch="${GPU_ARCH:-90}" >"$OUT/setup-$k.log" 2>&1 ||
            exit 1
        printf '%s' "${udefs[$k]}" >"$b/.ab-defines"
        cuda_stale "$b" # a reused build: its CUDA units again where a header changed (gpu-env.sh)
        NVCC_APPEND_FLAGS="${udefs[$k]}" ninja -C "$b" -j "$jobs" engine/engine >"$OUT/build-$k.log" 2>&1
    ) &
    pids+=($!)
done
bad=0
for k in "${!pids[@]}"; do # wait on each build by PID (a bare `wait` could also wait on a caller's tee)
    if ! wait "${pids[$k]}"; then
        echo "gpu-ab: build-ab-$k (nvcc ${udefs[$k]:-as is}) failed:" >&2
        grep -h -B2 -A8 -E 'error|FAILED' "$OUT/setup-$k.log" "$OUT/build-$k.log" 2>/dev/null | head -40 >&2
        bad=1
    fi
done
[ $bad = 0 ] || exit 2
echo "built ${#udefs[@]} in $((SECONDS - t0)) s"

printf 'pass\tweights\tprompt\tvariant\tms_per_token\ttok_per_s\tfloor_pct\tprefill_ms\n' >"$TSV"
status=0
for p in $(seq 1 "$PASSES"); do
    for w in "${wts[@]}"; do
        wa=()
        [ "$w" = bf16 ] || wa=(--weights "$w")
        for i in "${!names[@]}"; do
            ev=()
            if [ -n "${envs[$i]}" ]; then
                IFS=';' read -r -a ev <<<"${envs[$i]}"
            fi
            echo "== pass $p, $w, ${names[$i]}" >>"$LOG"
            out=$(env ${ev[@]+"${ev[@]}"} "${bdir[$i]}/engine/engine" bench "${bargs[@]}" ${wa[@]+"${wa[@]}"} 2>&1)
            rc=$?
            printf '%s\n' "$out" >>"$LOG"
            # the resident rows, one a prompt length: mode prompt prefill-ms ... | ms/token tok/s floor-ms floor%
            # spread | ...
            rows=$(printf '%s\n' "$out" | awk -F'|' '/^resident/ {split($1, a, " "); split($2, f, " ");
                                                               print a[2], f[1], f[2], f[4], a[3]}')
            if [ $rc -ne 0 ] || [ -z "$rows" ]; then
                printf '%s\n' "$out" | grep -iE 'error|fail' | head -2 | sed "s/^/gpu-ab: ${names[$i]}: /" >&2
                rows="- - - - -"
                status=1
            fi
            while read -r pl ms tps fl pre; do
                printf 'pass %d  %-24s prompt %-6s %-16s %8s ms/token %8s tok/s %7s of floor, prefill %s ms\n' "$p" \
                    "$w" "$pl" "${names[$i]}" "$ms" "$tps" "$fl" "$pre"
                printf '%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$p" "$w" "$pl" "${names[$i]}" "$ms" "$tps" "${fl%\%}" "$pre" \
                    >>"$TSV"
            done <<<"$rows"
        done
    done
done
echo "means over the passes (ms/token; prefill ms):"
awk -F'\t' 'NR > 1 && $5 != "-" {k = $2 "\t" $3 "\t" $4; s[k] += $5; q[k] += $8; n[k]++
                                  if (!(k in o)) {o[k] = ++m; key[m] = k}}
    END {for (i = 1; i <= m; i++) {split(key[i], a, "\t");
         printf "  %-24s prompt %-6s %-16s %8.3f; prefill %9.2f (%d runs)\n", a[1], a[2], a[3], s[key[i]] / n[key[i]],
                q[key[i]] / n[key[i]], n[key[i]]}}' "$TSV"
exit $status
