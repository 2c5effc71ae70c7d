#!/usr/bin/env python3
"""Writes the hand-made tricky inputs of tests/core/test_fuzz_regressions.cpp (issue 17): .pth files
whose declared sizes disagree with their records, written with the standard pickle and zipfile
modules (no torch needed: stand-in torch modules give pickle the names torch.save writes).
Files found by the fuzzers are added next to these as they are, not generated here.
    python3 tests/data/fuzz/make_fuzz_regressions.py
"""
import collections
import io
import os
import pickle
import struct
import sys
import types
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))

torch = types.ModuleType("torch")
utils = types.ModuleType("torch._utils")
torch._utils = utils
sys.modules["torch"], sys.modules["torch._utils"] = torch, utils


def _rebuild_tensor_v2(*args):
    raise NotImplementedError


_rebuild_tensor_v2.__module__ = "torch._utils"
utils._rebuild_tensor_v2 = _rebuild_tensor_v2


class FloatStorage:
    pass


FloatStorage.__module__ = "torch"
torch.FloatStorage = FloatStorage


class Storage:
    def __init__(self, key, numel):
        self.key, self.numel = key, numel


class Tensor:
    def __init__(self, storage, offset, size, stride):
        self.args = (storage, offset, tuple(size), tuple(stride), False, collections.OrderedDict())

    def __reduce__(self):
        return (_rebuild_tensor_v2, self.args)


class Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            return ("storage", FloatStorage, obj.key, "cpu", obj.numel)
        return None


def write_pth(name, value, records):
    buf = io.BytesIO()
    Pickler(buf, protocol=2).dump(value)
    path = os.path.join(HERE, "pth", name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", buf.getvalue())
        z.writestr("archive/byteorder", "little")
        for key, data in records.items():
            z.writestr("archive/data/" + key, data)
        z.writestr("archive/version", "3\n")
    return path


four_floats = {"0": struct.pack("<4f", 1, 2, 3, 4)}
# A valid file: the replay accepts it (the reader is not merely rejecting everything).
write_pth("valid_small.pth", {"w": Tensor(Storage("0", 4), 0, [2, 2], [2, 1])}, four_floats)
# The tensor's declared size reaches far past its 4-element storage.
write_pth("tensor_size_exceeds_storage.pth",
          {"w": Tensor(Storage("0", 4), 0, [1 << 40], [1])}, four_floats)
# size x stride overflows int64 (undefined behaviour in the bound check before the fix).
write_pth("tensor_stride_overflow.pth",
          {"w": Tensor(Storage("0", 4), 0, [1 << 62, 4], [4, 1 << 62])}, four_floats)
# offset + extent overflows int64.
write_pth("tensor_offset_overflow.pth",
          {"w": Tensor(Storage("0", 4), (1 << 63) - 2, [2], [1])}, four_floats)
# The storage declares 2^40 elements; its record holds 16 bytes.
write_pth("storage_numel_exceeds_record.pth",
          {"w": Tensor(Storage("0", 1 << 40), 0, [4], [1])}, four_floats)
# The storage record is missing.
write_pth("storage_record_missing.pth", {"w": Tensor(Storage("7", 4), 0, [4], [1])}, four_floats)

# A zip whose central directory declares a 2 GiB entry in a file of a few hundred bytes.
path = write_pth("zip_entry_size_exceeds_file.pth",
                 {"w": Tensor(Storage("0", 4), 0, [4], [1])}, four_floats)
data = bytearray(open(path, "rb").read())
cd = data.find(b"PK\x01\x02")
while cd >= 0:
    name_len = struct.unpack_from("<H", data, cd + 28)[0]
    if data[cd + 46:cd + 46 + name_len] == b"archive/data/0":
        struct.pack_into("<II", data, cd + 20, 0x7FFFFFFF, 0x7FFFFFFF)
    cd = data.find(b"PK\x01\x02", cd + 4)
open(path, "wb").write(data)

# JSON nested 3000 deep (recursive printing) and one with a bad escape.
os.makedirs(os.path.join(HERE, "json"), exist_ok=True)
open(os.path.join(HERE, "json", "valid_deep_nesting.json"), "w").write("[" * 3000 + "]" * 3000)
open(os.path.join(HERE, "json", "bad_escape.json"), "w").write('{"a": "\\ud800\\u12"}')
