#!/usr/bin/python3
"""Side-by-side DINO training-step timings: build/bench/bench_train against
bench/official_dino_step.py (the official PyTorch step), alternating runs so that both see the
same machine load, and the median of each.

usage: /usr/bin/python3 bench/compare_train.py [--rounds 3] [--steps 3] [--warmup 1]
           [--archs xcit_nano_12_p16,xcit_tiny_12_p16] [--out_dims 65536,4096] [--threads N]
Prints a Markdown table (seconds per step, images/s, phase breakdown, ratio Python/ours).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PHASES = ["data_sec", "forward_sec", "backward_sec", "optimizer_sec", "ema_sec"]


def last_json(text):
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError("no JSON line in output:\n" + text)


def run(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return last_json(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", default=os.path.join(HERE, "..", "build", "bench", "bench_train"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--archs", default="xcit_nano_12_p16,xcit_tiny_12_p16")
    ap.add_argument("--out_dims", default="65536,4096")
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    common = ["--steps", str(a.steps), "--warmup", str(a.warmup), "--batch", str(a.batch)]
    if a.threads:
        common += ["--threads", str(a.threads)]
    rows = []
    for arch in a.archs.split(","):
        for dim in a.out_dims.split(","):
            ours, theirs = [], []
            for _ in range(a.rounds):
                ours.append(run([a.bench, "--arch", arch, "--out_dim", dim] + common))
                theirs.append(run([sys.executable, os.path.join(HERE, "official_dino_step.py"),
                                   "--arch", arch, "--out_dim", dim] + common))
                print(f"{arch} {dim}: ours {ours[-1]['sec_per_step']:.3f} s, "
                      f"official {theirs[-1]['sec_per_step']:.3f} s", file=sys.stderr)
            med = lambda runs, k: statistics.median(r[k] for r in runs)  # noqa: E731
            rows.append((arch, dim, ours, theirs, med))
    print("| arch | out_dim | impl | s/step | img/s | data | forward | backward | optimizer | EMA |"
          " official/ours |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for arch, dim, ours, theirs, med in rows:
        ratio = med(theirs, "sec_per_step") / med(ours, "sec_per_step")
        for name, runs in (("ours", ours), ("official", theirs)):
            cells = " | ".join(f"{med(runs, k):.3f}" for k in PHASES)
            r = f"{ratio:.2f}x" if name == "ours" else ""
            print(f"| {arch} | {dim} | {name} | {med(runs, 'sec_per_step'):.3f} | "
                  f"{med(runs, 'images_per_sec'):.2f} | {cells} | {r} |")


if __name__ == "__main__":
    main()
