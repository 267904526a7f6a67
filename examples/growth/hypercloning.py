"""HyperCloning (Samragh et al. 2024), as a tfw growth script (docs/growth.md, "Growth by script").

Widens a Transformer by integer multipliers: k for the width d (heads are replicated whole) and m
for the FFN width. A matrix (out, in) whose output grows r times and input c times becomes its
tiling divided by c; biases and norms tile; the tied embedding tiles undivided and the final norm
is divided by k, so every residual vector of the grown model is the parent's repeated k times and
the logits stay the parent's. Optional cancelling noise (noise = true, snr_db) on pairs of column
blocks breaks the symmetry and keeps the function. Its built-in twin is `hypercloning`; with
noise = false the two grow bit-identical models (the noise is drawn by another generator).
"""
import argparse
import json

import numpy as np
from safetensors.numpy import load_file, save_file

parser = argparse.ArgumentParser()
for flag in ("--parent", "--from", "--to", "--options", "--out"):
    parser.add_argument(flag, required=True)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()
(parent, target, options) = (json.load(open(path)) for path in (args.__dict__["from"], args.to, args.options))
small, big = parent["model"], target["model"]
k, m = big["d"] // small["d"], big["d_ffn"] // small["d_ffn"]
if k * small["d"] != big["d"] or m * small["d_ffn"] != big["d_ffn"] or big["heads"] != k * small["heads"]:
    raise SystemExit("hypercloning needs integer multipliers of d and d_ffn, and heads multiplied with d")
noise, snr_db = bool(options.get("noise", False)), float(options.get("snr_db", 10.0))
rng = np.random.default_rng(args.seed)


def clone_matrix(w, r, c):
    grown = np.tile(w, (r, c)) / np.float32(c)
    out, cols = w.shape
    for i in range(r if noise else 0):
        for j in range(0, c - 1, 2):
            a = grown[i * out:(i + 1) * out, j * cols:(j + 1) * cols]
            power = np.mean(a.astype(np.float64) ** 2) / 10 ** (snr_db / 10)
            n = (rng.standard_normal(a.shape) * np.sqrt(power)).astype(w.dtype)
            grown[i * out:(i + 1) * out, j * cols:(j + 1) * cols] += n
            grown[i * out:(i + 1) * out, (j + 1) * cols:(j + 2) * cols] -= n
    return grown


grown = {}
for name, w in load_file(args.parent).items():
    if name == "embedding":
        grown[name] = np.tile(w, (1, k))
    elif name.startswith("final_norm."):
        grown[name] = np.tile(w, k) / np.float32(k)
    elif name.endswith(("norm.weight", "norm.bias")):
        grown[name] = np.tile(w, k)
    elif name.endswith(".weight"):
        grown[name] = clone_matrix(w, m if name.endswith("ffn_up.weight") else k, m if name.endswith("ffn_down.weight") else k)
    else:
        grown[name] = np.tile(w, m if name.endswith("ffn_up.bias") else k)
save_file(grown, args.out)
print(json.dumps({"exact": True, "changes": [f"width x{k}, heads x{k}, FFN width x{m}" + (f", noise at {snr_db} dB" if noise else "")]}))
