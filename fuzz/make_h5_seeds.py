#!/usr/bin/env python3
"""Writes the seed inputs of the structure-aware HDF5 fuzz targets (fuzz_h5, fuzz_features):
descriptions, in fuzz/h5_builder.h's grammar, of a packed shard holding the real images of
fuzz/corpus/decode/ and of a feature file as `dino features` writes it. Each seed also goes to
tests/data/fuzz/<target>/ as a valid* input, which the replay test requires to be accepted.
    python3 fuzz/make_h5_seeds.py
"""
import os
import struct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PRESENT, SCHEMA_RANK, WIDE_DIMS = 1, 8, 16


def dataset(dims, values, wide=False, layout=0):
    """A dataset of the schema's own type and rank; `values` are the element bytes."""
    kind = PRESENT | SCHEMA_RANK | (WIDE_DIMS if wide else 0)
    out = bytes([kind, 0, 0])
    for d in dims:
        out += struct.pack(">H", d) if wide else bytes([d])
    return out + bytes([layout]) + values


def int64s(values):
    return b"".join(struct.pack("<q", v) for v in values)


def floats(values):
    return b"".join(struct.pack("<f", v) for v in values)


def strings(values):
    return b"".join(bytes([len(s)]) + s for s in values)


def string_attribute(s):
    return bytes([1, len(s)]) + s


def int_attribute(v):
    return bytes([2]) + struct.pack("<q", v)


def shard(images, labels, two_shards, layout=0):
    data = b"".join(images)
    offsets = [0]
    for im in images:
        offsets.append(offsets[-1] + len(im))
    names = [b"bag", b"shirt"]
    return (bytes([1 if two_shards else 0])
            + dataset([len(data)], data, wide=True, layout=layout)
            + dataset([len(offsets)], int64s(offsets))
            + dataset([len(labels)], int64s(labels))
            + dataset([len(images)], strings([b"shirt/%d.png" % i for i in range(len(images))]))
            + dataset([len(names)], strings(names))
            + string_attribute(b"xdino-encoded-images") + int_attribute(1))


def features(n, c, layout=0):
    rows = [((i * 7 + j * 3) % 11 - 5) / 8.0 for i in range(n) for j in range(c)]
    return (dataset([n, c], floats(rows), layout=layout)
            + dataset([n], int64s([i % 3 for i in range(n)]))
            + dataset([n], strings([b"val/%d.png" % i for i in range(n)]))
            + string_attribute(b"xcit_nano_12_p16") + string_attribute(b"checkpoint.pth")
            + string_attribute(b"teacher") + string_attribute(b"val")
            + string_attribute(b"backbone") + int_attribute(224) + int_attribute(16)
            + int_attribute(1))


def write(target, name, data):
    for folder in (os.path.join(ROOT, "fuzz", "corpus", target),
                   os.path.join(ROOT, "tests", "data", "fuzz", target)):
        os.makedirs(folder, exist_ok=True)
        prefix = "" if "corpus" in folder else "valid_"
        with open(os.path.join(folder, prefix + name), "wb") as f:
            f.write(data)


def main():
    decode = os.path.join(ROOT, "fuzz", "corpus", "decode")
    png = open(os.path.join(decode, "fmnist.png"), "rb").read()
    jpg = open(os.path.join(decode, "m.jpg"), "rb").read()
    write("h5", "shard_png_jpg.bin", shard([png, jpg], [1, 0], two_shards=False))
    write("h5", "two_shards_chunked.bin", shard([jpg], [1], two_shards=True, layout=2))
    write("features", "features_4x8.bin", features(4, 8))
    write("features", "features_3x5_deflate.bin", features(3, 5, layout=2))


if __name__ == "__main__":
    main()
