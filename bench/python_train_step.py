#!/usr/bin/python3
"""An independent Python (torch) implementation of both model families for the training
throughput benchmark: reads a tfw run config (TOML), builds the same model (docs/design/TOKENFORMER.md
sections 1-3) as torch.nn modules, and times AdamW training steps on random token windows
with the same batch size, sequence length and thread count. Prints one JSON line.

Usage: python_train_step.py CONFIG.toml [--steps N] [--threads N]
"""
import argparse
import json
import math
import time
import tomllib

import torch
import torch.nn as nn
import torch.nn.functional as F


class Pattention(nn.Module):
    def __init__(self, d_in, d_out, n, value_std, norm="l2_gelu"):
        super().__init__()
        self.keys = nn.Parameter(torch.randn(n, d_in) * 0.02)
        self.values = nn.Parameter(torch.randn(n, d_out) * value_std)
        self.tau = math.sqrt(n)
        self.n = n
        self.norm = norm

    def forward(self, x):
        s = x @ self.keys.T
        if self.norm == "l2_gelu":
            a = F.gelu(s * (self.tau * torch.rsqrt((s * s).sum(-1, keepdim=True) + 1e-6)))
        elif self.norm == "softmax":
            a = torch.softmax(s, -1) * self.n
        else:
            raise SystemExit(f"norm {self.norm} not in the benchmark reference")
        return a @ self.values


def rotary(x, dims, base=10000.0):
    if dims == 0:
        return x
    T, half = x.shape[-2], dims // 2
    inv = base ** (-torch.arange(0, dims, 2, dtype=torch.float64) / dims)
    ang = torch.outer(torch.arange(T, dtype=torch.float64), inv)
    cos = torch.cat([ang.cos(), ang.cos()], -1).to(x.dtype)
    sin = torch.cat([ang.sin(), ang.sin()], -1).to(x.dtype)
    r, rest = x[..., :dims], x[..., dims:]
    rh = torch.cat([-r[..., half:], r[..., :half]], -1)
    return torch.cat([r * cos + rh * sin, rest], -1)


class Block(nn.Module):
    def __init__(self, m, family, L):
        super().__init__()
        d, self.heads = m["d"], m["heads"]
        if family == "tokenformer":
            vs = m.get("init", {}).get("value_std", 2.0 / (L * math.sqrt(d)))
            norm = m.get("pattention", {}).get("norm", "l2_gelu")
            P = lambda n: Pattention(d, d, n, vs, norm)
            self.q, self.k, self.v, self.o = (P(m["n_attn"]) for _ in range(4))
            self.ffn = P(m["n_ffn"])
            affine = m.get("layernorm", {}).get("affine", False)
            self.n1 = nn.LayerNorm(d, elementwise_affine=affine)
            self.n2 = nn.LayerNorm(d, elementwise_affine=affine)
            self.dh = d // self.heads
        else:
            self.dh = m.get("head_dim", d // self.heads)
            w = self.heads * self.dh
            ff = m.get("d_ffn", 4 * d)
            self.q, self.k, self.v = (nn.Linear(d, w, bias=False) for _ in range(3))
            self.o = nn.Linear(w, d, bias=False)
            up, down = nn.Linear(d, ff, bias=False), nn.Linear(ff, d, bias=False)
            self.ffn = lambda h: down(F.gelu(up(h)))
            self.up, self.down = up, down
            self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.rot = int(self.dh * m.get("rotary_pct", 0.25)) // 2 * 2

    def forward(self, x):
        B, T, _ = x.shape
        h = self.n1(x)
        split = lambda t: t.view(B, T, self.heads, self.dh).transpose(1, 2)
        q, k, v = rotary(split(self.q(h)), self.rot), rotary(split(self.k(h)), self.rot), split(self.v(h))
        s = (q @ k.transpose(-1, -2)) / math.sqrt(self.dh)
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        a = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, T, -1)
        x = x + self.o(a)
        return x + self.ffn(self.n2(x))


class LM(nn.Module):
    def __init__(self, config):
        super().__init__()
        m, family = config["model"], config["family"]
        self.emb = nn.Parameter(torch.randn(m["vocab"], m["d"]) * 0.02)
        self.blocks = nn.ModuleList(Block(m, family, m["layers"]) for _ in range(m["layers"]))
        self.final = nn.LayerNorm(m["d"])

    def forward(self, ids):
        x = self.emb[ids]
        for block in self.blocks:
            x = block(x)
        return self.final(x) @ self.emb.T


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("config")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    with open(args.config, "rb") as f:
        config = tomllib.load(f)
    torch.set_num_threads(args.threads or torch.get_num_threads())
    torch.manual_seed(0)
    model = LM(config)
    train = config.get("train", {})
    B, T, V = train.get("batch_size", 16), train.get("seq_len", 0) or config["model"].get("seq_len", 1024), config["model"]["vocab"]
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=train.get("lr", 6e-4), betas=(0.9, 0.95), eps=1e-8)
    params = list(model.parameters())

    def step():
        ids = torch.randint(V, (B, T + 1))
        opt.zero_grad()
        loss = F.cross_entropy(model(ids[:, :T]).reshape(-1, V), ids[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()

    step()  # warm up
    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    times.sort()
    median = times[len(times) // 2]
    print(json.dumps({"config": args.config, "threads": torch.get_num_threads(),
                      "parameters": sum(p.numel() for p in params),
                      "tokens_per_second": B * T / median, "step_seconds": median}))


if __name__ == "__main__":
    main()
