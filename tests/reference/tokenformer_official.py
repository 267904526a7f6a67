#!/usr/bin/env python3
"""Writes a small random TokenFormer in the exact file layout of an official release, and its
logits from an independent implementation of the official forward pass.

The layout and the forward pass are read from the official code (Haiyang-W/TokenFormer,
megatron/model/tokenformer.py, tokenformer_model.py, norms.py, positional_embeddings.py) and
its configs (configs/tokenformer/150M_eval.yml); nothing is imported from it. What it writes:

  OUT/pytorch_model.bin   torch.save of the model's state dict, as the release's own
                          (GPT-NeoX pipeline names: tied_modules.embed.word_embeddings.weight,
                          2..L+1 for the layers, L+3 for the final norm), or with --layout
                          sequential as NeoX's sequential module names it (sequential.N...).
  OUT/model_eval.yml      the NeoX config, in the style of the release's *_eval.yml
                          (JSON-like YAML with # comments and Python booleans).
  OUT/expected.json       the input ids and the logits' shape.
  OUT/expected_logits.f64 the logits, float64 little-endian, computed in float64.

    tokenformer_official.py OUT [--layers 2] [--hidden 32] [--heads 4] [--qkv 24] [--ffn 48]
        [--activation l2_norm_gelu|gelu_l2_norm|softmax] [--norm layernorm_nonparam|layernorm]
        [--final-norm layernorm|layernorm_nonparam] [--layout pipe|sequential] [--head-copy]
        [--rotary-pct 0.25] [--vocab 50304] [--tokens 24] [--seed 0] [--drop KEY] [--extra KEY]
        [--untied] [--key-std 1.0]

--key-std sets the parameter keys' spread: with softmax, keys of std 1 make scores so sharp
that float32 itself is off by 5e-3 (the float32 and float64 runs of this very forward pass
differ that much), so the softmax case uses smaller keys.
--head-copy also saves the tied head under index L+4 (equal to the embedding); --untied saves
a different one there; --drop leaves a key out and --extra adds one: for the importer's errors.
"""
import argparse
import json
import math
from collections import OrderedDict

import torch


def layer_norm(x, weight=None, bias=None, eps=1e-5):
    # torch.nn.functional.layer_norm's definition: biased variance over the last dim.
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    y = (x - mean) / torch.sqrt(var + eps)
    if weight is not None:
        y = y * weight + bias
    return y


def gelu(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))  # F.gelu's default (exact)


def pattention(x, keys, values, activation):
    # Pattention.forward and nonlinear_norm_func: scale_factor 1, attn_bias all ones.
    s = x @ keys.t()
    n = s.shape[-1]
    if activation == "softmax":
        e = torch.exp(s)
        a = e / e.abs().sum(-1, keepdim=True) * n
    elif activation == "gelu_l2_norm":
        g = gelu(s)
        a = g / torch.sqrt((g * g).sum(-1, keepdim=True)) * math.sqrt(n)
    else:  # l2_norm_gelu
        a = gelu(s / torch.sqrt((s * s).sum(-1, keepdim=True)) * math.sqrt(n))
    return a @ values


def rotary_tables(seq_len, rotary_ndims, base):
    # RotaryEmbedding._prepare_cache: inverse frequencies, angles and cos/sin in float32.
    inv_freq = 1.0 / (base ** (torch.arange(0, rotary_ndims, 2).float() / rotary_ndims))
    t = torch.arange(seq_len).type_as(inv_freq)
    freqs = torch.einsum("i,j->ij", t, inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().double(), emb.sin().double()


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def forward(ids, w, a):
    """The official forward pass in float64 for one sequence: ids (T,) -> logits (T, V)."""
    L, H, heads = a.layers, a.hidden, a.heads
    dh = H // heads
    rot = int(dh * a.rotary_pct)
    T = ids.shape[0]
    cos, sin = rotary_tables(T, rot, 10000)
    x = w["embed"][ids]                                          # (T, H)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for i in range(L):
        p = w["layers"][i]
        h = layer_norm(x, p.get("ln1_w"), p.get("ln1_b"))
        q = pattention(h, *p["query"], a.activation).view(T, heads, dh)
        k = pattention(h, *p["key"], a.activation).view(T, heads, dh)
        v = pattention(h, *p["value"], a.activation).view(T, heads, dh)
        if rot > 0:
            c, s = cos[:, None, :], sin[:, None, :]
            q = torch.cat((q[..., :rot] * c + rotate_half(q[..., :rot]) * s, q[..., rot:]), -1)
            k = torch.cat((k[..., :rot] * c + rotate_half(k[..., :rot]) * s, k[..., rot:]), -1)
        scores = torch.einsum("thd,shd->hts", q, k) / math.sqrt(dh)  # flash attention's default scale
        scores = scores.masked_fill(~causal, float("-inf"))
        ctx = torch.einsum("hts,shd->thd", torch.softmax(scores, -1), v).reshape(T, H)
        x = x + pattention(ctx, *p["proj"], a.activation)
        h = layer_norm(x, p.get("ln2_w"), p.get("ln2_b"))
        x = x + pattention(h, *p["mlp"], a.activation)
    x = layer_norm(x, w.get("final_w"), w.get("final_b"))
    return x @ w["embed"].t()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--qkv", type=int, default=24)
    parser.add_argument("--ffn", type=int, default=48)
    parser.add_argument("--activation", default="l2_norm_gelu")
    parser.add_argument("--norm", default="layernorm_nonparam")
    parser.add_argument("--final-norm", default="layernorm")
    parser.add_argument("--layout", default="pipe")
    parser.add_argument("--rotary-pct", type=float, default=0.25)
    parser.add_argument("--vocab", type=int, default=50304)
    parser.add_argument("--tokens", type=int, default=24)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--key-std", type=float, default=1.0)
    parser.add_argument("--head-copy", action="store_true")
    parser.add_argument("--untied", action="store_true")
    parser.add_argument("--drop", default="")
    parser.add_argument("--extra", default="")
    a = parser.parse_args()

    g = torch.Generator().manual_seed(a.seed)
    randn = lambda *shape, std: (torch.randn(*shape, generator=g, dtype=torch.float64) * std).float()
    L, H = a.layers, a.hidden
    w = {"embed": randn(a.vocab, H, std=0.5), "layers": []}
    sd = OrderedDict()
    prefix = "sequential." if a.layout == "sequential" else ""
    sd[("sequential.0." if a.layout == "sequential" else "tied_modules.embed.") + "word_embeddings.weight"] = w["embed"]
    for i in range(L):
        at = f"{prefix}{i + 2}."
        p = {}
        if a.norm == "layernorm":
            for name in ("ln1", "ln2"):
                p[name + "_w"] = 1 + randn(H, std=0.2)
                p[name + "_b"] = randn(H, std=0.2)
            sd[at + "input_layernorm.weight"], sd[at + "input_layernorm.bias"] = p["ln1_w"], p["ln1_b"]
        for name, n in (("query", a.qkv), ("key", a.qkv), ("value", a.qkv), ("proj", a.qkv), ("mlp", a.ffn)):
            keys, values = randn(n, H, std=a.key_std), randn(n, H, std=0.3)
            p[name] = (keys, values)
            stem = at + ("mlp." if name == "mlp" else f"attention.{name}.")
            sd[stem + "key_param_tokens"] = keys
            sd[stem + "value_param_tokens"] = values
        if a.norm == "layernorm":
            sd[at + "post_attention_layernorm.weight"], sd[at + "post_attention_layernorm.bias"] = p["ln2_w"], p["ln2_b"]
        w["layers"].append(p)
    if a.final_norm == "layernorm":
        w["final_w"], w["final_b"] = 1 + randn(H, std=0.2), randn(H, std=0.2)
        sd[f"{prefix}{L + 3}.norm.weight"], sd[f"{prefix}{L + 3}.norm.bias"] = w["final_w"], w["final_b"]
    if a.head_copy or a.untied:
        head = w["embed"].clone()
        if a.untied:
            head[0, 0] += 1.0
        sd[f"{prefix}{L + 4}.word_embeddings.weight"] = head
    if a.drop:
        del sd[a.drop]
    if a.extra:
        sd[a.extra] = torch.zeros(3)
    sd._metadata = OrderedDict({"": {"version": 1}})  # as a module's state_dict() carries
    torch.save(sd, f"{a.out}/pytorch_model.bin")

    # The weights as saved (float32), computed with in float64.
    w64 = {"embed": w["embed"].double(), "layers": []}
    for p in w["layers"]:
        w64["layers"].append({k: (tuple(t.double() for t in v) if isinstance(v, tuple) else v.double())
                              for k, v in p.items()})
    for k in ("final_w", "final_b"):
        if k in w:
            w64[k] = w[k].double()
    ids = torch.randint(0, 50257, (a.tokens,), generator=g)
    logits = forward(ids, w64, a)
    with open(f"{a.out}/expected_logits.f64", "wb") as f:
        f.write(logits.contiguous().numpy().astype("<f8").tobytes())
    with open(f"{a.out}/expected.json", "w") as f:
        json.dump({"ids": ids.tolist(), "shape": list(logits.shape)}, f)

    final = f'\n  "final_norm": "{a.final_norm}",'
    with open(f"{a.out}/model_eval.yml", "w") as f:
        f.write(f"""# Small random TokenFormer in the layout of configs/tokenformer/150M_eval.yml
{{
  "pipe_parallel_size": 1,
  "model_parallel_size": 1,

  "num_layers": {L},
  "hidden_size": {H},
  "num_attention_heads": {a.heads},
  "qkv_slot_num": {a.qkv},
  "proj_slot_num": {a.qkv},
  "ffn_slot_num": {a.ffn},
  "seq_length": 64,
  "max_position_embeddings": 64,
  "pos_emb": "rotary",
  "rotary_pct": {a.rotary_pct},
  "no_weight_tying": false,
  "norm": "{a.norm}",{final}
  "gpt_j_residual": false,
  "output_layer_parallelism": "column",
  "use_bias_in_attn_linear": False,

  "attention_config": [[["tokenformer"], {L}]],
  "norm_activation_type": "{a.activation}", # "l2_norm_gelu", "gelu_l2_norm", "softmax"

  "checkpoint_activations": true,
  "eval_ckpt": "./pytorch_model.bin",
  "tokenizer-type": "HFTokenizer",
  "vocab-file": "./tokenizer.json", # from GPT-NeoX 20B
}}
""")


if __name__ == "__main__":
    main()
