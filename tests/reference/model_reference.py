#!/usr/bin/python3
"""Independent float64 reference of both model families, written from docs/design/TOKENFORMER.md
(sections 1-3) without looking at the C++ engine. Reads DIR/meta.json and DIR/weights.bin
written by tests/plugins/test_reference.cpp, computes logits, the mean cross-entropy loss
and the gradient of every parameter with Python torch, and writes DIR/reference.bin:
logits, loss, then each gradient in the order of meta["params"], all float64.
"""
import json
import math
import sys

import numpy as np
import torch

torch.set_default_dtype(torch.float64)


def gelu(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def layer_norm(x, weight, bias, eps):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    y = (x - mean) / torch.sqrt(var + eps)
    if weight is not None:
        y = y * weight + bias
    return y


def pattention(x, keys, values, norm, n0, eps):
    s = x @ keys.T
    if norm == "l2_gelu":
        a = gelu(math.sqrt(n0) * s / torch.sqrt((s * s).sum(-1, keepdim=True) + eps))
    elif norm == "gelu_l2":
        g = gelu(s)
        a = math.sqrt(n0) * g / torch.sqrt((g * g).sum(-1, keepdim=True) + eps)
    elif norm == "gelu_l1":
        g = gelu(s)
        a = n0 * g / (g.abs().sum(-1, keepdim=True) + eps)
    else:
        e = torch.exp(s - s.max(-1, keepdim=True).values)
        a = n0 * e / e.sum(-1, keepdim=True)
    return a @ values


def rotate(x, dims, base):
    """Rotary on the first `dims` dims of x (B, H, T, dh), pairing j with j + dims/2."""
    if dims == 0:
        return x
    T, half = x.shape[2], dims // 2
    inv = torch.tensor([base ** (-2.0 * i / dims) for i in range(half)])
    ang = torch.arange(T).double()[:, None] * inv[None, :]
    cos, sin = torch.cos(ang), torch.sin(ang)
    x1, x2, rest = x[..., :half], x[..., half:dims], x[..., dims:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], -1)


def attend(q, k, v, heads, dims, base):
    B, T, width = q.shape
    dh = width // heads
    split = lambda t: t.view(B, T, heads, dh).transpose(1, 2)
    q, k, v = rotate(split(q), dims, base), rotate(split(k), dims, base), split(v)
    scores = q @ k.transpose(-1, -2) / math.sqrt(dh)
    scores = scores.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
    return (torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(B, T, width)


def forward(meta, p, ids):
    m = meta["model"]
    L, heads = m["layers"], m["heads"]
    eps = m["layernorm"]["eps"]
    x = p["embedding"][ids]
    if meta["family"] == "tokenformer":
        dh = m["d"] // heads
        dims = int(dh * m["rotary_pct"]) // 2 * 2
        norm, peps = m["pattention"]["norm"], m["pattention"]["eps"]
        affine = m["layernorm"]["affine"]
        for i in range(L):
            P = lambda name, h: pattention(h, p[f"layers.{i}.{name}.keys"], p[f"layers.{i}.{name}.values"],
                                           norm, p[f"layers.{i}.{name}.keys"].shape[0], peps)
            ln = lambda h, which: layer_norm(h, p.get(f"layers.{i}.{which}.weight") if affine else None,
                                             p.get(f"layers.{i}.{which}.bias") if affine else None, eps)
            h = ln(x, "attn_norm")
            x = x + P("o", attend(P("q", h), P("k", h), P("v", h), heads, dims, m["rotary_base"]))
            x = x + P("ffn", ln(x, "ffn_norm"))
    else:
        dims = int(m["head_dim"] * m["rotary_pct"]) // 2 * 2
        for i in range(L):
            lin = lambda name, h: h @ p[f"layers.{i}.{name}.weight"].T + p.get(f"layers.{i}.{name}.bias", 0.0)
            ln = lambda h, which: layer_norm(h, p[f"layers.{i}.{which}.weight"], p[f"layers.{i}.{which}.bias"], eps)
            h = ln(x, "attn_norm")
            x = x + lin("o", attend(lin("q", h), lin("k", h), lin("v", h), heads, dims, m["rotary_base"]))
            x = x + lin("ffn_down", gelu(lin("ffn_up", ln(x, "ffn_norm"))))
    h = layer_norm(x, p["final_norm.weight"], p["final_norm.bias"], eps)
    return h @ p["embedding"].T


def main(folder):
    meta = json.load(open(f"{folder}/meta.json"))
    flat = np.fromfile(f"{folder}/weights.bin", dtype="<f8")
    params, offset = {}, 0
    for item in meta["params"]:
        count = int(np.prod(item["shape"]))
        params[item["name"]] = torch.tensor(flat[offset:offset + count].reshape(item["shape"]), requires_grad=True)
        offset += count
    ids = torch.tensor(meta["ids"])
    targets = torch.tensor(meta["targets"])
    logits = forward(meta, params, ids)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
    loss.backward()
    out = [logits.detach().reshape(-1), loss.detach().reshape(1)]
    out += [params[item["name"]].grad.reshape(-1) for item in meta["params"]]
    torch.cat(out).numpy().astype("<f8").tofile(f"{folder}/reference.bin")


if __name__ == "__main__":
    main(sys.argv[1])
