#!/usr/bin/env python3
"""Seeds of the fuzz targets made by hand (fuzz/targets.h): safetensors (a valid file and one
of each malformation the reader refuses), normalization (NUL-separated flags), patch_tokens (the writer's
calls), warm_start (a key byte, then a torch.save checkpoint of the tiny student's keys, which
needs Python torch). Files whose name starts with "valid" must be accepted by their target
(tests/core/test_fuzz_regressions.cpp replays tests/data/fuzz/<target>/).
  python3 fuzz/make_seeds.py OUT_ROOT   # writes OUT_ROOT/<target>/..., e.g. fuzz/corpus
"""
import io
import os
import sys


def write(root, target, name, data):
    os.makedirs(os.path.join(root, target), exist_ok=True)
    with open(os.path.join(root, target, name), "wb") as f:
        f.write(data)


def flags(*args):
    return b"\0".join(a.encode() for a in args)


def safetensors(root):
    import json
    import struct

    def file(header_text, data):
        header = header_text.encode()
        header += b" " * ((8 - len(header) % 8) % 8)
        return struct.pack("<Q", len(header)) + header + data

    def of(entries, data, metadata=None):
        h = {}
        if metadata:
            h["__metadata__"] = metadata
        h.update(entries)
        return file(json.dumps(h), data)

    f32 = struct.pack("<4f", 1.0, -2.5, 0.0, 3.25)
    i64 = struct.pack("<q", 7)
    write(root, "safetensors", "valid_two_tensors",
          of({"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
              "b": {"dtype": "I64", "shape": [], "data_offsets": [16, 24]}},
             f32 + i64, {"format": "pt"}))
    write(root, "safetensors", "valid_empty_tensor",
          of({"e": {"dtype": "BF16", "shape": [0, 3], "data_offsets": [0, 0]}}, b""))
    write(root, "safetensors", "negative_offset",
          of({"a": {"dtype": "F32", "shape": [4], "data_offsets": [-4, 12]}}, f32))
    write(root, "safetensors", "huge_offset",
          of({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 2 ** 63]}}, f32))
    write(root, "safetensors", "overlapping",
          of({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
              "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, f32))
    write(root, "safetensors", "gap",
          of({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
              "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}}, f32[:12]))
    write(root, "safetensors", "unknown_dtype",
          of({"a": {"dtype": "Q4", "shape": [4], "data_offsets": [0, 16]}}, f32))
    write(root, "safetensors", "shape_disagrees",
          of({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 16]}}, f32))
    write(root, "safetensors", "huge_shape",
          of({"a": {"dtype": "F32", "shape": [2 ** 40, 2 ** 40], "data_offsets": [0, 16]}}, f32))
    write(root, "safetensors", "duplicate_name",
          file('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
               '"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}', f32))
    write(root, "safetensors", "header_past_end", struct.pack("<Q", 10 ** 6) + b'{"a": 1}')
    write(root, "safetensors", "header_over_the_bound", struct.pack("<Q", 100_000_001) + b"{}")
    write(root, "safetensors", "trailing_bytes",
          of({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, f32))
    write(root, "safetensors", "not_json", file("{not json", f32))
    write(root, "safetensors", "metadata_not_strings",
          of({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, f32, {"n": 3}))


def normalization(root):
    write(root, "normalization", "valid_default_rgb", b"")
    write(root, "normalization", "valid_gray", flags("--in_chans", "1"))
    write(root, "normalization", "valid_four", flags("--in_chans", "4", "--mean", "0.5", "--std", "0.25"))
    write(root, "normalization", "valid_per_channel",
          flags("--in_chans", "3", "--mean", "0.4", "0.5", "0.6", "--std", "0.2", "0.25", "0.3"))
    write(root, "normalization", "huge_in_chans", flags("--in_chans", "100000", "--mean", "0.5", "--std", "0.5"))
    write(root, "normalization", "zero_std", flags("--in_chans", "4", "--mean", "0.5", "--std", "0"))
    write(root, "normalization", "inf_mean", flags("--in_chans", "4", "--mean", "inf", "--std", "1"))
    write(root, "normalization", "two_of_three", flags("--mean", "0.5", "0.5", "--std", "0.2"))
    write(root, "normalization", "negative_in_chans", flags("--in_chans", "-3"))


def patch_tokens(root):
    # images, T, D, calls; per call: head (B = head % 5, bit 3 a wrong T), B index bytes
    # (value - 2), B*T*D value bytes; then the number kept and their bytes (value % 14 - 1).
    def call(indices, t, d, wrong=False):
        b = len(indices)
        return bytes([b | (8 if wrong else 0)] + [i + 2 for i in indices] +
                     [(3 * k + 1) % 120 for k in range(b * (t + (1 if wrong else 0)) * d)])

    def kept(indices):
        return bytes([len(indices)] + [i + 1 for i in indices])

    t, d = 2, 3
    write(root, "patch_tokens", "valid_two_calls",
          bytes([4, t, d, 2]) + call([0, 1], t, d) + call([3, 2], t, d) + kept([0, 1, 2, 3]))
    write(root, "patch_tokens", "valid_one_left_out",
          bytes([4, t, d, 1]) + call([0, 1, 3], t, d) + kept([0, 1, 3]))
    write(root, "patch_tokens", "valid_duplicate_index",
          bytes([3, t, d, 1]) + call([2, 2, 0], t, d) + kept([0, 2]))
    write(root, "patch_tokens", "index_out_of_range", bytes([3, t, d, 1]) + call([5], t, d) + kept([]))
    write(root, "patch_tokens", "kept_unwritten", bytes([3, t, d, 1]) + call([0], t, d) + kept([0, 1]))
    write(root, "patch_tokens", "kept_descending", bytes([3, t, d, 1]) + call([0, 1], t, d) + kept([1, 0]))
    write(root, "patch_tokens", "shape_changes",
          bytes([3, t, d, 2]) + call([0], t, d) + call([1], t, d, wrong=True) + kept([0]))
    write(root, "patch_tokens", "nothing_written", bytes([3, t, d, 0]) + kept([]))


def warm_start(root):
    try:
        import torch
    except ImportError:
        print("make_seeds: no Python torch; warm_start seeds skipped", file=sys.stderr)
        return
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g)
    backbone = {
        "patch_embed.0.weight": r(8, 3, 4, 4), "patch_embed.1.weight": torch.ones(8),
        "patch_embed.1.bias": torch.zeros(8), "patch_embed.1.running_mean": torch.zeros(8),
        "patch_embed.1.running_var": torch.ones(8),
        "patch_embed.1.num_batches_tracked": torch.tensor(0),
        "cls_token": r(1, 1, 8), "blocks.0.norm1.weight": torch.ones(8),
        "blocks.0.norm1.bias": torch.zeros(8), "blocks.0.attn.temperature": torch.ones(2, 1, 1),
        "blocks.0.attn.proj.weight": r(8, 8), "blocks.0.attn.proj.bias": r(8),
        "blocks.0.mlp.fc1.weight": r(8, 8), "blocks.0.mlp.fc1.bias": r(8),
        "blocks.0.gamma1": torch.ones(8), "norm.weight": torch.ones(8), "norm.bias": torch.zeros(8)}
    head = {"mlp.0.weight": r(8, 8), "mlp.0.bias": r(8), "mlp.2.weight": r(8, 8), "mlp.2.bias": r(8),
            "mlp.4.weight": r(4, 8), "mlp.4.bias": r(4), "last_layer.weight_g": torch.ones(16, 1),
            "last_layer.weight_v": r(16, 4)}
    network = {"backbone." + k: v for k, v in backbone.items()}
    network.update({"head." + k: v for k, v in head.items()})

    def saved(obj):
        buffer = io.BytesIO()
        torch.save(obj, buffer)
        return buffer.getvalue()

    checkpoint = {"teacher": network, "student": {"module." + k: v for k, v in network.items()},
                  "epoch": 1}
    write(root, "warm_start", "valid_teacher", b"\x01" + saved(checkpoint))
    write(root, "warm_start", "valid_student", b"\x02" + saved(checkpoint))
    write(root, "warm_start", "valid_flat_backbone", b"\x00" + saved(backbone))
    wrong = dict(backbone)
    wrong["cls_token"] = r(1, 1, 9)
    write(root, "warm_start", "wrong_shape", b"\x00" + saved(wrong))
    missing = dict(backbone)
    del missing["norm.bias"]
    write(root, "warm_start", "missing_key", b"\x00" + saved(missing))
    write(root, "warm_start", "no_such_key", b"\x01" + saved(backbone))
    write(root, "warm_start", "not_tensors", b"\x00" + saved({"cls_token": [1, 2, 3]}))


if __name__ == "__main__":
    out = sys.argv[1]
    safetensors(out)
    normalization(out)
    patch_tokens(out)
    warm_start(out)
