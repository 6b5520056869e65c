#!/usr/bin/env python3
"""Writes spm_tiny.json: a small SentencePiece BPE tokenizer as a GGUF stores one (tokenizer.ggml.model "llama":
pieces, scores, token types) and the ids SentencePiece itself gives for a set of texts, for test_tokenizer.c's
SentencePiece check. Run once (needs the PyPI package sentencepiece); the output is committed.

    python3 tests/tokenizer/gen_spm.py [--gemma3 PATH/gemma-3-270m-q4_k_m.gguf]

The tokenizer: SentencePiece's BPE trainer on /usr/share/common-licenses/GPL-3 (vocabulary 700, byte fallback,
digits split, no prefix space), with Gemma's kinds of pieces: user-defined runs of newlines and of spaces, and a
control piece. Two changes after training, both on purpose:
  - the normalizer is Gemma's kind (docs/tokenizers.md): a rule mapping ' ' to U+2581 with whitespace escaping
    off, so that user-defined pieces (kept unnormalized) match raw runs of spaces; the trainer insists on the
    escaping, so the rule comes from a second, throwaway model trained with it;
  - scores are rounded down to multiples of 32, so pieces share scores in groups of 32: SentencePiece then merges the
    leftmost of equal-score pairs, which the C tokenizer must reproduce.
Texts: tests/tokenizer/fixture.json's (bytes decoded with errors='replace', as the C encoder does), plus runs of
spaces and newlines, text around the control piece, and paragraphs of GPL-3. A control piece in the text is matched
first, as HF's added tokens are (SentencePiece alone does not parse it): its ids are SentencePiece's ids of the
text between them with the control ids in between.

--gemma3 also writes gemma3_270m.json: the same kind of cases for Gemma 3 270M's own vocabulary (262,144 pieces
read from the GGUF's tokenizer.ggml.* arrays, the same normalizer), for the real.gemma3_270m.tokenizer test, which
needs the GGUF (scripts/fetch-weights.sh gemma3); it records the file's sha256, not its pieces.
"""
import argparse
import hashlib
import json
import os
import re
import tempfile

import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2 as pb

HERE = os.path.dirname(os.path.abspath(__file__))
GPL = "/usr/share/common-licenses/GPL-3"
CTL = "<ctl>"


def train(tmp, prefix, **kw):
    spm.SentencePieceTrainer.train(input=GPL, model_prefix=os.path.join(tmp, prefix), minloglevel=2,
                                   add_dummy_prefix=False, remove_extra_whitespaces=False, **kw)
    m = pb.ModelProto()
    with open(os.path.join(tmp, prefix + ".model"), "rb") as f:
        m.ParseFromString(f.read())
    return m


def control_encoder(sp, m):
    """ids of a text: control pieces matched first (leftmost, longest), SentencePiece between them"""
    control = {p.piece: i for i, p in enumerate(m.pieces) if p.type == pb.ModelProto.SentencePiece.CONTROL}
    pat = re.compile("|".join(re.escape(c) for c in sorted(control, key=len, reverse=True)))

    def encode(text):
        ids, at = [], 0
        for mt in pat.finditer(text):
            ids += sp.encode(text[at:mt.start()]) + [control[mt.group()]]
            at = mt.end()
        return ids + sp.encode(text[at:]), at > 0
    return encode


def cases_of(sp, m, texts):
    encode = control_encoder(sp, m)
    cases = []
    for name, b in texts:
        text = b.decode("utf-8", errors="replace")
        ids, has_ctl = encode(text)
        case = {"name": name, "bytes_hex": b.hex(), "ids": ids}
        if not has_ctl:
            case["decoded_hex"] = sp.decode(ids).encode().hex()
        cases.append(case)
    return cases


def gemma3(path, normalizer, fixture_texts, gpl):
    from gguf import GGUFReader
    f = GGUFReader(path).fields
    toks = [bytes(f["tokenizer.ggml.tokens"].parts[i]).decode("utf-8") for i in f["tokenizer.ggml.tokens"].data]
    scores = [float(f["tokenizer.ggml.scores"].parts[i][0]) for i in f["tokenizer.ggml.scores"].data]
    types = [int(f["tokenizer.ggml.token_type"].parts[i][0]) for i in f["tokenizer.ggml.token_type"].data]
    unk = int(f["tokenizer.ggml.unknown_token_id"].parts[-1][0])
    m = pb.ModelProto()
    m.trainer_spec.model_type = pb.TrainerSpec.BPE
    m.trainer_spec.byte_fallback = True
    m.trainer_spec.unk_id = unk
    m.trainer_spec.bos_id = int(f["tokenizer.ggml.bos_token_id"].parts[-1][0])
    m.trainer_spec.eos_id = int(f["tokenizer.ggml.eos_token_id"].parts[-1][0])
    m.trainer_spec.pad_id = int(f["tokenizer.ggml.padding_token_id"].parts[-1][0])
    m.normalizer_spec.CopyFrom(normalizer)
    for i, (t, s, ty) in enumerate(zip(toks, scores, types)):
        p = m.pieces.add()
        p.piece, p.score, p.type = t, s, pb.ModelProto.SentencePiece.UNKNOWN if i == unk else ty
    sp = spm.SentencePieceProcessor(model_proto=m.SerializeToString())
    texts = [(n, b) for n, b in fixture_texts if b"\0" not in b]  # the test passes each text as an argument
    texts += [("space_runs", b"a  b   c    d     e\n\n\n  f   \n    g"),
              ("chat_turn", b"<start_of_turn>user\nWho invented printing?<end_of_turn>\n<start_of_turn>model\n"),
              ("golden_prompt", b"The printing press was invented by Johannes Gutenberg around"),
              ("html_tabs", b"<table><tr><td>a</td></tr></table>\n\t\tif x:\n\t\t\treturn <b>y</b>"),
              ("long_space_runs", b"x" + b" " * 20 + b"y" + b" " * 40 + b"z" + b" " * 16 + b"w"),
              ("gpl3_head", gpl[:3000].encode())]
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    out = {"generator": "tests/tokenizer/gen_spm.py --gemma3", "versions": {"sentencepiece": spm.__version__},
           "source": os.path.basename(path), "sha256": h.hexdigest(), "cases": cases_of(sp, m, texts)}
    with open(os.path.join(HERE, "gemma3_270m.json"), "w") as fo:
        json.dump(out, fo, ensure_ascii=False, separators=(",", ":"))
        fo.write("\n")
    print(f"gemma3_270m.json: {len(toks)} pieces, {len(out['cases'])} texts, "
          f"{sum(len(c['ids']) for c in out['cases'])} ids")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gemma3", help="Gemma 3 270M's GGUF: also write gemma3_270m.json")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        m = train(tmp, "bpe", model_type="bpe", vocab_size=700, byte_fallback=True, split_digits=True,
                  character_coverage=1.0, user_defined_symbols=["\n", "\n\n", "  ", "   ", "    "],
                  control_symbols=[CTL])
        with open(os.path.join(tmp, "rule.tsv"), "w") as f:
            f.write("20\t2581\n")
        rule = train(tmp, "rule", model_type="unigram", vocab_size=200,
                     normalization_rule_tsv=os.path.join(tmp, "rule.tsv"))
    m.normalizer_spec.CopyFrom(rule.normalizer_spec)
    m.normalizer_spec.escape_whitespaces = False
    for p in m.pieces:
        if p.type == pb.ModelProto.SentencePiece.NORMAL:
            p.score = float(32 * (int(p.score) // 32))
    sp = spm.SentencePieceProcessor(model_proto=m.SerializeToString())
    fx = json.load(open(os.path.join(HERE, "fixture.json")))
    texts = [(c["name"], bytes.fromhex(c["bytes_hex"])) for c in fx["cases"]]
    gpl = open(GPL, encoding="utf-8").read()
    paras = [re.sub(r"\s+", " ", q).strip() for q in re.split(r"\n\s*\n", gpl)]
    texts += [("space_runs", b"a  b   c    d     e\n\n\n  f   \n    g"),
              ("control", f"{CTL}Terms{CTL}  and {CTL}{CTL}conditions{CTL}".encode()),
              ("bos_eos_text", b"<s>begin</s> end"),
              ("gpl3_head", gpl[:2500].encode()),
              ("gpl3_paragraphs", "\n\n".join(p for p in paras[:24] if p).encode())]
    fixture_texts = list(texts)
    cases = cases_of(sp, m, texts)
    out = {
        "generator": "tests/tokenizer/gen_spm.py",
        "versions": {"sentencepiece": spm.__version__},
        "source": "SentencePiece BPE trained on " + GPL,
        "bos_id": sp.bos_id(), "eos_id": sp.eos_id(), "unk_id": sp.unk_id(),
        "pieces": [[p.piece, p.score, int(p.type)] for p in m.pieces],
        "cases": cases,
    }
    with open(os.path.join(HERE, "spm_tiny.json"), "w") as f:
        json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"spm_tiny.json: {len(m.pieces)} pieces, {len(cases)} texts, "
          f"{sum(len(c['ids']) for c in cases)} ids")
    if args.gemma3:
        gemma3(args.gemma3, m.normalizer_spec, fixture_texts[:50], gpl)


if __name__ == "__main__":
    main()
