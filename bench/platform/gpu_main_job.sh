#!/usr/bin/env bash
# The whole `dino` program with CUDA on a lent GPU machine (bench/results/gpu.md, "The main job
# on a GPU"): the README's main job with configs/fashion_mnist_gpu.ini, train through report.
# Measured against the CPU main job's report (the same reference rows to the digit, the k-NN
# after more images) and the machine's time: images/s, GPU busy, memory.
#   bench/platform/gpu_main_job.sh BUNDLE [OUT]
# The GPU machine has PyTorch and CUDA but none of OpenCV, HDF5, faiss or Boost, so `dino`
# cannot be built there. It is built here instead, by the README's CUDA recipe with the torch
# that machine has (XDINO_TORCH=2.11.0 scripts/setup.sh --cuda build-t211/venv; cmake ... -B
# build-t211; cmake --build build-t211 --target dino), and travels in BUNDLE with what it needs:
#   BUNDLE/dino            the executable
#   BUNDLE/libs.tar.xz     the Debian 12 libraries it loads that are neither glibc's, the C++
#                          runtime's nor LibTorch's (`bench/platform/gpu_bundle.sh` makes both)
#   BUNDLE/data/           Fashion-MNIST's four IDX files
# LibTorch and the CUDA libraries are the machine's own (its python3's torch), which is why the
# build uses the same torch version.
# GPU_MAIN_EPOCHS (5) epochs of the whole training set (below); GPU_MAIN_TRAIN_SECONDS (240):
# training stops (SIGINT: checkpoint saved) after this long, and the evaluation stages run on
# the checkpoint it left. A rerun on the same machine resumes the run's train/ folder.
set -uo pipefail
bundle=$(cd "${1:?usage: bench/platform/gpu_main_job.sh BUNDLE [OUT]}" && pwd)
out=${2:-${OUT:-/tmp/gpu_main_job}}
mkdir -p "$out"
cd "$(dirname "$0")/../.."
start=$SECONDS
say() { echo "[$((SECONDS - start)) s] $*"; }

source bench/platform/bundle_env.sh
bundle_env "$bundle" python3
say "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
echo "torch $(python3 -c 'import torch; print(torch.__version__)'), cores $(nproc)"
echo "bundle built from $(cat "$bundle/TREE" 2>/dev/null || echo 'an unrecorded tree')"
echo "libraries that do not resolve: $(ldd "$bundle/dino" | grep -c 'not found')"
ldd "$bundle/dino" | grep 'not found'

# The main job's configs, then this check's overlay. GPU_MAIN_OVERLAY (none when unset; e.g.
# configs/fashion_mnist_gpu_10min.ini) sits between them and names the run folder.
# GPU_MAIN_EPOCHS (5) sets the schedule's length, and its warm-ups shrink with it as
# fashion_mnist_gpu_10min.ini's do (an eighth of the epochs for the learning rate, a third for
# the teacher's temperature): a whole schedule, so that the figure is what that many epochs give.
# GPU_MAIN_TRAIN_INI: more [train] lines, one per line, for a lever measured on the card, e.g.
# $'cuda_graph = true\nkoleo_loss_weight = 0.1' (bench/results/gpu.md says which were run).
epochs=${GPU_MAIN_EPOCHS:-5}
cat > /tmp/lease.ini <<EOF
data_path = $bundle/data
num_workers = 12
[train]
epochs = $epochs
warmup_epochs = $(((epochs + 7) / 8))
warmup_teacher_temp_epochs = $(((epochs + 2) / 3))
knn_every = ${GPU_MAIN_KNN_EVERY:-1}
saveckp_freq = 1
${GPU_MAIN_TRAIN_INI:-}
EOF
configs=(--config configs/fashion_mnist.ini --config configs/fashion_mnist_gpu.ini)
[[ -n ${GPU_MAIN_OVERLAY:-} ]] && configs+=(--config "$GPU_MAIN_OVERLAY")
configs+=(--config /tmp/lease.ini)
run=$(sed -n '/^\[train\]/,/^\[/s/^output_dir *= *//p' \
  "${GPU_MAIN_OVERLAY:-configs/fashion_mnist_gpu.ini}" | head -1)
run=$(dirname "$run")
nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader -l 5 \
  > "$out/gpu_use.csv" 2>&1 &
monitor=$!
say "train"
timeout -s INT "${GPU_MAIN_TRAIN_SECONDS:-240}" "$bundle/dino" train "${configs[@]}" \
  > "$out/train.log" 2>&1
say "train exit $?"
grep -vE "^Epoch \[.*\] +[0-9]+/" "$out/train.log" | grep -E "online k-NN|took|Averaged|device|error" | tail -30
say "evaluation stages"
stages=(knn:pixels knn:random knn:dino linear:dino report visualize)
"$bundle/dino" pipeline "${configs[@]}" --stages "${stages[@]}" > "$out/eval.log" 2>&1
say "pipeline exit $?"
kill "$monitor" 2>/dev/null
tail -25 "$out/eval.log"
cp "$run/report.md" "$run/train/log.txt" "$out/" 2>/dev/null
cp "$run/train/curves.png" "$out/" 2>/dev/null
cat "$run/report.md" 2>/dev/null
echo "GPU use (utilization, memory), every 5 s:"
paste -sd' ' "$out/gpu_use.csv" | cut -c1-600
say "done"
