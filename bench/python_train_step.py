#!/usr/bin/python3
"""An independent Python (torch) implementation of both model families for the training
throughput benchmark: reads a tfw run config (TOML), builds the same model (docs/design/TOKENFORMER.md
sections 1-3) as torch.nn modules, and times AdamW training steps on random token windows
with the same batch size, sequence length and thread count. Prints one JSON line.

On a GPU (--device cuda) it is the comparator of bench/gpu_vs_pytorch.sh, written as the field
trains: attention by F.scaled_dot_product_attention (causal), AdamW fused, bf16 autocast
(--precision bf16), and torch.compile with --compile. Each timed step is measured with CUDA
events (the median), and the window of timed steps as a whole with the device synchronised at
both ends (the mean). FLOPs per token by the count llm.c and nanoGPT use: 6N + 6LCT (N every
parameter, the tied embedding once; L layers, C the width, T the sequence length).

Usage: python_train_step.py CONFIG.toml [--steps N] [--threads N] [--device cpu|cuda]
       [--precision fp32|bf16] [--compile] [--sdpa] [--skip N] [--batch-size N]
"""
import argparse
import json
import math
import resource
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
    inv = base ** (-torch.arange(0, dims, 2, dtype=torch.float64, device=x.device) / dims)
    ang = torch.outer(torch.arange(T, dtype=torch.float64, device=x.device), inv)
    cos = torch.cat([ang.cos(), ang.cos()], -1).to(x.dtype)
    sin = torch.cat([ang.sin(), ang.sin()], -1).to(x.dtype)
    r, rest = x[..., :dims], x[..., dims:]
    rh = torch.cat([-r[..., half:], r[..., :half]], -1)
    return torch.cat([r * cos + rh * sin, rest], -1)


class Block(nn.Module):
    def __init__(self, m, family, L, sdpa=False):
        super().__init__()
        self.sdpa = sdpa
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
        if self.sdpa:
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            s = (q @ k.transpose(-1, -2)) / math.sqrt(self.dh)
            s = s.masked_fill(torch.ones(T, T, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
            a = torch.softmax(s, -1) @ v
        a = a.transpose(1, 2).reshape(B, T, -1)
        x = x + self.o(a)
        return x + self.ffn(self.n2(x))


class LM(nn.Module):
    def __init__(self, config, sdpa=False):
        super().__init__()
        m, family = config["model"], config["family"]
        self.emb = nn.Parameter(torch.randn(m["vocab"], m["d"]) * 0.02)
        self.blocks = nn.ModuleList(Block(m, family, m["layers"], sdpa) for _ in range(m["layers"]))
        self.final = nn.LayerNorm(m["d"])

    def forward(self, ids):
        x = self.emb[ids]
        for block in self.blocks:
            x = block(x)
        return self.final(x) @ self.emb.T


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("config")
    parser.add_argument("--steps", type=int, default=10, help="timed steps")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--compile", action="store_true", help="torch.compile the model")
    parser.add_argument("--sdpa", action="store_true", help="F.scaled_dot_product_attention (always on CUDA)")
    parser.add_argument("--skip", type=int, default=1, help="steps before the timed ones (warm-up, compilation)")
    parser.add_argument("--batch-size", type=int, default=0, help="instead of the config's train.batch_size")
    args = parser.parse_args()
    with open(args.config, "rb") as f:
        config = tomllib.load(f)
    torch.set_num_threads(args.threads or torch.get_num_threads())
    torch.manual_seed(0)
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    model = LM(config, sdpa=args.sdpa or cuda).to(device)
    train = config.get("train", {})
    m = config["model"]
    B = args.batch_size or train.get("batch_size", 16)
    T, V = train.get("seq_len", 0) or m.get("seq_len", 1024), m["vocab"]
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=train.get("lr", 6e-4), betas=(0.9, 0.95), eps=1e-8, fused=cuda or None)
    params = list(model.parameters())
    forward = torch.compile(model) if args.compile else model
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.precision == "bf16")

    def step():
        ids = torch.randint(V, (B, T + 1), device=device)
        opt.zero_grad(set_to_none=True)
        with autocast:
            logits = forward(ids[:, :T])
        loss = F.cross_entropy(logits.float().reshape(-1, V), ids[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()

    sync = torch.cuda.synchronize if cuda else (lambda: None)
    setup_start = time.perf_counter()
    for _ in range(args.skip):
        step()  # warm up (and compile)
    sync()
    warmup_seconds = time.perf_counter() - setup_start
    times = []
    window_start = time.perf_counter()
    if cuda:
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(args.steps)]
        for start, end in events:
            start.record()
            step()
            end.record()
        sync()
        times = [start.elapsed_time(end) / 1e3 for start, end in events]
    else:
        for _ in range(args.steps):
            start = time.perf_counter()
            step()
            times.append(time.perf_counter() - start)
    mean = (time.perf_counter() - window_start) / args.steps
    times.sort()
    median = times[len(times) // 2]
    N = sum(p.numel() for p in params)
    flops_per_step = (6 * N + 6 * m["layers"] * m["d"] * T) * B * T
    print(json.dumps({"config": args.config, "threads": torch.get_num_threads(), "device": str(device),
                      "precision": args.precision, "compiled": args.compile, "sdpa": args.sdpa or cuda,
                      "parameters": N, "batch_size": B, "seq_len": T,
                      "tokens_per_second": B * T / median, "step_seconds": median, "mean_step_seconds": mean,
                      "timed_steps": args.steps, "skipped_steps": args.skip, "warmup_seconds": warmup_seconds,
                      "flops_per_step_6n": flops_per_step,
                      # the most memory held: the CUDA caching allocator's peak for tensors, or
                      # the process's peak resident set on the CPU (as tfw reports it)
                      "peak_memory_bytes": torch.cuda.max_memory_allocated(device) if cuda
                      else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                      "gpu": torch.cuda.get_device_name(device) if cuda else None}))


if __name__ == "__main__":
    main()
