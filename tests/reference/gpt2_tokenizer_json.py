#!/usr/bin/env python3
"""Writes GPT-2's tokenizer (gpt2.tiktoken, GPT-2's BPE ranks from the PyPI package
openai-whisper, or GPT-2's original encoder.json and vocab.bpe) in the Hugging Face
tokenizer.json form, as the `tokenizers` library saves a byte-level BPE: model.type
BPE with model.vocab and model.merges, a ByteLevel pre-tokenizer, and <|endoftext|> (50256) as
an added special token. Written from the format's documentation, without the library.

    gpt2_tokenizer_json.py GPT2_DIR OUT.json [--merge-pairs] [--nfc]

--merge-pairs writes merges as ["a", "b"] pairs (tokenizers >= 0.20) instead of "a b" strings;
--nfc adds an NFC normaliser (as GPT-NeoX-20B's tokenizer.json has).
"""
import base64
import json
import os
import sys


def byte_symbols():
    """GPT-2's byte map: printable bytes stand for themselves, the rest for 256, 257, ..."""
    printable = set(range(ord("!"), ord("~") + 1)) | set(range(0xA1, 0xAD)) | set(range(0xAE, 0x100))
    symbols, shifted = {}, 0
    for b in range(256):
        if b in printable:
            symbols[b] = chr(b)
        else:
            symbols[b] = chr(256 + shifted)
            shifted += 1
    return symbols


def from_tiktoken(path):
    """The vocabulary and merges of a .tiktoken rank file. A token's rank is its id and the order
    of the merge that made it; its merge is what BPE on its own bytes leaves when only lower
    ranks may merge."""
    ranks = {}
    with open(path, "rb") as f:
        for line in f.read().splitlines():
            if line:
                token, rank = line.split()
                ranks[base64.b64decode(token)] = int(rank)
    symbols = byte_symbols()
    text = lambda token: "".join(symbols[b] for b in token)
    vocab, pairs = {}, []
    for token, rank in sorted(ranks.items(), key=lambda item: item[1]):
        vocab[text(token)] = rank
        if len(token) == 1:
            continue
        parts = [bytes([b]) for b in token]
        while len(parts) > 2:
            found = [(ranks[a + b], i) for i, (a, b) in enumerate(zip(parts, parts[1:])) if ranks.get(a + b, rank) < rank]
            if not found:
                break
            _, i = min(found)
            parts[i:i + 2] = [parts[i] + parts[i + 1]]
        assert len(parts) == 2, f"rank {rank} is not a merge of two lower ranks"
        pairs.append((text(parts[0]), text(parts[1])))
    vocab["<|endoftext|>"] = len(vocab)
    return vocab, pairs


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    directory, out = argv[1], argv[2]
    if os.path.exists(f"{directory}/gpt2.tiktoken"):
        vocab, pairs = from_tiktoken(f"{directory}/gpt2.tiktoken")
    else:
        with open(f"{directory}/encoder.json", encoding="utf-8") as f:
            vocab = json.load(f)
        pairs = []
        with open(f"{directory}/vocab.bpe", encoding="utf-8") as f:
            for line in f.read().split("\n"):
                if not line or line.startswith("#version"):
                    continue
                first, second = line.split(" ")
                pairs.append((first, second))
    merges = [[a, b] if "--merge-pairs" in argv else f"{a} {b}" for a, b in pairs]
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
