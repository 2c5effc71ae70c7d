#!/usr/bin/env python3
"""Writes a stand-in for a shared library that a program loads but never calls into.

    bench/platform/stub_library.py OUT_DIR REAL_LIB... -- USER_LIB...

OUT_DIR/<soname of each REAL_LIB> gets every symbol (and symbol version) that the USER_LIBs
import from that REAL_LIB, and nothing else: functions return 0 at once, objects are zero bytes of the
real size. OpenCV's codec registry calls GDALAllRegister() when it first encodes an image, so
a stand-in must return rather than trap. Debian's libraries are linked
with BIND_NOW, so every imported symbol must resolve when the program starts even if it is
never used; this is what lets bench/platform/gpu_bundle.sh leave out GDAL, FFmpeg and GStreamer,
which OpenCV loads for formats that `dino` never reads. It measures nothing: a tool of
gpu_bundle.sh.
"""
import collections
import os
import re
import subprocess
import sys
import tempfile


def run(*args):
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


def soname(path):
    match = re.search(r"\(SONAME\)\s+Library soname: \[(.*)\]", run("readelf", "-d", path))
    return match.group(1) if match else os.path.basename(path)


def imports(users):
    """Each user's undefined dynamic symbols and its version requirements, read once."""
    return [(run("nm", "-D", "--undefined-only", "--with-symbol-versions", user),
             run("readelf", "-V", user).split(".gnu.version_r")[-1]) for user in users]


def stub(real, out_dir, users):
    name = soname(real)
    defined = {}  # symbol -> (nm type, size, version or "")
    for line in run("nm", "-D", "-S", "--defined-only", "--with-symbol-versions", real).split("\n"):
        fields = line.split()
        if len(fields) < 3 or fields[-2] == "A":
            continue
        size = int(fields[1], 16) if len(fields) == 4 else 0
        symbol, _, version = fields[-1].partition("@")
        defined[symbol] = (fields[-2], size, version.lstrip("@"))
    wanted = {}  # symbol -> version
    versions = set()
    for undefined, section in users:
        for line in undefined.split("\n"):
            symbol, _, version = line.split()[-1].partition("@") if line.strip() else ("", "", "")
            if symbol in defined:
                wanted[symbol] = version.lstrip("@") or defined[symbol][2]
        # Versions required of this library (checked at start even when no symbol uses them).
        current = None
        for line in section.split("\n"):
            if "File:" in line:
                current = line.split("File:")[1].split()[0]
            elif "Name:" in line and current == name:
                versions.add(line.split("Name:")[1].split()[0])
    text, data = [], []
    for symbol in sorted(wanted):
        kind, size, _ = defined[symbol]
        if kind in "TtWiw":
            text.append(f'.globl "{symbol}"\n.type "{symbol}",@function\n"{symbol}":\n  xor %eax, %eax\n  ret\n')
        else:
            data.append(f'.globl "{symbol}"\n.type "{symbol}",@object\n.size "{symbol}",{size}\n'
                        f'"{symbol}":\n  .zero {max(size, 1)}\n')
    nodes = collections.defaultdict(list)
    for symbol, version in wanted.items():
        nodes[version].append(symbol)
    versions |= {v for v in nodes if v}
    with tempfile.TemporaryDirectory() as tmp:
        asm = os.path.join(tmp, "stub.s")
        with open(asm, "w") as f:
            f.write(".text\n" + "".join(text) + ".bss\n" + "".join(data))
        command = ["cc", "-shared", "-nostdlib", "-o", os.path.join(out_dir, name),
                   f"-Wl,-soname,{name}", asm]
        if versions:
            script = os.path.join(tmp, "versions.map")
            with open(script, "w") as f:
                for i, version in enumerate(sorted(versions)):
                    # Unversioned imports bind to any definition: give them the first node.
                    names = nodes.get(version, []) + (nodes.get("", []) if i == 0 else [])
                    symbols = "".join(f" {s};" for s in names)
                    f.write(f"{version} {{ global:{symbols} }};\n" if symbols else f"{version} {{ }};\n")
            command.append(f"-Wl,--version-script,{script}")
        subprocess.run(command, check=True)
    print(f"stub {name}: {len(text)} functions, {len(data)} objects, {len(versions)} versions")


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) < 4 or "--" not in args:
        sys.exit("usage: bench/platform/stub_library.py OUT_DIR REAL_LIB... -- USER_LIB...")
    split = args.index("--")
    users = imports(args[split + 1:])
    for real in args[1:split]:
        stub(real, args[0], users)
