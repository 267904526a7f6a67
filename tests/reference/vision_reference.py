#!/usr/bin/python3
"""Independent float64 reference of the image families (vit, vision_tokenformer), written from
docs/design/VISION.md without the C++ engine's code; GELU, LayerNorm and Pattention (TOKENFORMER.md
section 1) are the language-model reference's (model_reference.py, beside this file).
Reads DIR/meta.json and DIR/weights.bin written by tests/plugins/test_vision.cpp, computes the logits (B, K), the mean cross-entropy over the labels and the gradient of every
parameter with Python torch, and writes DIR/reference.bin: logits, loss, then each gradient in
the order of meta["params"], all float64.
"""
import json
import math
import sys

import numpy as np
import torch

from model_reference import gelu, layer_norm, pattention

torch.set_default_dtype(torch.float64)


def patches(images, p):
    """(B, C, H, W) -> (B, rows*cols, C*p*p): patches row by row, each as channel, row, column."""
    B, C, H, W = images.shape
    out = []
    for r in range(H // p):
        for c in range(W // p):
            out.append(images[:, :, r * p:(r + 1) * p, c * p:(c + 1) * p].reshape(B, C * p * p))
    return torch.stack(out, 1)


def attention(q, k, v, heads):
    B, T, width = q.shape
    dh = width // heads
    outs = []
    for h in range(heads):
        sl = slice(h * dh, (h + 1) * dh)
        w = torch.softmax(q[..., sl] @ k[..., sl].transpose(1, 2) / math.sqrt(dh), -1)
        outs.append(w @ v[..., sl])
    return torch.cat(outs, -1)


def forward(m, P, images):
    eps = m["layernorm"]["eps"]
    tokenformer = "n_attn" in m

    def project(name, x):
        if name + ".keys" in P:
            n0 = P[name + ".keys"].shape[0]
            pt = m["pattention"]
            return pattention(x, P[name + ".keys"], P[name + ".values"], pt["norm"], n0, pt["eps"])
        return x @ P[name + ".weight"].T + P[name + ".bias"]

    def norm(name, x):
        return layer_norm(x, P.get(name + ".weight"), P.get(name + ".bias"), eps)

    x = project("patch_embed", patches(images, m["patch"]))
    if m["pool"] == "cls":
        x = torch.cat([P["cls_token"].expand(x.shape[0], 1, -1), x], 1)
    x = x + P["position"]
    for i in range(m["layers"]):
        pre = "layers.%d." % i
        h = norm(pre + "attn_norm", x)
        x = x + project(pre + "o", attention(project(pre + "q", h), project(pre + "k", h), project(pre + "v", h),
                                              m["heads"]))
        h = norm(pre + "ffn_norm", x)
        if tokenformer:
            x = x + project(pre + "ffn", h)
        else:
            x = x + project(pre + "ffn_down", gelu(project(pre + "ffn_up", h)))
    x = norm("final_norm", x)
    pooled = x[:, 0] if m["pool"] == "cls" else x.mean(1)
    return project("head", pooled)


def main(folder):
    meta = json.load(open(folder + "/meta.json"))
    raw = np.fromfile(folder + "/weights.bin", dtype=np.float64)
    P, offset = {}, 0
    for p in meta["params"]:
        n = int(np.prod(p["shape"])) if p["shape"] else 1
        P[p["name"]] = torch.tensor(raw[offset:offset + n].reshape(p["shape"]), requires_grad=True)
        offset += n
    images = torch.tensor(meta["images"])
    labels = torch.tensor(meta["labels"])
    logits = forward(meta["model"], P, images)
    loss = torch.nn.functional.cross_entropy(logits, labels)
    loss.backward()
    out = [logits.detach().reshape(-1), loss.detach().reshape(1)]
    for p in meta["params"]:
        g = P[p["name"]].grad
        out.append(torch.zeros(P[p["name"]].shape).reshape(-1) if g is None else g.reshape(-1))
    torch.cat(out).numpy().tofile(folder + "/reference.bin")


if __name__ == "__main__":
    main(sys.argv[1])
