"""Zero-init Pattention growth, as a tfw growth script (docs/growth.md, "Growth by script").

Appends parameter tokens to every Pattention of a Tokenformer's blocks: zero keys and values
drawn from N(0, value_std). A zero key scores 0 and GELU(0) = 0, so the new tokens add nothing
to the normaliser nor to the output: the grown model computes what the parent computed.

Its built-in twin is `pattention_grow` with its default options. This script draws the new
values from the same generator, seeded alike, in the same order (layer by layer: q, k, v, o,
ffn), so the two grow bit-identical models.
"""
import argparse
import json

import torch
from safetensors.torch import load_file, save_file

parser = argparse.ArgumentParser()
for flag in ("--parent", "--from", "--to", "--options", "--out"):
    parser.add_argument(flag, required=True)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()
with open(args.to) as f:
    target = json.load(f)
with open(args.options) as f:
    options = json.load(f)
model = target["model"]
if target["family"] != "tokenformer":
    raise SystemExit(f"this script grows tokenformer models, not {target['family']}")
value_std = float(options.get("value_std", model["init"]["value_std"]))

tensors = load_file(args.parent)
generator = torch.Generator().manual_seed(args.seed)
added = 0
for layer in range(model["layers"]):
    for projection in ("q", "k", "v", "o", "ffn"):
        name = f"layers.{layer}.{projection}"
        keys, values = tensors[name + ".keys"], tensors[name + ".values"]
        m = target["tensors"][name + ".keys"]["shape"][0] - keys.shape[0]
        if m < 0:
            raise SystemExit(f"{name}: the target has fewer tokens than the parent")
        if m == 0:
            continue
        new_values = torch.randn(m, values.shape[1], generator=generator, dtype=torch.float64) * value_std
        tensors[name + ".keys"] = torch.cat([keys, torch.zeros(m, keys.shape[1], dtype=keys.dtype)])
        tensors[name + ".values"] = torch.cat([values, new_values.to(values.dtype)])
        added += m
save_file(tensors, args.out)

norm = model["pattention"]["norm"]
exact = norm != "softmax" and model["pattention"]["tau"] == "fixed"
changes = [f"{added} parameter tokens appended: zero keys, values from N(0, {value_std})"]
print(json.dumps({"exact": exact, "changes": changes}))
