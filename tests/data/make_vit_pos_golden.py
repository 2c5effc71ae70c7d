#!/usr/bin/python3
"""Golden values for DINO's ViT position-embedding interpolation (tests/models/test_vit.cpp).

Runs PyTorch's own bicubic interpolation the way facebookresearch/dino's
VisionTransformer.interpolate_pos_encoding calls it (scale_factor = (n + 0.1) / sqrt(N) per
side, bicubic, align_corners False) on a deterministic 4x4 grid with 3 channels, patch 4.
Usage: /usr/bin/python3 tests/data/make_vit_pos_golden.py > tests/data/vit_pos_golden.txt
"""
import math

import torch
import torch.nn.functional as F

PATCH, SIDE, DIM = 4, 4, 3


def pos_embed():
    i = torch.arange(1 + SIDE * SIDE, dtype=torch.float64).view(1, -1, 1)
    c = torch.arange(DIM, dtype=torch.float64).view(1, 1, -1)
    return torch.sin(0.7 * i + 0.3 * c).float()  # (1, 17, 3)


def dino_interpolate(pe, height, width):
    n_patch = (height // PATCH) * (width // PATCH)
    n0 = pe.shape[1] - 1
    if n_patch == n0 and height == width:
        return pe
    cls, grid = pe[:, :1], pe[:, 1:]
    rows, cols = height // PATCH + 0.1, width // PATCH + 0.1
    grid = grid.reshape(1, SIDE, SIDE, DIM).permute(0, 3, 1, 2)
    grid = F.interpolate(grid, scale_factor=(rows / math.sqrt(n0), cols / math.sqrt(n0)),
                         mode="bicubic", align_corners=False)
    assert grid.shape[-2:] == (height // PATCH, width // PATCH)
    grid = grid.permute(0, 2, 3, 1).reshape(1, -1, DIM)
    return torch.cat((cls, grid), dim=1)


def main():
    print("# DINO interpolate_pos_encoding golden values; made by make_vit_pos_golden.py")
    print(f"# torch {torch.__version__}; patch {PATCH}, grid {SIDE}x{SIDE}, dim {DIM}")
    print("# per case: 'case H W tokens', then tokens lines of DIM values")
    pe = pos_embed()
    for height, width in [(16, 16), (24, 12), (8, 8), (8, 32), (20, 28), (17, 18)]:
        out = dino_interpolate(pe, height, width)[0]
        print(f"case {height} {width} {out.shape[0]}")
        for row in out.tolist():
            print(" ".join(f"{v:.9g}" for v in row))


if __name__ == "__main__":
    main()
