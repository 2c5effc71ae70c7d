#!/usr/bin/python3
"""The machine's fp32 matrix-multiply limit, through the BLAS that LibTorch uses (Debian's torch
multiplies through the system libblas.so.3, OpenBLAS after scripts/setup.sh): GFLOP/s of
torch.mm at the DINO step's own GEMM shapes and at square sizes, for 1 and 2 threads: the
ceiling the step's GFLOP/s are read against (bench/results/training_step_cpu.md).

usage: /usr/bin/python3 bench/platform/sgemm_peak.py [--threads 1,2] [--seconds 1.0]
Prints a Markdown table, one row per shape, best of several timed batches (a peak, not a mean:
this is the ceiling a step can approach). Run it on an idle machine.
Each thread count runs in a child process with OPENBLAS_NUM_THREADS and OMP_NUM_THREADS set
(OpenBLAS's pthreads pool is sized at load time; torch.set_num_threads alone does not reach it).
"""
import argparse
import os
import subprocess
import sys
import time

import torch

# (M, K, N): the main job's (xcit_nano_4_p4, batch 32, 28 px globals) qkv, MLP-down and local-
# crop qkv products, the head's hidden layer, and square sizes.
SHAPES = [(3136, 128, 384), (3136, 512, 128), (1728, 128, 384), (256, 1024, 1024),
          (512, 512, 512), (1024, 1024, 1024), (2048, 2048, 2048)]


def gflops(m, k, n, seconds):
    a, b = torch.randn(m, k), torch.randn(k, n)
    out = torch.empty(m, n)
    torch.mm(a, b, out=out)
    reps = 1
    while True:  # grow until one batch takes ~0.1 s
        t = time.perf_counter()
        for _ in range(reps):
            torch.mm(a, b, out=out)
        dt = time.perf_counter() - t
        if dt > 0.1:
            break
        reps *= 2
    best = dt / reps
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t = time.perf_counter()
        for _ in range(reps):
            torch.mm(a, b, out=out)
        best = min(best, (time.perf_counter() - t) / reps)
    return 2.0 * m * k * n / best / 1e9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:  # one thread count, set by the parent's environment: one number per shape
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
        print(" ".join(f"{gflops(m, k, n, a.seconds):.1f}" for m, k, n in SHAPES))
        return
    threads = [int(t) for t in a.threads.split(",")]
    columns = []
    for t in threads:
        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(t), OMP_NUM_THREADS=str(t))
        out = subprocess.run([sys.executable, __file__, "--child", "--seconds", str(a.seconds)],
                             env=env, check=True, capture_output=True, text=True).stdout
        columns.append(out.split())
    print("| M x K x N | " + " | ".join(f"GFLOP/s, {t} thread(s)" for t in threads) + " |")
    print("|---|" + "---|" * len(threads))
    for i, (m, k, n) in enumerate(SHAPES):
        print(f"| {m} x {k} x {n} | " + " | ".join(f"{float(c[i]):.0f}" for c in columns) + " |")


if __name__ == "__main__":
    main()
