#!/bin/bash
# Step-time scaling of `dino train` from 1 to 2 processes on the CPU (Gloo on loopback), at
# the same total batch of 64 images per step: 1 process with --batch_size_per_gpu 64 against
# `dino launch --nproc 2` with 32 each (one OpenMP/OpenBLAS thread per process).
#   bench/scenarios/dist_train_scaling.sh [build_dir=build] [rounds=2]
# XCiT-nano/8, 2 global crops of 32 px + 8 local crops of 16 px, out_dim 4096, Fashion-MNIST
# (640 images: 10 steps per epoch), 2 epochs; the figure is the second epoch's rate (the first
# includes start-up and warm-up), in images/s. The configurations alternate, so both see the
# same background load; one line per run, then the medians.
set -euo pipefail
build=${1:-build}
rounds=${2:-2}
data=${XDINO_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

args=(--data_path "$data" --max_samples 640 --arch xcit_nano_12_p8 --out_dim 4096
      --global_crops_size 32 --local_crops_size 16 --local_crops_number 8 --epochs 2
      --warmup_epochs 0 --num_workers 1 --saveckp_freq 0 --device cpu)

# Images/s of epoch 1 from the progress line "Epoch [1/2] 10/10 (100%) R it/s, took ...".
rate() { grep -a 'Epoch \[1/2\] 10/10 (100%).*took' | tail -1 | sed 's/.*(100%) \([0-9.e+]*\) it\/s.*/\1/' |
         awk '{printf "%.1f", $1 * 64}'; }

declare -A results
for round in $(seq "$rounds"); do
  for config in one two; do
    rm -rf "$tmp/out"
    if [[ $config == one ]]; then
      r=$("$build/dino" train "${args[@]}" --batch_size_per_gpu 64 --output_dir "$tmp/out" | rate)
    else
      r=$(OMP_NUM_THREADS=1 "$build/dino" launch --nproc 2 -- train "${args[@]}" \
            --batch_size_per_gpu 32 --output_dir "$tmp/out" | rate)
    fi
    echo "round $round: $config process(es): $r img/s"
    results[$config]+="$r "
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
one=$(echo "${results[one]}" | median)
two=$(echo "${results[two]}" | median)
echo "median: 1 process $one img/s, 2 processes $two img/s, speed-up $(awk -v a="$one" -v b="$two" 'BEGIN {printf "%.2f", b / a}')x"
