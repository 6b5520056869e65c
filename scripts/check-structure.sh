#!/usr/bin/env bash
# The dependency rules, checked: harness -> stages (ref, cuda, engine) -> model, never a stage -> another stage,
# model -> no stage, and no cycle between compilation units.
#   bash scripts/check-structure.sh [BUILD_DIR]      (exit 0 clean, 1 a violation, 2 cannot check)
# What it reads, and so what it can see:
#   1. #include "..." lines of every .c/.h/.cu/.cuh under model/ ref/ cuda/ engine/ harness/: a quoted header is
#      resolved to the folder that holds it (the include paths are per folder, so names are unique);
#   2. the `dependencies :` / `link_with :` lists of model/, ref/, cuda/, engine/ meson.build (the *_dep names
#      each folder declares);
#   3. with a built BUILD_DIR (default: build): `nm` over the objects of those folders (tests excluded), an edge
#      A -> B where unit A uses a global symbol unit B defines. Stage rules are checked on these edges too,
#      and every strongly connected set of more than one unit is a link cycle. Without a build this part is
#      skipped and says so. Not seen: calls through function pointers (the stage table), macros, anything
#      inside a unit.
# Known violations are listed with their reason in scripts/structure-allow.txt ("FROM -> TO  reason"); a listed
# one is reported but does not fail, a listed one that no longer occurs is reported as stale (and fails, so the
# list cannot rot).
set -u
cd "$(dirname "$0")/.." || exit 2
BUILD=${1:-build}
command -v python3 > /dev/null || { echo "check-structure: python3 not found"; exit 2; }
python3 - "$BUILD" <<'PY'
import os, re, subprocess, sys

build = sys.argv[1]
LAYERS = ["model", "ref", "cuda", "engine", "harness"]
STAGES = {"ref", "cuda", "engine"}
SRC_EXT = (".c", ".h", ".cu", ".cuh")

def rule(a, b):
    """why folder a may not depend on folder b, or None"""
    if a == b:
        return None
    if a == "model" and b != "model":
        return "model depends on no stage or harness"
    if a in STAGES and b in STAGES:
        return "no stage depends on another stage"
    if a in STAGES | {"model"} and b == "harness":
        return "only the harness drives stages"
    return None

allow = {}
if os.path.exists("scripts/structure-allow.txt"):
    for ln in open("scripts/structure-allow.txt"):
        ln = ln.strip()
        m = re.match(r"^(\S+)\s*->\s*(\S+)\s+(.*)$", ln)
        if ln and not ln.startswith("#"):
            if not m:
                print(f"check-structure: scripts/structure-allow.txt: cannot read '{ln}'")
                sys.exit(2)
            allow[(m.group(1), m.group(2))] = m.group(3)
used_allow = set()
problems, notes = [], []

def violation(kind, a_file, b_file, a, b, why):
    for key in ((a, b), (a_file, b_file), (a_file, b)):
        if key in allow:
            used_allow.add(key)
            notes.append(f"allowed ({allow[key]}): {kind} {a_file} -> {b_file}")
            return
    problems.append(f"{kind}: {a_file} -> {b_file}: {why}")

# 1. includes
headers = {}
for d in LAYERS:
    for f in sorted(os.listdir(d)):
        if f.endswith((".h", ".cuh")):
            headers.setdefault(f, []).append(d)
n_inc = 0
for d in LAYERS:
    for f in sorted(os.listdir(d)):
        if not f.endswith(SRC_EXT):
            continue
        for ln in open(os.path.join(d, f), errors="replace"):
            m = re.match(r'\s*#\s*include\s+"([^"]+)"', ln)
            if not m:
                continue
            n_inc += 1
            name = m.group(1)
            homes = [d] if os.path.exists(os.path.join(d, name)) else headers.get(os.path.basename(name), [])
            for h in homes[:1]:
                why = rule(d, h)
                if why:
                    violation("include", f"{d}/{f}", f"{h}/{name}", d, h, why)

# 2. meson dependencies of each folder
dep_home = {}
for d in LAYERS:
    text = open(os.path.join(d, "meson.build")).read()
    for m in re.finditer(r"^\s*(\w+_dep)\s*=\s*declare_dependency", text, re.M):
        dep_home[m.group(1)] = d
n_dep, seen = 0, set()
for d in LAYERS:
    text = open(os.path.join(d, "meson.build")).read()
    for m in re.finditer(r"(?:dependencies|link_with)\s*:\s*\[([^\]]*)\]", text):
        for name in re.findall(r"\w+", m.group(1)):
            if name in dep_home and (d, name) not in seen:
                seen.add((d, name))
                n_dep += 1
                why = rule(d, dep_home[name])
                if why:
                    violation("meson", f"{d}/meson.build", f"{name} ({dep_home[name]}/)", d, dep_home[name], why)

# 3. symbols of the built objects
units, defs, uses = set(), {}, {}
if os.path.isdir(build):
    for root, _, files in os.walk(build):
        for f in files:
            if not f.endswith(".o"):
                continue
            rel = os.path.relpath(root, build).split(os.sep)
            if not rel or rel[0] not in LAYERS or not rel[-1].endswith(".p"):
                continue
            src = os.path.normpath(os.path.join(*rel[:-1], f[:-2].replace("__", "..")))
            if src.split(os.sep)[0] not in LAYERS:
                continue
            out = subprocess.run(["nm", "-P", os.path.join(root, f)], capture_output=True, text=True)
            if out.returncode:
                print(f"check-structure: nm {os.path.join(root, f)} failed")
                sys.exit(2)
            units.add(src)
            for ln in out.stdout.splitlines():
                p = ln.split()
                if len(p) < 2:
                    continue
                if p[1] == "U":
                    uses.setdefault(src, set()).add(p[0])
                elif p[1] in "TDBRCVW" and p[1].isupper():
                    defs.setdefault(p[0], set()).add(src)
edges = {u: set() for u in units}
for u, syms in uses.items():
    for s in syms:
        for v in defs.get(s, ()):
            if v != u:
                edges[u].add(v)
for u in sorted(edges):
    for v in sorted(edges[u]):
        a, b = u.split(os.sep)[0], v.split(os.sep)[0]
        why = rule(a, b)
        if why:
            violation("link", u, v, a, b, why)
# cycles: strongly connected components (Tarjan, iterative)
index, low, onstack, stack, sccs, counter = {}, {}, set(), [], [], [0]
for root in sorted(edges):
    if root in index:
        continue
    work = [(root, iter(sorted(edges[root])))]
    index[root] = low[root] = counter[0]; counter[0] += 1; stack.append(root); onstack.add(root)
    while work:
        v, it = work[-1]
        nxt = next(it, None)
        if nxt is not None:
            if nxt not in index:
                index[nxt] = low[nxt] = counter[0]; counter[0] += 1; stack.append(nxt); onstack.add(nxt)
                work.append((nxt, iter(sorted(edges[nxt]))))
            elif nxt in onstack:
                low[v] = min(low[v], index[nxt])
            continue
        work.pop()
        if work:
            low[work[-1][0]] = min(low[work[-1][0]], low[v])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop(); onstack.discard(w); comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(sorted(comp))
for comp in sccs:
    key = ("cycle", " ".join(comp))
    if key in allow:
        used_allow.add(key)
        notes.append(f"allowed ({allow[key]}): link cycle {' <-> '.join(comp)}")
    else:
        problems.append(f"link cycle: {' <-> '.join(comp)}")

for key in sorted(set(allow) - used_allow):
    problems.append(f"stale allowlist entry (no longer occurs; remove it): {key[0]} -> {key[1]}")
for n in notes:
    print("check-structure: " + n)
for p in problems:
    print("check-structure: FAIL " + p)
link = f"{len(units)} units, {sum(len(e) for e in edges.values())} link edges" if units else \
       f"link graph not checked (no objects under {build}/: build first)"
print(f"check-structure: {n_inc} includes, {n_dep} meson dependencies, {link}: "
      f"{len(problems)} violation(s), {len(notes)} allowed")
sys.exit(1 if problems else 0)
PY
