#!/usr/bin/env python3
"""Writes long and deep seeds for the json, pth and pth_zip fuzz targets into OUT/<target>/,
so that a run with -max_len of 1 MB or more starts from inputs near the nesting bounds and the
size limits, which libFuzzer cannot grow to from the small seeds in fuzz/corpus/ (its default
-max_len is 4096 bytes). Generated at fuzz time by scripts/fuzz.sh, not stored: they are up to
1 MB each.
    python3 fuzz/make_deep_seeds.py OUT
Bounds (core/json.h kMaxJsonNesting = 1000; core/pth/unpickle.cpp kMaxNesting = 256): each
deep seed comes as one level under the bound (accepted) and one over (refused with one line).
"""
import io
import os
import struct
import sys
import zipfile

JSON_BOUND, PICKLE_BOUND = 1000, 256


def write(out, target, name, data):
    os.makedirs(os.path.join(out, target), exist_ok=True)
    with open(os.path.join(out, target, name), "wb") as f:
        f.write(data)


def pth(pkl, extra=()):
    """A torch.save-like zip: archive/data.pkl, archive/version, any extra (name, bytes)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", pkl)
        z.writestr("archive/version", b"3\n")
        for name, data in extra:
            z.writestr(name, data)
    return buf.getvalue()


def nested_lists(depth):  # PROTO 2, MARK x depth, LIST x depth, STOP
    return b"\x80\x02" + b"(" * depth + b"l" * depth + b"."


def nested_dicts(depth):  # {'k': {'k': ... {}}} through EMPTY_DICT, BINUNICODE, SETITEM
    return b"\x80\x02" + b"}X\x01\x00\x00\x00k" * depth + b"}" + b"s" * depth + b"."


def long_list(n):  # [0, 1, ..., n-1] appended in batches of 1000 (MARK ... APPENDS)
    out = bytearray(b"\x80\x02]")
    for start in range(0, n, 1000):
        out += b"("
        for i in range(start, min(n, start + 1000)):
            out += b"J" + struct.pack("<i", i)  # BININT
        out += b"e"
    return bytes(out + b".")


def main(out):
    # json: deep arrays and objects around the bound, a 1 MB flat array, a 1 MB string.
    for depth in (JSON_BOUND - 1, JSON_BOUND + 1):
        write(out, "json", f"arrays_{depth}.json", b"[" * depth + b"]" * depth)
        write(out, "json", f"objects_{depth}.json", b'{"a":' * depth + b"1" + b"}" * depth)
    write(out, "json", "long_array.json",
          b"[" + b",".join(str(i).encode() for i in range(150000)) + b"]")
    write(out, "json", "long_string.json", b'{"s": "' + b"x\\u00e9" * 140000 + b'"}')

    # pth: deep pickles around the bound, a long list, both as whole .pth files.
    for depth in (PICKLE_BOUND - 1, PICKLE_BOUND + 1):
        write(out, "pth", f"lists_{depth}.pth", pth(nested_lists(depth)))
        write(out, "pth", f"dicts_{depth}.pth", pth(nested_dicts(depth)))
    write(out, "pth", "lists_100000.pth", pth(nested_lists(100000)))
    write(out, "pth", "long_list.pth", pth(long_list(150000)))

    # pth_zip: many entries, and one large entry.
    write(out, "pth_zip", "many_entries.pth",
          pth(nested_lists(1), [(f"archive/data/{i}", b"\x00" * 64) for i in range(5800)]))
    write(out, "pth_zip", "large_entry.pth",
          pth(nested_lists(1), [("archive/data/0", bytes(range(256)) * 3900)]))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_deep_seeds.py OUT")
    main(sys.argv[1])
