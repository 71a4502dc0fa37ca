"""PyTorch eager on the shape of `go run ./bench`'s MoE figure: a
Mixtral-style decoder (width 256, 4 layers, 8 heads / 2 key/value heads,
8 experts top-2 of SwiGLU width 512, vocabulary 8192, context 128, batch
8), one training iteration (forward, backward, AdamW), float32 on the
CPU, the experts run as transformers' MixtralSparseMoeBlock runs them: a
loop over the experts, each on the tokens routed to it (index_select,
index_add_).

Run with Debian's Python (python3-torch, libopenblas0-pthread):
/usr/bin/python3 bench/pytorch_moe.py [--threads N] [--reps R]. Prints
one JSON object: the median iteration in ms. (Debian's torch 1.13 has
no scaled_dot_product_attention: the attention is written out, masked
softmax over q·kᵀ, as the baseline of the GPT figure does.)
"""
import argparse
import json
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

CFG = dict(hidden=256, inter=512, layers=4, heads=8, kv=2, experts=8, k=2, vocab=8192, ctx=128)
BATCH = 8


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.w = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.w


def rope(x, cos, sin):
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        d = c["hidden"] // c["heads"]
        self.h, self.kv, self.d = c["heads"], c["kv"], d
        self.q = nn.Linear(c["hidden"], c["heads"] * d, bias=False)
        self.k = nn.Linear(c["hidden"], c["kv"] * d, bias=False)
        self.v = nn.Linear(c["hidden"], c["kv"] * d, bias=False)
        self.o = nn.Linear(c["heads"] * d, c["hidden"], bias=False)

    def forward(self, x, cos, sin):
        b, t, _ = x.shape
        q = self.q(x).view(b, t, self.h, self.d).transpose(1, 2)
        k = self.k(x).view(b, t, self.kv, self.d).transpose(1, 2)
        v = self.v(x).view(b, t, self.kv, self.d).transpose(1, 2)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        rep = self.h // self.kv
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.d))
        att = att.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.o(y.transpose(1, 2).reshape(b, t, -1))


class Expert(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.w1 = nn.Linear(c["hidden"], c["inter"], bias=False)
        self.w3 = nn.Linear(c["hidden"], c["inter"], bias=False)
        self.w2 = nn.Linear(c["inter"], c["hidden"], bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class SparseMoe(nn.Module):
    """transformers' MixtralSparseMoeBlock (4.x): router, top-k,
    renormalised weights, a loop over the experts."""

    def __init__(self, c):
        super().__init__()
        self.k, self.e = c["k"], c["experts"]
        self.gate = nn.Linear(c["hidden"], c["experts"], bias=False)
        self.experts = nn.ModuleList([Expert(c) for _ in range(c["experts"])])

    def forward(self, x):
        b, t, h = x.shape
        x = x.view(-1, h)
        logits = self.gate(x)
        w = F.softmax(logits, dim=1, dtype=torch.float)
        w, sel = torch.topk(w, self.k, dim=-1)
        w = w / w.sum(dim=-1, keepdim=True)
        out = torch.zeros_like(x)
        mask = F.one_hot(sel, num_classes=self.e).permute(2, 1, 0)
        for e in range(self.e):
            idx, top = torch.where(mask[e])
            if top.numel() == 0:
                continue
            cur = x[top]
            y = self.experts[e](cur) * w[top, idx, None]
            out.index_add_(0, top, y)
        return out.view(b, t, h), logits


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.n1, self.att, self.n2, self.moe = RMSNorm(c["hidden"]), Attention(c), RMSNorm(c["hidden"]), SparseMoe(c)

    def forward(self, x, cos, sin):
        x = x + self.att(self.n1(x), cos, sin)
        y, _ = self.moe(self.n2(x))
        return x + y


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.emb = nn.Embedding(c["vocab"], c["hidden"])
        self.layers = nn.ModuleList([Layer(c) for _ in range(c["layers"])])
        self.norm = RMSNorm(c["hidden"])
        self.head = nn.Linear(c["hidden"], c["vocab"], bias=False)
        d = c["hidden"] // c["heads"]
        inv = 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))
        f = torch.outer(torch.arange(c["ctx"]).float(), inv)
        self.register_buffer("cos", f.cos())
        self.register_buffer("sin", f.sin())

    def forward(self, ids):
        x = self.emb(ids)
        for l in self.layers:
            x = l(x, self.cos, self.sin)
        return self.head(self.norm(x))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(6)
    m = Model(CFG)
    opt = torch.optim.AdamW(m.parameters(), lr=3e-4, weight_decay=0.1)
    ids = torch.randint(0, CFG["vocab"], (BATCH, CFG["ctx"]))
    labels = torch.randint(0, CFG["vocab"], (BATCH, CFG["ctx"]))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(m(ids).view(-1, CFG["vocab"]), labels.view(-1))
        loss.backward()
        opt.step()

    for _ in range(2):
        step()
    ts = []
    for _ in range(a.reps):
        t0 = time.perf_counter()
        step()
        ts.append((time.perf_counter() - t0) * 1000)
    print(json.dumps({"torch": torch.__version__, "threads": a.threads, "moe_iter_ms": statistics.median(ts)}))


if __name__ == "__main__":
    main()
