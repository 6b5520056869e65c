#!/usr/bin/env python3
"""gguf_cases.py TOKENIZE CASES_JSON GGUF (a path, or a file name in the weights cache): a GGUF's own tokenizer (tokenizer.ggml.* metadata, through
rc_text_load_gguf and the `tokenize` tool) encodes every case of CASES_JSON (gen_spm.py --gemma3) into the ids
recorded there, and decodes those ids back into the recorded text. The file must be the one the cases were made
from (its sha256); skips (77) when it is not in the weights cache (scripts/fetch-weights.sh)."""
import hashlib
import json
import os
import subprocess
import sys

tool, cases_path, gguf = sys.argv[1:4]
if not os.path.isabs(gguf):  # a file name in the weights cache
    gguf = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "refchain", gguf)
if not os.path.exists(gguf):
    print(f"SKIP: {gguf} not fetched (bash scripts/fetch-weights.sh)")
    sys.exit(77)
want = json.load(open(cases_path, encoding="utf-8"))
h = hashlib.sha256()
with open(gguf, "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
        h.update(block)
if h.hexdigest() != want["sha256"]:
    print(f"FAIL: {gguf} has sha256 {h.hexdigest()}, the cases were made from {want['sha256']}")
    sys.exit(1)
bad = ids = decoded = 0
for c in want["cases"]:
    text = bytes.fromhex(c["bytes_hex"])
    r = subprocess.run([tool, gguf, text], capture_output=True)
    got = list(map(int, r.stdout.split())) if r.returncode == 0 else None
    ids += len(c["ids"])
    if got != c["ids"]:
        bad += 1
        print(f"FAIL {c['name']}: exit {r.returncode} {r.stderr.decode(errors='replace').strip()}\n"
              f"  want {c['ids'][:24]}\n  got  {None if got is None else got[:24]}")
        continue
    if "decoded_hex" in c:
        r = subprocess.run([tool, "--decode", gguf, " ".join(map(str, c["ids"]))], capture_output=True)
        if r.returncode != 0 or r.stdout != bytes.fromhex(c["decoded_hex"]) + b"\n":
            bad += 1
            print(f"FAIL {c['name']}: decode {r.stdout[:80]!r} against {bytes.fromhex(c['decoded_hex'])[:80]!r}")
        else:
            decoded += 1
print(f"{want['source']}: {len(want['cases'])} texts, {ids} ids, {bad} cases differ; {decoded} decodes equal")
sys.exit(1 if bad else 0)
