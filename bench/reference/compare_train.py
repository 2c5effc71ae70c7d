#!/usr/bin/python3
"""Side-by-side DINO training-step timings, alternating runs so that all see the same machine
load, with the median of each: build/bench/bench_train (ours), optionally a second bench_train
built from an older commit (--baseline, "today's code" when measuring a speed-up), and the
official step (bench/reference/official_step.py: main_dino.py's train_one_epoch on the fetched
official code, scripts/fetch_official.sh). Results: bench/results/training_step_cpu.md.

usage: /usr/bin/python3 bench/reference/compare_train.py [--rounds 3] [--steps 5] [--warmup 2]
           [--archs xcit_nano_12_p16] [--out_dims 65536] [--batch 8] [--threads N]
           [--global_size 224 --local_size 96 --locals 8 --head_hidden_dim 2048]
           [--baseline /path/to/old/bench_train] [--no_official] [--replicas N]
           [--official_threads N]
The main job's shapes: --archs xcit_nano_4_p4 --out_dims 1024 --batch 32 --global_size 28
--local_size 12 --locals 6 --head_hidden_dim 1024.
Prints a Markdown table: seconds per step (median, min-max), images/s, and each row's step
time as a multiple of ours (above 1: slower than ours).
--replicas goes to ours only (docs/dino.md, "Replicas"); --official_threads sets the official
step's torch.set_num_threads apart from --threads (both default: each program's own default).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def last_json(text):
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError("no JSON line in output:\n" + text)


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"compare_train.py: {' '.join(cmd)} failed:\n{p.stdout}{p.stderr}")
    return last_json(p.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench",
                    default=os.path.join(HERE, "..", "..", "build", "bench", "bench_train"))
    ap.add_argument("--baseline", help="another bench_train binary, timed beside ours")
    ap.add_argument("--no_official", action="store_true")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--archs", default="xcit_nano_12_p16")
    ap.add_argument("--out_dims", default="65536")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--replicas", type=int, default=0)
    ap.add_argument("--official_threads", type=int, default=0)
    ap.add_argument("--global_size", type=int, default=224)
    ap.add_argument("--local_size", type=int, default=96)
    ap.add_argument("--locals", type=int, default=8)
    ap.add_argument("--head_hidden_dim", type=int, default=2048)
    a = ap.parse_args()
    common = ["--steps", str(a.steps), "--warmup", str(a.warmup), "--batch", str(a.batch),
              "--global_size", str(a.global_size), "--local_size", str(a.local_size),
              "--locals", str(a.locals), "--head_hidden_dim", str(a.head_hidden_dim)]
    if a.threads:
        common += ["--threads", str(a.threads)]
    impls = [("ours", [a.bench] + (["--replicas", str(a.replicas)] if a.replicas else []))]
    if a.baseline:
        impls.append(("baseline", [a.baseline]))
    if not a.no_official:
        official = [sys.executable, os.path.join(HERE, "official_step.py")]
        if a.official_threads:
            official = official + ["--threads", str(a.official_threads)]
        impls.append(("official", official))
    print("| arch | out_dim | impl | s/step median (min-max) | img/s | x ours |")
    print("|---|---|---|---|---|---|")
    for arch in a.archs.split(","):
        for dim in a.out_dims.split(","):
            runs = {name: [] for name, _ in impls}
            for _ in range(a.rounds):
                for name, cmd in impls:
                    r = run(cmd + ["--arch", arch, "--out_dim", dim] + common)
                    runs[name].append(r)
                    print(f"{arch} {dim} {name}: {r['sec_per_step']:.3f} s", file=sys.stderr)
            med = {n: statistics.median(r["sec_per_step"] for r in rs) for n, rs in runs.items()}
            for name, rs in runs.items():
                secs = [r["sec_per_step"] for r in rs]
                print(f"| {arch} | {dim} | {name} | {med[name]:.3f} ({min(secs):.3f}-"
                      f"{max(secs):.3f}) | {a.batch / med[name]:.1f} | "
                      f"{med[name] / med['ours']:.2f} |")


if __name__ == "__main__":
    main()
