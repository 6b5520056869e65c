#!/usr/bin/env python3
"""SentencePiece-BPE token ids for a GGUF whose tokenizer is SentencePiece (tokenizer.ggml.model "llama", e.g.
Gemma 3), read from the file's own vocabulary and scores; for goldens and quality streams of such checkpoints.

Why not HF: transformers 5.17 rebuilds the tokenizer of the Gemma 3 270M GGUF without its merge order and splits
words into two-letter pieces (' p', 'ri', 'nt', 'ing' for ' printing', which the vocabulary holds as one piece),
so the model sees text it was never trained on.

The rule (SentencePiece's BPE encoding with Gemma's normalizer; docs/tokenizers.md): control and user-defined
pieces (token types 3 and 4: runs of newlines, runs of spaces, <start_of_turn>) are matched first in the raw text,
leftmost then longest, as atoms; in the text between them spaces become U+2581 (no dummy prefix), the rest starts
as single characters and the adjacent pair whose concatenation is a normal or user-defined piece with the highest
score is merged, leftmost on ties, until no pair is a piece; a character outside the vocabulary becomes its UTF-8
bytes (<0xXX> pieces). BOS first when the file says add_bos_token. The C tokenizer (model/tokenizer.c, GGUF model
"llama") follows the same rule; tests/tokenizer/gen_spm.py checks both against SentencePiece itself.

    python3 golden/gguf_spm.py MODEL.gguf (--text "..." | --file F) [--paragraphs] [--no-bos] [--from K] [--max N]
        [-o IDS]
prints (or writes) the ids, space-separated: the format `harness quant-quality --eval/--calib` reads.
--paragraphs: the text's paragraphs (split at blank lines) with every whitespace run inside one collapsed to a
space, joined by blank lines (a plain-text file's line breaks and indents become the prose a model reads);
--from K: the ids from position K of the whole encoding (BOS counted) on, behind a BOS of their own; --max N: the
first N ids of the result. docs/quantization.md's Gemma 3 270M table: calibration = --max 512, held-out = --from
512 --max 1024, both of /usr/share/common-licenses/GPL-3 with --paragraphs.
"""
import argparse
import heapq
import re
import sys

from gguf import GGUFReader

NORMAL, CONTROL, USER_DEFINED, BYTE = 1, 3, 4, 6


def fail(msg):
    print(f"gguf_spm: {msg}", file=sys.stderr)
    sys.exit(2)


def load_vocab(path):
    r = GGUFReader(path)
    f = r.fields
    if bytes(f["tokenizer.ggml.model"].parts[-1]).decode() != "llama":
        fail(f"{path}: tokenizer.ggml.model is not SentencePiece ('llama')")
    toks = [bytes(f["tokenizer.ggml.tokens"].parts[i]).decode("utf-8") for i in f["tokenizer.ggml.tokens"].data]
    scores = [float(f["tokenizer.ggml.scores"].parts[i][0]) for i in f["tokenizer.ggml.scores"].data]
    types = [int(f["tokenizer.ggml.token_type"].parts[i][0]) for i in f["tokenizer.ggml.token_type"].data]
    bos = int(f["tokenizer.ggml.bos_token_id"].parts[-1][0])
    add_bos = bool(f["tokenizer.ggml.add_bos_token"].parts[-1][0]) if "tokenizer.ggml.add_bos_token" in f else True
    return toks, scores, types, bos, add_bos


class Spm:
    def __init__(self, toks, scores, types):
        self.toks = toks
        self.id = {t: i for i, t in enumerate(toks) if types[i] != BYTE}  # a character's symbol
        self.merged = {t: i for i, t in enumerate(toks) if types[i] in (NORMAL, USER_DEFINED)}  # what a merge makes
        self.score = scores
        self.byte = {int(t[3:5], 16): i for i, t in enumerate(toks) if types[i] == BYTE}
        self.atoms = {}  # first character -> control and user-defined pieces, longest first
        for i, t in enumerate(toks):
            if types[i] in (CONTROL, USER_DEFINED) and t:
                self.atoms.setdefault(t[0], []).append(t)
        for v in self.atoms.values():
            v.sort(key=len, reverse=True)

    def _bpe(self, text):
        sym = list(text)
        alive = [True] * len(sym)
        nxt = list(range(1, len(sym) + 1))
        prv = list(range(-1, len(sym) - 1))
        heap = []

        def push(i):
            j = nxt[i]
            if j < len(sym):
                t = sym[i] + sym[j]
                if t in self.merged:
                    heapq.heappush(heap, (-self.score[self.merged[t]], i, t))
        for i in range(len(sym) - 1):
            push(i)
        while heap:
            _, i, t = heapq.heappop(heap)
            j = nxt[i] if alive[i] else len(sym)
            if not alive[i] or j >= len(sym) or sym[i] + sym[j] != t:
                continue  # stale: a neighbour merged since
            sym[i] = t
            alive[j] = False
            nxt[i] = nxt[j]
            if nxt[i] < len(sym):
                prv[nxt[i]] = i
            if prv[i] >= 0:
                push(prv[i])
            push(i)
        ids = []
        for i, s in enumerate(sym):
            if not alive[i]:
                continue
            if s in self.id:
                ids.append(self.id[s])
            else:
                ids += [self.byte[b] for b in s.encode("utf-8")]
        return ids

    def decode(self, ids):
        return "".join(self.toks[i] for i in ids).replace("\u2581", " ")

    def encode(self, text):
        ids, start, i = [], 0, 0
        while i < len(text):
            hit = next((u for u in self.atoms.get(text[i], ()) if text.startswith(u, i)), None)
            if hit:
                ids += self._bpe(text[start:i].replace(" ", "\u2581")) + [self.id[hit]]
                i += len(hit)
                start = i
            else:
                i += 1
        return ids + self._bpe(text[start:].replace(" ", "\u2581"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--text")
    ap.add_argument("--file")
    ap.add_argument("--paragraphs", action="store_true", help="collapse whitespace inside paragraphs")
    ap.add_argument("--no-bos", action="store_true")
    ap.add_argument("--from", dest="start", type=int, default=0, help="the ids from position K on, behind a BOS")
    ap.add_argument("--max", type=int, default=0, help="keep the first N ids (0: all)")
    ap.add_argument("-o", "--out")
    a = ap.parse_args()
    if (a.text is None) == (a.file is None):
        ap.error("give --text or --file")
    toks, scores, types, bos, add_bos = load_vocab(a.model)
    text = a.text if a.text is not None else open(a.file, encoding="utf-8").read()
    if a.paragraphs:
        text = "\n\n".join(p for p in (re.sub(r"\s+", " ", q).strip() for q in re.split(r"\n\s*\n", text)) if p) + "\n"
    head = [bos] if add_bos and not a.no_bos else []
    ids = head + Spm(toks, scores, types).encode(text)
    if a.start:
        ids = head + ids[a.start:]
    if a.max:
        ids = ids[:a.max]
    s = " ".join(map(str, ids)) + "\n"
    if a.out:
        open(a.out, "w").write(s)
    else:
        sys.stdout.write(s)


if __name__ == "__main__":
    main()
