#!/usr/bin/env bash
# Machine code without a GPU: compiles one CUDA unit of a configured build for one architecture (the build's own
# flags from compile_commands.json, -gencode replaced) and prints each kernel's registers, stack (spills land there
# and in its LDL/STL count) and shared memory (cuobjdump -res-usage), and its static instruction count by opcode.
# cuobjdump and nvdisasm come from NVIDIA's PyPI wheels (nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm), fetched once
# into .tools/ (gitignored), since the toolkit here ships neither.
#   bash scripts/sass.sh [-b BUILD] [-a SM] [-d] [-l] [-r REV] UNIT.cu [KERNEL_REGEX]
#     -b BUILD   the meson build directory (default build)
#     -a SM      the target, e.g. 90 (default) or 90a, 75
#     -d         also print the disassembly of the matching kernels
#     -l         also each loop's body (from a backward branch's target to the branch): its static count by opcode,
#                which is where a kernel's time goes
#     -r REV     instead: compile the unit as it was at git revision REV as well (its tree's sources, this build's
#                flags) and compare the two, kernel by kernel: which kernels' machine code differs (instruction
#                counts, registers and stack at REV and here), which are new or gone, how many are the same. The
#                question after a refactor meant to change nothing, or when a benchmark moved: did the code the GPU
#                runs change?
#     UNIT.cu    a source file of the build, e.g. engine/eng_qgemv_m.cu
#     KERNEL_REGEX  a Python regex on the demangled kernel name (default: every kernel)
# Counts are static (each instruction once, loops not multiplied): compare two builds of one kernel, e.g. before and
# after a change to its inner loop. Exit 2 on bad usage, a unit the build does not compile or a failed fetch.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=build SM=90 DIS=0 LOOPS=0 REV= OLD=
USAGE="usage: scripts/sass.sh [-b BUILD] [-a SM] [-d] [-l] [-r REV] UNIT.cu [KERNEL_REGEX]"
while getopts "b:a:dlr:" opt; do
    case $opt in
    b) BUILD=$OPTARG ;;
    a) SM=$OPTARG ;;
    d) DIS=1 ;;
    l) LOOPS=1 ;;
    r) REV=$OPTARG ;;
    *) echo "$USAGE" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "$USAGE" >&2
    exit 2
fi
if [ -n "$REV" ] && ! git rev-parse -q --verify "$REV^{commit}" > /dev/null; then
    echo "sass: -r $REV: not a git revision of this repository" >&2
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
RES=$(mktemp "${TMPDIR:-/tmp}/sass.XXXXXX.res")
trap 'rm -f "$CUBIN" "$SASS" "$RES"' EXIT
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
# dump CUBIN SASS RES: the cubin's machine code listing into SASS and its kernels' resources into RES
dump() {
    PATH=$TOOLS/bin:$PATH cuobjdump -sass "$1" >"$2" || { echo "sass: cuobjdump failed" >&2; exit 2; }
    PATH=$TOOLS/bin:$PATH cuobjdump -res-usage "$1" >"$3" || { echo "sass: cuobjdump -res-usage failed" >&2; exit 2; }
}
dump "$CUBIN" "$SASS" "$RES"

if [ -n "$REV" ]; then
    # REV's tree in a scratch directory, the build directory's place taken by an empty one at the same depth below
    # it, so that the command's relative paths (../engine/..., -I../model) name REV's files
    OLD=$(mktemp -d "${TMPDIR:-/tmp}/sass.rev.XXXXXX")
    trap 'rm -f "$CUBIN" "$SASS" "$RES"; rm -rf "$OLD"' EXIT
    REL=$(python3 -c 'import os, sys; print(os.path.relpath(os.path.realpath(sys.argv[1]), os.getcwd()))' "$DIR")
    case $REL in
    ..*) echo "sass: the build directory $DIR is not inside the repository" >&2; exit 2 ;;
    esac
    git archive "$REV" | tar -x -C "$OLD" || { echo "sass: cannot extract $REV" >&2; exit 2; }
    if [ ! -f "$OLD/$UNIT" ]; then
        echo "sass: $UNIT is not in $REV" >&2
        exit 2
    fi
    mkdir -p "$OLD/$REL"
    if ! (cd "$OLD/$REL" && eval "$(sed -n 2p <<<"$CMD" | sed "s#$CUBIN#$CUBIN.rev#")"); then
        echo "sass: compiling $UNIT at $REV for sm_$SM failed" >&2
        rm -f "$CUBIN.rev"
        exit 2
    fi
    dump "$CUBIN.rev" "$OLD/sass.txt" "$OLD/res.txt"
    rm -f "$CUBIN.rev"
fi
python3 - "$SASS" "$RE" "$DIS" "$LOOPS" "${OLD:+$OLD/sass.txt}" "$REV" "$UNIT" "$RES" "${OLD:+$OLD/res.txt}" <<'PY'
import re, subprocess, sys
path, pattern, dis, loops = sys.argv[1], re.compile(sys.argv[2]), sys.argv[3] == "1", sys.argv[4] == "1"
old_path, rev, unit, res_path, old_res_path = sys.argv[5:10]


def histogram(body):
    ops = {}
    for l in body:
        m = re.search(r"\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]+)", l)
        if m:
            ops[m.group(1)] = ops.get(m.group(1), 0) + 1
    return ", ".join("%s %d" % kv for kv in sorted(ops.items(), key=lambda kv: -kv[1]))


def resources(path):
    """cuobjdump -res-usage: {mangled name: "R registers, stack S bytes, shared H bytes"}: -res-usage's SHARED holds the
    static shared memory and the bytes the architecture reserves a block"""
    res, cur = {}, None
    for line in open(path):
        m = re.search(r"Function (\S+?):?$", line.strip())
        if m:
            cur = m.group(1)
            continue
        m = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+)", line)
        if cur and m:
            res[cur] = "%s registers, stack %s bytes, shared %s bytes (static and reserved)" % m.groups()
            cur = None
    return res


def kernels(path, res_path):
    """cuobjdump's listing: [(demangled name, its instruction lines, its resources)] of the kernels matching the
    pattern"""
    funcs, cur = {}, None
    for line in open(path):
        m = re.search(r"Function : (\S+)", line)
        if m:
            cur = m.group(1)
            funcs[cur] = []
        elif cur and re.search(r"/\*[0-9a-f]{4}\*/", line):
            funcs[cur].append(line.rstrip())
    names, res = list(funcs), resources(res_path)
    dem = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.split("\n")
    return [(d, funcs[n], res.get(n, "resources unknown")) for n, d in zip(names, dem) if pattern.search(d)]


def code(body):
    """a kernel's instructions without their addresses and encodings, an anonymous namespace's tag (it follows the
    source's path) in a symbol an instruction names made one: what two revisions' kernels are compared by"""
    return [" ".join(re.sub(r"/\*[0-9a-f]{4}\*/|/\* 0x[0-9a-f]+ \*/|(?<=_GLOBAL__N__)[0-9a-f]+_", "", l).split())
            for l in body]


if old_path:
    old = {k: (fn, r) for k, fn, r in kernels(old_path, old_res_path)}
    new = {k: (fn, r) for k, fn, r in kernels(path, res_path)}
    same = differ = 0
    for name in sorted(set(old) | set(new)):
        if name not in new:
            print("gone   %s (%d instructions at %s)" % (name, len(old[name][0]), rev))
        elif name not in old:
            print("new    %s (%d instructions; %s)" % (name, len(new[name][0]), new[name][1]))
        elif code(old[name][0]) != code(new[name][0]):
            differ += 1
            print("differ %s: %d instructions at %s, %d here" % (name, len(old[name][0]), rev, len(new[name][0])))
            if old[name][1] != new[name][1]:
                print("       at %s %s; here %s" % (rev, old[name][1], new[name][1]))
        else:
            same += 1
    print("%s against %s: %d kernels with the same machine code, %d differ, %d new, %d gone"
          % (unit, rev, same, differ, len(set(new) - set(old)), len(set(old) - set(new))))
    sys.exit(0)
shown = kernels(path, res_path)
for name, fn, r in shown:
    print("%s\n  %s\n  %d instructions: %s" % (name, r, len(fn), histogram(fn)))
    if loops:
        addr = [int(re.search(r"/\*([0-9a-f]+)\*/", l).group(1), 16) for l in fn]
        for i, l in enumerate(fn):
            m = re.search(r"\bBRA(?:\.\w+)*\s+(?:U?!?P\w+,\s*)?(0x[0-9a-f]+)", l)
            if not m or int(m.group(1), 16) > addr[i]:
                continue
            lo = int(m.group(1), 16)
            body = [x for x, a in zip(fn, addr) if lo <= a <= addr[i]]
            print("  loop 0x%x..0x%x: %d instructions: %s" % (lo, addr[i], len(body), histogram(body)))
    if dis:
        print("\n".join(fn))
if not shown:
    sys.exit("sass: no kernel matches %r" % sys.argv[2])
PY
