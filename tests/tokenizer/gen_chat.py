#!/usr/bin/env python3
"""Writes chat.json: the chat templates the C code recognises (by exact text) and what HF's own Jinja renderer
(transformers.utils.chat_template_utils.render_jinja_template) makes of one-turn conversations with them,
and for the ChatML ones the ids of that text under smollm2.json (HF tokenizers, no added specials).
Run once with /opt/hfenv/bin/python after gen_fixture.py (SmolLM2's template comes from fixture.json)."""
import json
import os
import sys

import transformers
from tokenizers import Tokenizer
from transformers.utils.chat_template_utils import render_jinja_template

HERE = os.path.dirname(os.path.abspath(__file__))

CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
          "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
LLAMA3 = ("{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
          "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + "
          "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}"
          "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
          "{% endif %}")
BOS = {"smollm2": "<|im_start|>", "chatml": "<s>", "llama3": "<|begin_of_text|>"}

CONVERSATIONS = [
    (None, "What is the capital of France?"),
    ("You are a pirate.", "Say hello."),
    (None, "  padded with spaces and a newline\n"),
    ("\tsystem with tab ", "multi\nline\n\nuser text, ünïcödé and 😀"),
    ("", ""),
]


def main():
    fixture = json.load(open(os.path.join(HERE, "fixture.json"), encoding="utf-8"))
    templates = {"smollm2": fixture["smollm2_chat_template"], "chatml": CHATML, "llama3": LLAMA3}
    smol = Tokenizer.from_file(os.path.join(HERE, "smollm2.json"))
    renders = []
    for name, tpl in templates.items():
        for system, user in CONVERSATIONS:
            msgs = ([{"role": "system", "content": system}] if system is not None else []) + \
                   [{"role": "user", "content": user}]
            out, _ = render_jinja_template([msgs], chat_template=tpl, add_generation_prompt=True,
                                           bos_token=BOS[name], eos_token="")
            r = {"template": name, "system": system, "user": user, "bos_token": BOS[name], "text": out[0]}
            if name != "llama3":  # apply_chat_template(tokenize=True) with SmolLM2's tokenizer: no added specials
                r["smollm2_ids"] = smol.encode(out[0], add_special_tokens=False).ids
            renders.append(r)
    with open(os.path.join(HERE, "chat.json"), "w", encoding="utf-8") as f:
        json.dump({"generator": "tests/tokenizer/gen_chat.py",
                   "versions": {"transformers": transformers.__version__, "python": sys.version.split()[0]},
                   "templates": templates, "renders": renders}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("chat.json: %d templates, %d renders" % (len(templates), len(renders)))


if __name__ == "__main__":
    main()
