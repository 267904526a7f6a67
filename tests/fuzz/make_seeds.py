"""Writes the seed corpora of the fuzz targets (tests/fuzz/seeds/TARGET/): valid inputs made
by the real writers (PyPI's safetensors, a tokenizer.json in Hugging Face's layout, the
service's messages) and the hostile inputs of the unit tests. Run once; the files are
committed. Files named regression-* are inputs the fuzzers found (kept by hand, not written
here), so that CI runs each again. usage: make_seeds.py OUT_DIR"""
import json
import os
import struct
import sys

import torch
from safetensors.torch import save

out = sys.argv[1]


def write(target, name, data):
    os.makedirs(os.path.join(out, target), exist_ok=True)
    with open(os.path.join(out, target, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


# safetensors: real files, then the hostile headers of tests/engine/test_safetensors.cpp.
write("safetensors", "two-tensors", save({"w": torch.arange(6, dtype=torch.float32).reshape(2, 3),
                                           "n": torch.tensor([1, -2], dtype=torch.int64)}, metadata={"k": "v"}))
write("safetensors", "every-dtype", save({d: torch.zeros(2, dtype=getattr(torch, t)) for d, t in [
    ("f64", "float64"), ("f32", "float32"), ("f16", "float16"), ("bf16", "bfloat16"), ("i64", "int64"),
    ("i32", "int32"), ("i16", "int16"), ("i8", "int8"), ("u8", "uint8"), ("b", "bool")]}))
write("safetensors", "empty-and-scalar", save({"e": torch.zeros(0, 3), "s": torch.tensor(2.5)}))


def header(obj, data=b""):
    text = json.dumps(obj).encode()
    return struct.pack("<Q", len(text)) + text + data


write("safetensors", "shape-overflow", header({"t": {"dtype": "F32", "shape": [2**62, 4], "data_offsets": [0, 4]}}, b"\0" * 4))
write("safetensors", "overlap", header({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                        "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8))
write("safetensors", "short-record", header({"t": {"dtype": "F32", "shape": [16], "data_offsets": [0, 64]}}, b"\1" * 16))
write("safetensors", "huge-length", b"\xff" * 8 + b"{}")

# tokenizer.json: a small byte-level BPE in Hugging Face's layout, with variants.
byte_symbols = {}
n = 0
for b in range(256):
    if 33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255:
        byte_symbols[b] = chr(b)
    else:
        byte_symbols[b] = chr(256 + n)
        n += 1
vocab = {byte_symbols[b]: i for i, b in enumerate(range(256))}
merges = ["h e", "l l", "he ll", "Ġ w", "o r"]
for m in merges:
    vocab[m.replace(" ", "")] = len(vocab)
tok = {"version": "1.0", "added_tokens": [{"id": len(vocab), "content": "<|endoftext|>", "special": True}],
       "normalizer": None, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
       "model": {"type": "BPE", "vocab": vocab, "merges": merges}}
write("tokenizer_json", "small-bpe", json.dumps(tok))
tok2 = dict(tok, normalizer={"type": "NFC"}, model=dict(tok["model"], merges=[m.split(" ") for m in merges]))
write("tokenizer_json", "nfc-pairs", json.dumps(tok2))
write("tokenizer_json", "empty-added", json.dumps(dict(tok, added_tokens=[{"id": 3, "content": ""}])))
write("tokenizer_json", "big-id", json.dumps(dict(tok, model=dict(tok["model"], vocab=dict(vocab, zz=4294967301)))))
write("tokenizer_json", "deep-merge", '{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [' + "[" * 100 + "]" * 100 + "]}}")

# service messages: the protocol's requests, and nesting past the limit.
for name, message in {
    "hello": {"type": "hello", "version": 1, "token": "t", "id": 7},
    "submit": {"type": "submit", "run": "[model]\nd = 1\n", "name": "x"},
    "jobs": {"type": "jobs", "after": 3},
    "runs": {"type": "runs", "after": 1e300},
    "history": {"type": "history", "run": 1, "cursor": {"points": 3, "events": 1}},
    "record": {"type": "record", "run": 1, "capability": "00", "open_id": "b", "seq": 2,
               "points": [["train/loss", 1, 2, 3.0, 4.0, None]], "events": [[1, "nan", "{}"]]},
    "record_create": {"type": "record_create", "open_id": "b", "record": {"experiment": "e", "name": "n",
                      "family": "tokenformer", "config": "", "seed": 0, "git_commit": "", "host": "h",
                      "parameters": 1, "run_dir": "/x"}},
}.items():
    write("service_message", name, json.dumps(message))
write("service_message", "deep", '{"type":"hello","version":1,"id":' + "[" * 70 + "]" * 70 + "}")

# NeoX configs: the official layout's flow style, with comments, Python literals, trailing commas.
write("neox_config", "eval-yml", """# GPT-NeoX config
{
  "num_layers": 2, "hidden_size": 32, 'num_attention_heads': 4,  # heads
  "attention_config": [[["tokenformer"], 2]],
  "norm": "layernorm_nonparam", "use_bias_in_norms": True, "precision": None,
  "qkv_slot_num": 24, "proj_slot_num": 24, "ffn_slot_num": 48,
  "norm_activation_type": "l2_norm_gelu", # trailing comma next
}
""")
write("neox_config", "deep", '{"attention_config": ' + "[" * 40 + "]" * 40 + "}")
write("neox_config", "strings", "{'a': 'it\\'s', \"b\": \"say \\\"hi\\\"\", 'c': False,}")

# torch.save pickles (data.pkl only; the target supplies storages "0" to "3" of 256 bytes).
import io
import zipfile


def pickle_of(obj):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    archive = zipfile.ZipFile(io.BytesIO(buffer.getvalue()))
    return archive.read([n for n in archive.namelist() if n.endswith("data.pkl")][0])


write("torch_pickle", "state-dict", pickle_of({"w": torch.arange(4.0), "t": torch.zeros(2, 3).t(), "h": torch.ones(2, dtype=torch.float16)}))
write("torch_pickle", "nested", pickle_of({"model": {"a": torch.zeros(3)}, "args": [1, 2.5, "x", None, True], "step": 7}))
write("torch_pickle", "stride0", pickle_of({"w": torch.zeros(1).expand(64)}))
write("torch_pickle", "deep", b"\x80\x02" + b"]" * 5000 + b"a" * 4999 + b".")

# Issue 50's hostile inputs, kept small (libFuzzer reads at most 64 KiB of an input): dicts
# that share their children 40 levels deep (2^40 values when followed), and for the parse-time
# limits a header of 1,000 tensors, a tokenizer.json of 10,000 empty added tokens and a NeoX
# config of 10,000 empty objects (the campaign's were 200k, 1M and 3M).
shared = {"w": torch.zeros(1)}
for _ in range(40):
    shared = {"a": shared, "b": shared}
write("torch_pickle", "shared-40-levels", pickle_of(shared))
header = "{" + ",".join(f'"t{i}":{{"dtype":"U8","shape":[1],"data_offsets":[{i},{i + 1}]}}' for i in range(1000)) + "}"
write("safetensors", "thousand-tensors", struct.pack("<Q", len(header)) + header.encode() + bytes(1000))
write("tokenizer_json", "ten-thousand-objects", '{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a a"]}, '
      '"pre_tokenizer": {"type": "ByteLevel"}, "added_tokens": [' + ",".join(["{}"] * 10000) + "]}")
write("neox_config", "ten-thousand-objects", '{"x": [' + ",".join(["{}"] * 10000) + "]}")

# Whole archives (the target reads an input that starts with "PK" as the .pt file itself): a
# small torch.save file, and one whose deflated data.pkl declares 3.75 GiB inflated in the zip's
# directory (issue 50, finding 8: refused before inflating).
buffer = io.BytesIO()
torch.save({"w": torch.arange(4.0)}, buffer)
write("torch_pickle", "archive", buffer.getvalue())
bomb = io.BytesIO()
with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as archive:
    archive.writestr("archive/data.pkl", b"\x80\x02}q\x00." + b"\x00" * 60000)
    archive.writestr("archive/version", b"3\n")
raw = bytearray(bomb.getvalue())
for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
    at = raw.find(signature)  # the first record is data.pkl, in both the local header and the directory
    raw[at + offset:at + offset + 4] = (0xF0000000).to_bytes(4, "little")
write("torch_pickle", "archive-bomb", bytes(raw))

# Issue 50, finding 4: a bundle line of millions of empty arrays ("[[],[],...]"). No fuzzer
# reads bundles; the count that stops it is json_parse_bounded's, which these two targets
# parse with (at 64 KiB, libFuzzer's -max_len here, some 21,000 arrays).
flood = "[" + "[]," * 21000 + "[]]"
write("tokenizer_json", "empty-arrays", flood)
write("neox_config", "empty-arrays", flood)
