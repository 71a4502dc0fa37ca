#!/usr/bin/python3
"""Times OpenBLAS (through Debian's numpy) on the GEMM shapes of
internal/kernels' BenchmarkGemmShapes, for the float32 comparison in
bench/RESULTS.md: the best of five timings of about a second each. Run with Debian's own Python, OPENBLAS_CORETYPE and
OPENBLAS_L2_SIZE unset:

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 bench/openblas_shapes.py
"""
import ctypes
import time

import numpy as np

# name, m, n, k, transA, transB (as gemmShapes in internal/kernels/bf16_test.go)
SHAPES = [
    ("gpt_qkv_fprop", 768, 384, 128, False, True), ("gpt_qkv_dgrad", 768, 128, 384, False, False), ("gpt_qkv_wgrad", 384, 128, 768, True, False),
    ("gpt_attnproj_fprop", 768, 128, 128, False, True), ("gpt_attnproj_dgrad", 768, 128, 128, False, False), ("gpt_attnproj_wgrad", 128, 128, 768, True, False),
    ("gpt_fc_fprop", 768, 512, 128, False, True), ("gpt_fc_dgrad", 768, 128, 512, False, False), ("gpt_fc_wgrad", 512, 128, 768, True, False),
    ("gpt_proj2_fprop", 768, 128, 512, False, True), ("gpt_proj2_dgrad", 768, 512, 128, False, False), ("gpt_proj2_wgrad", 128, 512, 768, True, False),
    ("gpt_head_fprop", 768, 104, 128, False, True), ("gpt_head_dgrad", 768, 128, 104, False, False), ("gpt_head_wgrad", 104, 128, 768, True, False),
    ("mlp_fc1_fprop", 128, 512, 784, False, True), ("mlp_fc1_wgrad", 512, 784, 128, True, False),
    ("mlp_fc2_fprop", 128, 512, 512, False, True), ("mlp_fc2_dgrad", 128, 512, 512, False, False), ("mlp_fc2_wgrad", 512, 512, 128, True, False),
    ("mlp_fc3_fprop", 128, 10, 512, False, True), ("mlp_fc3_dgrad", 128, 512, 10, False, False), ("mlp_fc3_wgrad", 10, 512, 128, True, False),
]


def corename():
    for lib in ("/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3", "/usr/lib/x86_64-linux-gnu/libopenblas.so.0"):
        try:
            f = ctypes.CDLL(lib).openblas_get_corename
            f.restype = ctypes.c_char_p
            return f().decode()
        except (OSError, AttributeError):
            pass
    return "unknown (not OpenBLAS?)"


def main():
    print("OpenBLAS kernel:", corename())
    rng = np.random.default_rng(1)
    for name, m, n, k, ta, tb in SHAPES:
        a = rng.standard_normal((k, m) if ta else (m, k), dtype=np.float32)
        b = rng.standard_normal((n, k) if tb else (k, n), dtype=np.float32)
        a, b = (a.T if ta else a), (b.T if tb else b)
        c = np.empty((m, n), dtype=np.float32)
        for _ in range(20):
            np.matmul(a, b, out=c)
        iters = max(20, int(2e9 / (2 * m * n * k)))
        best = 0.0
        for _ in range(5):  # the best of five runs of ~1 s
            t = time.perf_counter()
            for _ in range(iters):
                np.matmul(a, b, out=c)
            dt = (time.perf_counter() - t) / iters
            best = max(best, 2 * m * n * k / dt / 1e9)
        print(f"{name:20s} {best:7.1f} GFLOP/s")


if __name__ == "__main__":
    main()
