#!/usr/bin/python3
"""Python torch.load / torch.save of the checkpoint bench_pth.cpp builds (same tensor shapes):
the reference that bench/cpp/bench_pth.cpp's load_pth / save_pth are read against
(bench/results/pth.md).

  /usr/bin/python3 bench/reference/bench_pth_python.py [folder=/tmp] [repeats=9]
"""
import os
import statistics
import sys
import time

import torch


def median_seconds(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else '/tmp'
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 9
    torch.set_num_threads(1)
    sd = {'cls_token': torch.randn(1, 1, 384)}
    for b in range(14):
        p = f'blocks_{b}_'
        sd[p + 'attn_qkv_weight'] = torch.randn(1152, 384)
        sd[p + 'attn_qkv_bias'] = torch.randn(1152)
        sd[p + 'attn_proj_weight'] = torch.randn(384, 384)
        sd[p + 'mlp_fc1_weight'] = torch.randn(1536, 384)
        sd[p + 'mlp_fc2_weight'] = torch.randn(384, 1536)
        for v in ('gamma1', 'gamma2', 'gamma3', 'norm1_weight', 'norm1_bias'):
            sd[p + v] = torch.randn(384)
    path = os.path.join(folder, 'bench_pth_python.pth')
    save = median_seconds(lambda: torch.save(sd, path), repeats)
    load = median_seconds(lambda: torch.load(path), repeats)
    print(f'torch {torch.__version__}: torch.load {load:.3f} s, torch.save {save:.3f} s '
          f'({os.path.getsize(path) / 1e6:.1f} MB, median of {repeats}, no fsync)')
    os.remove(path)


if __name__ == '__main__':
    main()
