#!/usr/bin/env python3
"""SentencePiece-BPE token ids for a GGUF whose tokenizer is SentencePiece (tokenizer.ggml.model "llama", e.g.
Gemma 3), read from the file's own vocabulary and scores; for goldens and quality streams of such checkpoints.

Why not HF: transformers 5.17 rebuilds the tokenizer of the Gemma 3 270M GGUF without its merge order and splits
words into two-letter pieces (' p', 'ri', 'nt', 'ing' for ' printing', which the vocabulary holds as one piece),
so the model sees text it was never trained on.

The rule (SentencePiece's BPE encoding): spaces become U+2581 (no dummy prefix: Gemma's normalizer adds none);
user-defined pieces (token type 4: runs of newlines) are matched first, longest first, as atoms (a text with a
run of spaces is refused: whether those become user-defined pieces is not settled here); the
rest starts as single characters and the adjacent pair whose concatenation is a piece with the highest score is
merged, leftmost on ties, until no pair is a piece; a character outside the vocabulary becomes its UTF-8 bytes
(<0xXX> pieces). BOS first when the file says add_bos_token.

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

USER_DEFINED, BYTE = 4, 6


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
        self.id = {t: i for i, t in enumerate(toks) if types[i] != BYTE}
        self.score = scores
        self.byte = {int(t[3:5], 16): i for i, t in enumerate(toks) if types[i] == BYTE}
        self.user = sorted((t for i, t in enumerate(toks) if types[i] == USER_DEFINED), key=len, reverse=True)

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
                if t in self.id:
                    heapq.heappush(heap, (-self.score[self.id[t]], i, t))
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
        if "  " in text:  # a space run: whether SentencePiece takes it as a user-defined piece here is not checked
            fail("the text has a run of spaces; collapse it first (only single spaces are handled)")
        text = text.replace(" ", "\u2581")
        user = [u for u in self.user if " " not in u]  # newline runs and the like, longest first
        ids, start, i = [], 0, 0
        while i < len(text):
            hit = next((u for u in user if text.startswith(u, i)), None)
            if hit:
                ids += self._bpe(text[start:i]) + [self.id[hit]]
                i += len(hit)
                start = i
            else:
                i += 1
        return ids + self._bpe(text[start:])


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
