#!/usr/bin/env bash
# Machine code without a GPU: compiles one CUDA unit of a configured build for one architecture (the build's own
# flags from compile_commands.json, -gencode replaced) and prints each kernel's static instruction count by opcode.
# cuobjdump and nvdisasm come from NVIDIA's PyPI wheels (nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm), fetched once
# into .tools/ (gitignored), since the toolkit here ships neither.
#   bash scripts/sass.sh [-b BUILD] [-a SM] [-d] [-l] UNIT.cu [KERNEL_REGEX]
#     -b BUILD   the meson build directory (default build)
#     -a SM      the target, e.g. 90 (default) or 90a, 75
#     -d         also print the disassembly of the matching kernels
#     -l         also each loop's body (from a backward branch's target to the branch): its static count by opcode,
#                which is where a kernel's time goes
#     UNIT.cu    a source file of the build, e.g. engine/eng_qgemv_m.cu
#     KERNEL_REGEX  a Python regex on the demangled kernel name (default: every kernel)
# Counts are static (each instruction once, loops not multiplied): compare two builds of one kernel, e.g. before and
# after a change to its inner loop. Exit 2 on bad usage, a unit the build does not compile or a failed fetch.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=build SM=90 DIS=0 LOOPS=0
while getopts "b:a:dl" opt; do
    case $opt in
    b) BUILD=$OPTARG ;;
    a) SM=$OPTARG ;;
    d) DIS=1 ;;
    l) LOOPS=1 ;;
    *) echo "usage: scripts/sass.sh [-b BUILD] [-a SM] [-d] [-l] UNIT.cu [KERNEL_REGEX]" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: scripts/sass.sh [-b BUILD] [-a SM] [-d] [-l] UNIT.cu [KERNEL_REGEX]" >&2
    exit 2
fi
UNIT=$1 RE=${2:-.}
if [ ! -f "$BUILD/compile_commands.json" ]; then
    echo "sass: $BUILD/compile_commands.json not found (configure the build first: meson setup $BUILD)" >&2
    exit 2
fi

TOOLS=$PWD/.tools
if [ ! -x "$TOOLS/bin/cuobjdump" ] || [ ! -x "$TOOLS/bin/nvdisasm" ]; then
    mkdir -p "$TOOLS/whl" "$TOOLS/bin"
    for pkg in nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm; do
        if ! python3 -m pip download --no-deps -q -d "$TOOLS/whl" "$pkg"; then
            echo "sass: pip download $pkg failed" >&2
            exit 2
        fi
    done
    for whl in "$TOOLS"/whl/*.whl; do
        python3 -m zipfile -e "$whl" "$TOOLS/unpacked" || { echo "sass: cannot unpack $whl" >&2; exit 2; }
    done
    for tool in cuobjdump nvdisasm; do
        found=$(find "$TOOLS/unpacked" -type f -name "$tool" | head -n 1)
        [ -n "$found" ] || { echo "sass: $tool not in the wheels" >&2; exit 2; }
        chmod +x "$found"
        ln -sf "$found" "$TOOLS/bin/$tool"
    done
fi

CUBIN=$(mktemp "${TMPDIR:-/tmp}/sass.XXXXXX.cubin")
SASS=$(mktemp "${TMPDIR:-/tmp}/sass.XXXXXX.txt")
trap 'rm -f "$CUBIN" "$SASS"' EXIT
# the unit's compile command with one -gencode for SM and -cubin into $CUBIN in place of -c / -o
CMD=$(python3 - "$BUILD/compile_commands.json" "$UNIT" "$SM" "$CUBIN" <<'PY'
import json, os, shlex, sys
db, unit, sm, cubin = sys.argv[1:]
want = os.path.realpath(unit)
for e in json.load(open(db)):
    f = e["file"] if os.path.isabs(e["file"]) else os.path.join(e["directory"], e["file"])
    if os.path.realpath(f) != want:
        continue
    args = shlex.split(e["command"]) if "command" in e else e["arguments"]
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-o", "-c"):
            skip = a == "-o"
            continue
        if a.startswith("-gencode") or a.startswith("--generate-code") or a.startswith("-MD") or a.startswith("-MF"):
            continue
        out.append(a)
    arch = "compute_%s" % sm
    out[1:1] = ["-gencode=arch=%s,code=sm_%s" % (arch, sm), "-cubin", "-o", cubin]
    print(e["directory"])
    print(shlex.join(out))
    sys.exit(0)
sys.exit("sass: %s is not a unit of this build" % unit)
PY
) || exit 2
DIR=$(sed -n 1p <<<"$CMD")
if ! (cd "$DIR" && eval "$(sed -n 2p <<<"$CMD")"); then
    echo "sass: compiling $UNIT for sm_$SM failed" >&2
    exit 2
fi
PATH=$TOOLS/bin:$PATH cuobjdump -sass "$CUBIN" >"$SASS" || { echo "sass: cuobjdump failed" >&2; exit 2; }
python3 - "$SASS" "$RE" "$DIS" "$LOOPS" <<'PY'
import re, subprocess, sys
path, pattern, dis, loops = sys.argv[1], re.compile(sys.argv[2]), sys.argv[3] == "1", sys.argv[4] == "1"


def histogram(body):
    ops = {}
    for l in body:
        m = re.search(r"\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]+)", l)
        if m:
            ops[m.group(1)] = ops.get(m.group(1), 0) + 1
    return ", ".join("%s %d" % kv for kv in sorted(ops.items(), key=lambda kv: -kv[1]))


funcs, cur = {}, None
for line in open(path):
    m = re.search(r"Function : (\S+)", line)
    if m:
        cur = m.group(1)
        funcs[cur] = []
    elif cur and re.search(r"/\*[0-9a-f]{4}\*/", line):
        funcs[cur].append(line.rstrip())
names = list(funcs)
dem = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.split("\n")
shown = 0
for mangled, name in zip(names, dem):
    if not pattern.search(name):
        continue
    shown += 1
    print("%s\n  %d instructions: %s" % (name, len(funcs[mangled]), histogram(funcs[mangled])))
    if loops:
        addr = [int(re.search(r"/\*([0-9a-f]+)\*/", l).group(1), 16) for l in funcs[mangled]]
        for i, l in enumerate(funcs[mangled]):
            m = re.search(r"\bBRA(?:\.\w+)*\s+(?:U?!?P\w+,\s*)?(0x[0-9a-f]+)", l)
            if not m or int(m.group(1), 16) > addr[i]:
                continue
            lo = int(m.group(1), 16)
            body = [x for x, a in zip(funcs[mangled], addr) if lo <= a <= addr[i]]
            print("  loop 0x%x..0x%x: %d instructions: %s" % (lo, addr[i], len(body), histogram(body)))
    if dis:
        print("\n".join(funcs[mangled]))
if not shown:
    sys.exit("sass: no kernel matches %r (%d kernels in the unit)" % (sys.argv[2], len(names)))
PY
