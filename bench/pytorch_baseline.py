"""PyTorch on the same shapes as `go run ./bench`: the MLP step and the
baby-GPT iteration (forward, backward, AdamW), float32 on the CPU.

Run with Debian's Python (python3-torch; install libopenblas0-pthread so
that its BLAS is OpenBLAS): /usr/bin/python3 bench/pytorch_baseline.py
[--threads N] [--blas-threads N] [--reps R]. Prints one JSON object of
medians in ms. --threads sets torch's threads, --blas-threads OpenBLAS's
(which size their pool as torch loads; by default every core).
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

# OpenBLAS sizes its own thread pool when torch loads, from the
# environment, whatever torch.set_num_threads says later: --blas-threads
# N sets it (OPENBLAS_NUM_THREADS); without it OpenBLAS takes every core.
# PyTorch's fastest on 2 cores is --threads 1 with OpenBLAS on both.
_pre = argparse.ArgumentParser(add_help=False)
_pre.add_argument("--blas-threads", type=int, default=0)
_blas = _pre.parse_known_args(sys.argv[1:])[0].blas_threads
if _blas > 0:
    os.environ["OPENBLAS_NUM_THREADS"] = str(_blas)

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

# Shapes of bench/main.go: mlpSizes, gptConfig, gptBatch.
MLP_SIZES = [784, 512, 512, 10]
MLP_BATCH = 128
GPT = dict(layers=4, heads=4, embd=128, block=64, vocab=104)
GPT_BATCH = 12


class Block(nn.Module):
    def __init__(self, embd, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(embd)
        self.qkv = nn.Linear(embd, 3 * embd)
        self.proj = nn.Linear(embd, embd)
        self.ln2 = nn.LayerNorm(embd)
        self.fc = nn.Linear(embd, 4 * embd)
        self.fc_proj = nn.Linear(4 * embd, embd)

    def forward(self, x, mask):
        b, t, c = x.shape
        h = self.ln1(x)
        q, k, v = self.qkv(h).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        if hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(mask[:t, :t] == 0, float("-inf"))
            y = F.softmax(att, dim=-1) @ v
        y = y.transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.proj(y)
        x = x + self.fc_proj(F.gelu(self.fc(self.ln2(x)), approximate="tanh") if "approximate" in F.gelu.__doc__ else F.gelu(self.fc(self.ln2(x))))
        return x


class GPTModel(nn.Module):
    def __init__(self, layers, heads, embd, block, vocab):
        super().__init__()
        self.wte = nn.Embedding(vocab, embd)
        self.wpe = nn.Embedding(block, embd)
        self.blocks = nn.ModuleList([Block(embd, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(embd)
        self.head = nn.Linear(embd, vocab, bias=False)
        self.register_buffer("mask", torch.tril(torch.ones(block, block)))

    def forward(self, ids, labels):
        t = ids.shape[1]
        x = self.wte(ids) + self.wpe(torch.arange(t))
        for blk in self.blocks:
            x = blk(x, self.mask)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1))


def timed(step, reps, warm=3):
    for _ in range(warm):
        step()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        step()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1, help="torch's own threads")
    ap.add_argument("--blas-threads", type=int, default=0, help="OpenBLAS's threads (0: its default, every core)")
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    torch.manual_seed(1)
    torch.set_num_threads(args.threads)

    layers = []
    for i in range(len(MLP_SIZES) - 1):
        layers.append(nn.Linear(MLP_SIZES[i], MLP_SIZES[i + 1]))
        if i < len(MLP_SIZES) - 2:
            layers.append(nn.ReLU())
    mlp = nn.Sequential(*layers)
    opt = torch.optim.AdamW(mlp.parameters(), lr=1e-3, weight_decay=0.01)
    x = torch.randn(MLP_BATCH, MLP_SIZES[0])
    y = torch.arange(MLP_BATCH) % 10

    def mlp_step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(mlp(x), y).backward()
        opt.step()

    gpt = GPTModel(**GPT)
    gopt = torch.optim.AdamW(gpt.parameters(), lr=3e-4, weight_decay=0.1)
    ids = torch.randint(0, GPT["vocab"], (GPT_BATCH, GPT["block"]))
    labels = torch.randint(0, GPT["vocab"], (GPT_BATCH, GPT["block"]))

    def gpt_step():
        gopt.zero_grad(set_to_none=True)
        gpt(ids, labels).backward()
        gopt.step()

    a = torch.randn(1024, 1024)
    b = torch.randn(1024, 1024)

    def gemm():
        torch.mm(a, b)

    gemm_ms = timed(gemm, args.reps)
    out = {
        "torch": torch.__version__,
        "threads": args.threads,
        "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS", "default (%d cores)" % os.cpu_count()),
        "blas": "openblas" if "openblas" in torch.__config__.show().lower() else "other",
        "gemm_1024_gflops": 2 * 1024**3 / (gemm_ms * 1e-3) / 1e9,
        "mlp_step_ms": timed(mlp_step, args.reps),
        "gpt_iter_ms": timed(gpt_step, args.reps),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
