#!/usr/bin/python3
"""Python side of the .pth tests: what torch.save writes and what torch.load reads.

  pth_tool.py describe FILE...          torch.load each FILE, print its description
  pth_tool.py describe-safe FILE...     the same with torch.load(weights_only=True)
  pth_tool.py write-mixed DIR PROTO...  torch.save the mixed object as DIR/p<PROTO>.pth for each
                                        protocol; print "# p<PROTO>.pth" and its description
  pth_tool.py module-keys               state_dict keys of the nested module in test_weights
  pth_tool.py make-fixtures DIR         (re)write DIR/p{1,2,4,5}_mixed.pth, DIR/legacy.pth and
                                        DIR/expected.txt (descriptions of every DIR/*.pth)

A description has one line per value: "<path> <kind> <details>", the same text
tests/support/pth_testing.cpp produces from a c10::IValue, so the C++ side compares lines.
Run with Debian's /usr/bin/python3 (torch, numpy).
"""
import argparse
import collections
import glob
import os
import sys

import numpy as np
import torch


def text(s):
    data = s.encode('utf-8') if isinstance(s, str) else bytes(s)
    return ''.join(chr(b) if 0x20 < b < 0x7f and b != 0x5c else '\\x%02x' % b for b in data)


def number(x):
    x = float(x)
    return 'nan' if x != x else '%.17g' % x


def storage_of(t):
    return t.untyped_storage() if hasattr(t, 'untyped_storage') else t.storage()


def describe(obj, path, out, storages):
    if obj is None:
        out.append(f'{path} None')
    elif isinstance(obj, (bool, np.bool_)):
        out.append(f'{path} bool {bool(obj)}')
    elif isinstance(obj, (int, np.integer)):
        out.append(f'{path} int {int(obj)}')
    elif isinstance(obj, (float, np.floating)):
        out.append(f'{path} float {number(obj)}')
    elif isinstance(obj, str):
        out.append(f'{path} str {text(obj)}')
    elif isinstance(obj, (bytes, bytearray)):  # load_pth gives a string of the raw bytes
        out.append(f'{path} str {text(obj)}')
    elif isinstance(obj, torch.Tensor):
        st = storage_of(obj)
        if st.nbytes() == 0:
            sid = '-'
        else:
            sid = storages.setdefault(st.data_ptr(), len(storages))
        flat = obj.detach().reshape(-1)
        if obj.dtype == torch.bool or not (obj.is_floating_point() or obj.is_complex()):
            values = ','.join(str(int(v)) for v in flat.tolist())
        else:
            values = ','.join(number(v) for v in flat.double().tolist())
        out.append(f'{path} tensor {obj.dtype} size={list(obj.shape)} stride={list(obj.stride())} '
                   f'offset={obj.storage_offset()} grad={int(obj.requires_grad)} storage={sid} '
                   f'values={values}')
    elif isinstance(obj, dict):
        out.append(f'{path} dict {len(obj)}')
        for k, v in obj.items():
            key = f's:{text(k)}' if isinstance(k, str) else f'i:{k}' if isinstance(k, int) else f'x:{k!r}'
            describe(v, f'{path}/{key}', out, storages)
    elif isinstance(obj, (list, tuple)):
        out.append(f'{path} {"list" if isinstance(obj, list) else "tuple"} {len(obj)}')
        for i, v in enumerate(obj):
            describe(v, f'{path}[{i}]', out, storages)
    else:
        cls = type(obj)
        out.append(f'{path} object {cls.__module__}.{cls.__name__}')
        for k, v in vars(obj).items():
            describe(v, f'{path}.{k}', out, storages)


def description(obj):
    out = []
    describe(obj, '$', out, {})
    return out


def mixed():
    """Every construct official DINO/XCiT checkpoints use, plus the dtypes and views we load."""
    lin = torch.nn.Linear(3, 2)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[0.5, -1.25, 3.0], [1e-3, -0.0, 2.5e5]]))
        lin.bias.copy_(torch.tensor([0.1, -0.2]))
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4) / 7
    return {
        'student': lin.state_dict(),  # OrderedDict with _metadata
        'dino_loss': {'center': torch.tensor([[0.25, -0.5]])},  # one-item dict: SETITEM
        'one': [torch.tensor([1.0, 2.0])],  # one-element list: APPEND
        'lr': np.float64(0.0005),
        'step': np.int64(-3),
        'wd32': np.float32(0.04),
        'args': argparse.Namespace(arch='xcit_small_12_p16', lr=0.0005, betas=(0.9, 0.999),
                                   local_crops_number=8, use_fp16=False, output_dir=None),
        'betas': (0.9, 0.999, 'adamw', None),
        'bf16': torch.tensor([1.5, -2.25, 3e-3], dtype=torch.bfloat16),
        'f16': torch.tensor([0.1, 65504.0, -6e-5], dtype=torch.float16),
        'i64': torch.tensor([-(2 ** 40), 7, 2 ** 62], dtype=torch.int64),
        'i8': torch.tensor([-128, 127], dtype=torch.int8),
        'u8': torch.tensor([0, 255], dtype=torch.uint8),
        'b': torch.tensor([True, False, True]),
        'f64': torch.tensor([1 / 3], dtype=torch.float64),
        'scalar': torch.tensor(4.5),
        'base': base,
        'view': base[1:, 1::2],  # shares base's storage: offset 5, strides (4, 2)
        'tview': base.t(),
        'empty': torch.zeros(0, 3),
        'param': torch.nn.Parameter(torch.tensor([2.0, 4.0])),
        'bytes': b'\x00\xffab',
        'big': 2 ** 40,
        'neg': -(2 ** 33),
        'int_keys': {0: 'a', 17: 'b', 300: 'c'},
        'epoch': 100,
        'flags': [True, False, None, 1.5e-300, float('inf'), -0.0],
        'unicode': 'tête-à-tête ✓',
    }


def main(argv):
    cmd = argv[1]
    if cmd in ('describe', 'describe-safe'):
        for path in argv[2:]:
            obj = torch.load(path, map_location='cpu', weights_only=cmd == 'describe-safe')
            print('\n'.join(description(obj)))
    elif cmd == 'write-mixed':
        for proto in argv[3:]:
            obj = mixed()
            torch.save(obj, os.path.join(argv[2], f'p{proto}.pth'), pickle_protocol=int(proto))
            print(f'# p{proto}.pth')
            print('\n'.join(description(obj)))
    elif cmd == 'module-keys':
        print('\n'.join(module_keys()))
    elif cmd == 'make-fixtures':
        folder = argv[2]
        for proto in (1, 2, 4, 5):
            torch.save(mixed(), os.path.join(folder, f'p{proto}_mixed.pth'), pickle_protocol=proto)
        torch.save({'w': torch.tensor([1.0, 2.0])}, os.path.join(folder, 'legacy.pth'),
                   _use_new_zipfile_serialization=False)
        lines = []
        for path in sorted(glob.glob(os.path.join(folder, '*.pth'))):
            if os.path.basename(path) == 'legacy.pth':
                continue
            lines.append('# ' + os.path.basename(path))
            lines += description(torch.load(path, map_location='cpu'))
        with open(os.path.join(folder, 'expected.txt'), 'w') as f:
            f.write('\n'.join(lines) + '\n')
    else:
        sys.exit(f'unknown command {cmd}')


class Block(torch.nn.Module):
    """Children registered before parameters, a buffer, a BatchNorm: PyTorch's state_dict order
    puts a module's own parameters, then its buffers, then its children."""

    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(4)
        self.gamma = torch.nn.Parameter(torch.ones(4))
        self.mlp = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.Linear(8, 4))
        self.register_buffer('scale', torch.ones(1))
        self.bn = torch.nn.BatchNorm1d(4)
        self.temperature = torch.nn.Parameter(torch.ones(2, 1, 1))


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Linear(2, 4, bias=False)
        self.cls_token = torch.nn.Parameter(torch.zeros(1, 1, 4))
        self.blocks = torch.nn.ModuleList([Block(), Block()])
        self.head = torch.nn.Identity()
        self.pos = torch.nn.Conv2d(4, 4, 1)


def module_keys():
    return [f'{k} {list(v.shape)}' for k, v in Net().state_dict().items()]


if __name__ == '__main__':
    main(sys.argv)
