#!/usr/bin/env bash
# The engine's speed next to its peers, one run on the GPU machine (from the repo root, after a CUDA build, e.g.
# scripts/gpu-lane.sh's build-gpu; builds nothing itself):
#   OUT=/tmp/out [COMMIT=<sha>] bash scripts/gpu-bench.sh BUILD_DIR
# 1. the shape (engine bench --print-shape), then bench/peer_hf.py: bf16 matmul peak, cuBLAS GEMV on the shape's
#    matrices, HF transformers sdpa and eager prefill + greedy decode after each prompt length -> $OUT/peer.json
# 2. engine bench --shape llama3-8b after the same prompt lengths (resident) and the streaming row, with the peak
#    measured in step 1 as its compute roofline                                       -> $OUT/engine.json
#    (run after the peer process has exited: the two never hold the GPU together)
# 3. bench/peer_table.py: one markdown table from the two JSONs                         -> $OUT/bench.md
# With COMMIT set, engine.json is also $OUT/reports/<commit>.bench.json, where `harness report --out $OUT/reports`
# (scripts/gpu-harness.sh) picks it up. Logs: $OUT/bench-logs.tar.gz. Knobs: BENCH_SHAPE (llama3-8b),
# BENCH_PROMPTS (16,2048,8192,32768), BENCH_STEPS (16), BENCH_ROUNDS (3), BENCH_PEER_TIMEOUT / BENCH_ENGINE_TIMEOUT
# (seconds; 240 / 300: a run cut short keeps the rows it finished). Exit 0 iff both ran and the table was written.
set -u
B=${1:?usage: OUT=DIR [COMMIT=SHA] scripts/gpu-bench.sh BUILD_DIR}
cd "$(dirname "$0")/.." || exit 2
OUT=${OUT:-/tmp/out}
SHAPE=${BENCH_SHAPE:-llama3-8b}
PROMPTS=${BENCH_PROMPTS:-16,2048,8192,32768}
STEPS=${BENCH_STEPS:-16}
ROUNDS=${BENCH_ROUNDS:-3}
PREFIX=${RC_PREFIX:-/tmp/rcprefix}
E=$B/engine/engine
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$NVCC")")}
export LD_LIBRARY_PATH=$PREFIX/usr/lib/x86_64-linux-gnu:$CUDA_HOME/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
mkdir -p "$OUT" || exit 2
LOGS=$(mktemp -d "${TMPDIR:-/tmp}/gpu-bench.XXXXXX") || exit 2
status=0
commit=()
[ -n "${COMMIT:-}" ] && commit=(--commit "$COMMIT")
[ -x "$E" ] || { echo "gpu-bench: $E not built (build first, e.g. scripts/gpu-lane.sh)"; exit 2; }
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$LOGS/gpu.txt"

echo "== 1. peers: HF transformers $SHAPE (sdpa, eager), cuBLAS GEMV, bf16 peak"
"$E" bench --print-shape "$SHAPE" >"$LOGS/shape.json" || exit 2
t0=$SECONDS
timeout "${BENCH_PEER_TIMEOUT:-240}" "$PY" bench/peer_hf.py --config "$LOGS/shape.json" --out "$OUT/peer.json" \
    --prompt-len "$PROMPTS" --steps "$STEPS" --rounds "$ROUNDS" "${commit[@]}" 2>&1 | tee "$LOGS/peer.log"
prc=${PIPESTATUS[0]}
echo "gpu-bench: peer_hf.py exit $prc ($((SECONDS - t0)) s)"
[ "$prc" -eq 0 ] || status=1
peak=$("$PY" -c 'import json,sys; print("%.1f" % json.load(open(sys.argv[1]))["peak"]["tflops_best"])' \
    "$OUT/peer.json" 2>/dev/null)
peak_args=()
[ -n "$peak" ] && peak_args=(--peak-tflops "$peak" --peak-source "torch.matmul bf16 8192^3, best of 10, this run (peer_hf.py)")

echo "== 2. engine bench --shape $SHAPE --prompt-len $PROMPTS"
t0=$SECONDS
timeout "${BENCH_ENGINE_TIMEOUT:-300}" "$E" bench --shape "$SHAPE" --prompt-len "$PROMPTS" --steps "$STEPS" \
    --rounds "$ROUNDS" --json "$OUT/engine.json" "${peak_args[@]}" "${commit[@]}" >"$LOGS/engine.txt" 2>"$LOGS/engine.err"
erc=$?
cat "$LOGS/engine.txt"
grep -E '^engine: (plan|device memory|error)' "$LOGS/engine.err" | head -8
echo "gpu-bench: engine bench exit $erc ($((SECONDS - t0)) s)"
[ "$erc" -eq 0 ] || status=1

echo "== 3. the table"
if [ -s "$OUT/engine.json" ]; then
    peer=()
    [ -s "$OUT/peer.json" ] && peer=(--peer "$OUT/peer.json")
    "$PY" bench/peer_table.py --engine "$OUT/engine.json" "${peer[@]}" --out "$OUT/bench.md" || status=1
    if [ -n "${COMMIT:-}" ]; then
        mkdir -p "$OUT/reports" && cp "$OUT/engine.json" "$OUT/reports/$COMMIT.bench.json"
    fi
else
    echo "gpu-bench: no engine JSON: no table"
    status=1
fi
tar -czf "$OUT/bench-logs.tar.gz" -C "$LOGS" . && rm -rf "$LOGS"
echo "gpu-bench: status $status; files: $(cd "$OUT" && ls -d peer.json engine.json bench.md bench-logs.tar.gz reports 2>/dev/null | tr '\n' ' ')"
exit "$status"
