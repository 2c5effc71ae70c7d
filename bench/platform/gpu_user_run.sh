#!/usr/bin/env bash
# A GPU user's run, end to end (issue 62): `dino train` on a folder of JPEG photos at
# 2 x 224 + 8 x 96, the loader decoding and augmenting on the machine's cores while the GPU
# trains, against main_dino.py's whole run on the same folder and card, alternated; then the
# program's own behaviour on the GPU, and the GPU main job sized for one lease.
#   bench/platform/gpu_user_run.sh BUNDLE [OUT]
# BUNDLE is what bench/platform/gpu_bundle.sh packs (dino, bench_train, libs.tar.xz, data/),
# or a build folder of this machine (BUNDLE/dino, BUNDLE/bench/bench_train) for the check on a
# CPU:
#   GPU_USER_DEVICE=cpu GPU_USER_SIZE=tiny PYTHON=build/pyenv/bin/python \
#     bench/platform/gpu_user_run.sh build /tmp/user_run
# Parts, GPU_USER_PARTS, run in the order given (default "data e2e:fp16 e2e:bf16 step program
# resume_cpu_cuda videoseg copydetect"; each a minute or a few on an H100, the last three about
# a minute together, expected from the CPU check); none starts after GPU_USER_DEADLINE seconds
# (0: no limit), so that a lease's logs come back:
#   data     bench/scenarios/make_photos.py: GPU_USER_IMAGES (5120 = 80 steps of 64) training
#            photos of 500 x 375 in 12 classes, and a tenth of that for val;
#   e2e:P    GPU_USER_ROUNDS (1) rounds in precision P (fp16, bf16, fp32), ours then official:
#            `dino train --arch xcit_small_12_p16 --batch_size_per_gpu 64 --local_crops_number 8`
#            (official defaults otherwise, --num_workers GPU_USER_WORKERS, default cores - 2)
#            against bench/reference/official_e2e.py (main_dino.py's train_dino, --num_workers
#            10, its default), 2 epochs each; epoch 1 is measured: images/s, the share of wall
#            time the step waited for data, GPU busy (nvidia-smi, every 0.5 s, over the run),
#            peak GPU memory, host peak RSS;
#   step     bench_train at the same shapes in fp16 and bf16 (the step alone: the rate the
#            loader must keep up with), XCA's op path against scaled_dot_product_attention
#            (--xca ops|sdpa), and a profile of 3 bf16 steps (the kernels' busy time against
#            the wall time, and a Chrome trace);
#   program  SIGTERM in mid-epoch and the same command again, against an uninterrupted run
#            (checkpoint.pth compared byte for byte); the interrupted CUDA checkpoint resumed
#            on the CPU; `dino launch --nproc 1` (NCCL, the peer monitor on) with timed
#            checkpoints every 3 s; knn, linear and features on CUDA on the same photos;
#   resume_cpu_cuda  both directions, to the end of an epoch: xcit_nano_12_p16 (out_dim 1024,
#            batch 4, 48 photos: 12 steps, fp32, no drop path) one uninterrupted epoch on the
#            CPU and one on the device; then 2 steps on one, SIGTERM, and the same command on
#            the other, which must start at the saved iteration and end the epoch with the
#            uninterrupted run's loss on that device within 1e-3 (a guess until a card runs it;
#            0 when both are the CPU);
#   videoseg `dino video_segmentation` (label propagation, J&F) on a DAVIS-like folder
#            (bench/scenarios/make_eval_sets.py davis: GPU_USER_VIDEOS (2) videos of
#            GPU_USER_FRAMES (16) frames, 854 x 480);
#   copydetect  `dino copy_detection` on a Copydays-like folder (make_eval_sets.py copydays:
#            GPU_USER_ORIGINALS (12) originals, 2 strong edits each, the 18 jpegqual and crops
#            blocks, as many distractors, twice as many whitening images) at --imsize 320;
#            videoseg and copydetect load e2e's checkpoint where there is one, else program's,
#            else resume_cpu_cuda's, else random weights (their summary line says which);
#   visualize  `dino visualize` of 3 val photos on the device and with CUDA hidden: every
#            attention picture compared, pixel by pixel;
#   mainjob  configs/fashion_mnist.ini + fashion_mnist_gpu.ini + fashion_mnist_gpu_10min.ini,
#            train to report (about 10 minutes: a lease of its own).
# Everything goes to OUT (the device tool's $OUT); the last lines summarise, one per measure.
# GPU_USER_SIZE=tiny (the CPU check): xcit_nano_12_p16, batch 4, 2 local crops, out_dim 256,
# 48 photos; the official crops stay 224 and 96 (DataAugmentationDINO hard-codes them); 1 video
# of 4 frames, 4 Copydays originals at --imsize 224.
set -uo pipefail
bundle=$(cd "${1:?usage: bench/platform/gpu_user_run.sh BUNDLE [OUT]}" && pwd)
out=${2:-${OUT:-/tmp/gpu_user_run}}
mkdir -p "$out"
cd "$(dirname "$0")/../.."
root=$PWD
start=$SECONDS
say() { echo "[$((SECONDS - start)) s] $*"; }
summary="$out/summary.txt"
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }

python=${PYTHON:-python3}
device=${GPU_USER_DEVICE:-cuda}
parts=${GPU_USER_PARTS:-data e2e:fp16 e2e:bf16 step program resume_cpu_cuda videoseg copydetect}
deadline=${GPU_USER_DEADLINE:-0}
cores=$(nproc)
workers=${GPU_USER_WORKERS:-$((cores > 4 ? cores - 2 : 2))}
if [[ ${GPU_USER_SIZE:-full} == tiny ]]; then
  shape=(--arch xcit_nano_12_p16 --batch_size_per_gpu 4 --local_crops_number 2 --out_dim 256)
  bench_shape=(--arch xcit_nano_12_p16 --batch 4 --locals 2 --out_dim 256)
  images=${GPU_USER_IMAGES:-48}
  videos=${GPU_USER_VIDEOS:-1} frames=${GPU_USER_FRAMES:-4}
  originals=${GPU_USER_ORIGINALS:-4} imsize=224
else
  shape=(--arch xcit_small_12_p16 --batch_size_per_gpu 64 --local_crops_number 8)
  bench_shape=(--arch xcit_small_12_p16 --batch 64 --locals 8 --out_dim 65536)
  images=${GPU_USER_IMAGES:-5120}
  videos=${GPU_USER_VIDEOS:-2} frames=${GPU_USER_FRAMES:-16}
  originals=${GPU_USER_ORIGINALS:-12} imsize=320
fi

source bench/platform/bundle_env.sh
# A bundle: its Debian libraries, the machine's torch; a build folder needs nothing.
[[ -f "$bundle/libs.tar.xz" ]] && bundle_env "$bundle" "$python"
dino=$bundle/dino  # the bundle's, or a build folder's: CMake puts dino at its top, not in launch/
bench_train=$bundle/bench_train
[[ -x $bench_train ]] || bench_train=$bundle/bench/bench_train

# Runs "$@" with stdout+stderr to $log and prints the peak RSS of it and its children, in MiB.
with_rss() {
  local log=$1
  shift
  "$python" -c '
import resource, subprocess, sys
with open(sys.argv[1], "w") as f:
    code = subprocess.call(sys.argv[2:], stdout=f, stderr=subprocess.STDOUT)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024, code)
' "$log" "$@"
}

# Mean GPU utilisation (%) while "$@" runs (nvidia-smi every 0.5 s); "n/a" without one.
gpu_busy_start() {
  if command -v nvidia-smi > /dev/null && [[ $device == cuda* ]]; then
    nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits -lms 500 \
      > "$1" 2>/dev/null &
    echo $!
  else
    : > "$1"
    echo ""
  fi
}
gpu_busy_stop() {  # PID FILE
  [[ -n $1 ]] && kill "$1" 2>/dev/null
  awk '{ s += $1; n++ } END { if (n) printf "%.0f%%", s / n; else printf "n/a" }' "$2"
}

say "machine"
{
  command -v nvidia-smi > /dev/null &&
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  "$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
  echo "cores $cores, device $device, our --num_workers $workers, size ${GPU_USER_SIZE:-full}"
  echo "libraries of dino that do not resolve: $(ldd "$dino" | grep -c 'not found')"
} 2>&1 | tee "$out/machine.txt"

photos=/tmp/xdino_photos_$images
part_data() {
  say "data: $images training photos"
  [[ -d $photos/train ]] ||
    "$python" bench/scenarios/make_photos.py "$photos" --train "$images" \
      --val $((images / 10 > 12 ? images / 10 : 12)) --workers "$cores" | tee "$out/photos.json"
}

ours_train() {  # PRECISION OUTPUT_DIR [FLAG...]; `exec`: started with & its pid is dino's
  local precision=$1 dir=$2
  shift 2
  exec "$dino" train "${shape[@]}" --data_path "$photos/train" --output_dir "$dir" \
    --num_workers "$workers" --device "$device" --precision "$precision" "$@"
}

part_e2e() {  # PRECISION
  local precision=$1 round rss code busy mon line
  for round in $(seq "${GPU_USER_ROUNDS:-1}"); do
    say "e2e round $round, $precision: ours"
    rm -rf /tmp/xdino_e2e_ours
    mon=$(gpu_busy_start "$out/gpu_ours_$precision.$round")
    read -r rss code < <(with_rss "$out/ours_$precision.$round.log" \
      "$dino" train "${shape[@]}" --data_path "$photos/train" \
      --output_dir /tmp/xdino_e2e_ours --num_workers "$workers" --device "$device" \
      --precision "$precision" --epochs 2 --warmup_epochs 1 --saveckp_freq 0)
    busy=$(gpu_busy_stop "$mon" "$out/gpu_ours_$precision.$round")
    line=$(grep -a "^Epoch 1:" "$out/ours_$precision.$round.log" | tail -1)
    note "ours $precision round $round: exit $code; ${line#Epoch 1: }; GPU busy $busy; host RSS ${rss} MiB"
    say "e2e round $round, $precision: official"
    rm -rf /tmp/xdino_e2e_official
    mon=$(gpu_busy_start "$out/gpu_official_$precision.$round")
    read -r rss code < <(with_rss "$out/official_$precision.$round.log" \
      "$python" bench/reference/official_e2e.py --precision "$precision" "${shape[@]}" \
      --data_path "$photos/train" --output_dir /tmp/xdino_e2e_official --epochs 2 \
      --warmup_epochs 1 --saveckp_freq 0)
    busy=$(gpu_busy_stop "$mon" "$out/gpu_official_$precision.$round")
    line=$(grep -a '"epoch": 1' "$out/official_$precision.$round.log" | tail -1)
    note "official $precision round $round: exit $code; $line; GPU busy $busy; host RSS ${rss} MiB"
  done
}

bench() {  # LABEL FLAG...: one bench_train line at the e2e shapes, into the summary
  local label=$1
  shift
  timeout 120 "$bench_train" "${bench_shape[@]}" --device "$device" --steps 10 --warmup 3 "$@" \
    2>> "$out/bench_train.err" | grep '^{' | tee -a "$out/bench_train.jsonl" |
    sed "s/^/$label: /" | tee -a "$summary"
}

part_step() {
  [[ -x $bench_train ]] || { note "step: no bench_train in $bundle"; return; }
  local precision xca precisions=(fp16 bf16)
  [[ $device == cpu ]] && precisions=(fp32)
  for precision in "${precisions[@]}"; do
    say "the step alone, XCA's two paths: bench_train $precision"
    for xca in ops sdpa; do
      bench "bench_train $precision xca $xca" --precision "$precision" --xca "$xca"
    done
  done
  say "profile: 3 steps in ${precisions[-1]}"
  bench "profile ${precisions[-1]}" --precision "${precisions[-1]}" --steps 3 \
    --profile /tmp/xdino_trace
  # Chrome traces are large and compress well; the device tool returns files of 16 MiB at most.
  for f in /tmp/xdino_trace.*.json; do [[ -f $f ]] && xz -T0 -c "$f" > "$out/trace.json.xz"; done
}

part_program() {
  local small=(--max_samples $((images < 640 ? images : 640)) --epochs 1 --warmup_epochs 0
               --saveckp_freq 1)
  local precision=bf16 work=/tmp/xdino_program seconds pid cmd extra t0 rss code
  [[ $device == cpu ]] && precision=fp32
  rm -rf "$work" && mkdir -p "$work"
  say "program: an uninterrupted run"
  (ours_train "$precision" "$work/run" "${small[@]}") > "$out/program_ref.log" 2>&1
  mv "$work/run" "$work/ref"
  seconds=$(grep -a "^Epoch 0:" "$out/program_ref.log" | sed 's/.* in \([0-9.]*\) s.*/\1/')
  say "program: SIGTERM after half of its ${seconds:-?} s of steps, then the same command"
  ours_train "$precision" "$work/run" "${small[@]}" > "$out/program_killed.log" 2>&1 &
  pid=$!  # dino's own (ours_train execs it in the background subshell)
  for _ in $(seq 600); do
    grep -aq "Starting DINO training" "$out/program_killed.log" && break
    sleep 0.1
  done
  sleep "$("$python" -c "print(max(0.5, float('${seconds:-2}') / 2))")"
  kill -TERM "$pid"
  wait "$pid"
  note "SIGTERM: exit $?; $(grep -a "Stopped by signal" "$out/program_killed.log" | tail -1)"
  cp -r "$work/run" "$work/on_cpu"
  (ours_train "$precision" "$work/run" "${small[@]}") > "$out/program_resumed.log" 2>&1
  if cmp -s "$work/ref/checkpoint.pth" "$work/run/checkpoint.pth"; then
    note "resumed on $device: checkpoint.pth equals the uninterrupted run's, byte for byte"
  else
    note "resumed on $device: checkpoint.pth DIFFERS from the uninterrupted run's;" \
      "log.txt: $(diff <(cat "$work/ref/log.txt") "$work/run/log.txt" > /dev/null && echo same || echo differs)"
  fi
  say "program: dino launch --nproc 1, timed checkpoints every 3 s"
  "$dino" launch --nproc 1 -- train "${shape[@]}" --data_path "$photos/train" \
    --output_dir "$work/launched" --num_workers "$workers" --device "$device" \
    --precision "$precision" "${small[@]}" --saveckp_minutes 0.05 > "$out/program_launch.log" 2>&1
  note "launch --nproc 1: exit $?; alarms: $(grep -acE 'lost|not heard|timed out|hung' "$out/program_launch.log");" \
    "$(grep -a 'checkpoint' "$out/program_launch.log" | grep -ac 'saved') timed saves;" \
    "$(grep -a '^Epoch 0:' "$out/program_launch.log")"
  say "program: knn, linear, features on $device"
  local cuda_flag=(--use_cuda "$([[ $device == cuda* ]] && echo true || echo false)")
  local weights=(--arch "${shape[1]}" --pretrained_weights "$work/ref/checkpoint.pth")
  for cmd in knn linear features; do
    extra=(--output_dir "$work/eval_$cmd")  # the session picks CUDA where there is one
    [[ $cmd == knn ]] && extra+=("${cuda_flag[@]}" --nb_knn 10 20)  # eval_knn.py's own flag
    [[ $cmd == features ]] && extra=(--output "$work/features.h5")
    [[ $cmd == linear ]] && extra+=(--epochs 2)
    t0=$SECONDS
    read -r rss code < <(with_rss "$out/program_$cmd.log" "$dino" "$cmd" "${weights[@]}" \
      --data_path "$photos" --num_workers "$workers" "${extra[@]}")
    note "$cmd: exit $code in $((SECONDS - t0)) s, host RSS $rss MiB;" \
      "$(grep -aE '20-NN classifier|Top-1 test accuracy|^wrote|error' "$out/program_$cmd.log" |
        tail -1)"
  done
  # Last, as the slowest: the rest of the interrupted epoch on the host's cores.
  say "program: the interrupted checkpoint resumed on the CPU"
  mv "$work/on_cpu" "$work/run_cpu"
  timeout 150 "$dino" train "${shape[@]}" --data_path "$photos/train" \
    --output_dir "$work/run_cpu" --num_workers "$workers" --device cpu --precision fp32 \
    "${small[@]}" > "$out/program_cpu.log" 2>&1
  note "resumed on the CPU: exit $?; $(grep -a 'Starting DINO training' "$out/program_cpu.log")"
  note "  log.txt on $device: $(cut -c1-90 "$work/run/log.txt")"
  note "  log.txt on cpu:  $(cut -c1-90 "$work/run_cpu/log.txt" 2>/dev/null)"
}

# The CPU-to-CUDA direction of resuming (program does CUDA to CPU): a run begun where there is no
# GPU and carried to one. A small model, so that the CPU steps take seconds; the signal comes
# after 2 steps (a progress line per step), so the checkpoint is mid-epoch; the CUDA run is the
# same command with --device changed, precision left at auto, as a user would rerun it.
# One run of the resume check's command on device $2 into folder $1, stopped by SIGTERM after
# its second step when $3 is "stop"; prints the iteration checkpoint.pth was saved before.
resume_run() {
  local dir=$1 on=$2 stop=$3 log=$1.$2.log pid
  XDINO_PROGRESS_INTERVAL=0 timeout 300 "$dino" "${resume_args[@]}" --output_dir "$dir" \
    --device "$on" > "$log" 2>&1 &
  pid=$!  # timeout's: it passes the SIGTERM on to dino
  if [[ $stop == stop ]]; then
    for _ in $(seq 1200); do
      grep -aq 'Epoch \[0/1\] 2/' "$log" && break
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -TERM "$pid" 2>/dev/null
  fi
  wait "$pid"
  grep -ao 'saved before iteration [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$'
}

# The epoch's train_loss in folder $1's log.txt.
epoch_loss() { sed -n 's/.*"train_loss": \([-0-9.e+]*\).*/\1/p' "$1/log.txt" 2>/dev/null | tail -1; }

part_resume_cpu_cuda() {
  local work=/tmp/xdino_resume t0=$SECONDS from to saved started whole resumed
  # fp32 and no drop path on both devices, so that the two runs of one device differ only by
  # the device the first two steps ran on.
  resume_args=(train --arch xcit_nano_12_p16 --out_dim 1024 --batch_size_per_gpu 4
               --local_crops_number 2 --data_path "$photos/train" --max_samples 48 --epochs 1
               --warmup_epochs 0 --saveckp_freq 0 --num_workers "$workers" --precision fp32
               --drop_path_rate 0)
  rm -rf "$work" && mkdir -p "$work"
  say "resume_cpu_cuda: one uninterrupted epoch on each device, then 2 steps on one, SIGTERM," \
    "and the rest of the epoch on the other, both ways"
  for on in cpu "$device"; do
    [[ -d $work/whole_$on ]] || resume_run "$work/whole_$on" "$on" whole > /dev/null
  done
  for from in $(printf '%s\n' cpu "$device" | sort -u); do
    to=$([[ $from == cpu ]] && echo "$device" || echo cpu)
    saved=$(resume_run "$work/${from}_to_$to" "$from" stop)
    if [[ -z $saved ]]; then
      note "resume_cpu_cuda: $from -> $to: no checkpoint after the SIGTERM; see $work/${from}_to_$to.$from.log"
      continue
    fi
    resume_run "$work/${from}_to_$to" "$to" whole > /dev/null
    cp "$work/${from}_to_$to.$from.log" "$out/resume_${from}_to_${to}_first.log" 2>/dev/null
    cp "$work/${from}_to_$to.$to.log" "$out/resume_${from}_to_${to}_then.log" 2>/dev/null
    started=$(grep -ao 'Starting DINO training at epoch [0-9]*, iteration [0-9]*' \
      "$out/resume_${from}_to_${to}_then.log")
    whole=$(epoch_loss "$work/whole_$to")
    resumed=$(epoch_loss "$work/${from}_to_$to")
    note "resume_cpu_cuda: $from -> $to: saved before iteration $saved;" \
      "'${started:-no start line}' ($([[ $started == *"epoch 0, iteration $saved" ]] &&
        echo "the saved iteration" || echo "NOT the saved iteration"));" \
      "epoch loss $resumed against $whole uninterrupted on $to: $("$python" -c \
        "import sys; a, b = map(float, sys.argv[1:]); d = abs(a - b) / abs(b)
print(f'relative difference {d:.2e}', 'within' if d <= 1e-3 else 'OVER', 'the bound 1e-3')" \
        "${resumed:-nan}" "${whole:-nan}" 2>&1)"
  done
  cp -r "$work/${device}_to_cpu" "$work/run" 2>/dev/null  # eval_weights' checkpoint
  note "resume_cpu_cuda: $((SECONDS - t0)) s"
}

# --arch and --pretrained_weights for videoseg and copydetect: the most trained checkpoint at
# hand, e2e's (2 epochs of all the photos), else program's (1 epoch of 640), else
# resume_cpu_cuda's (12 steps of xcit_nano_12_p16), else none: random weights of shape's arch.
eval_weights() {
  local dir
  for dir in /tmp/xdino_e2e_ours /tmp/xdino_program/ref /tmp/xdino_resume/run; do
    if [[ -f $dir/checkpoint.pth && -f $dir/config.ini ]]; then
      echo --arch "$(sed -n 's/^arch = //p' "$dir/config.ini")" \
        --pretrained_weights "$dir/checkpoint.pth"
      return
    fi
  done
  echo --arch "${shape[1]}"
}
weights_said() {  # FLAG...: eval_weights's flags in words, for the summary
  [[ $* == *--pretrained_weights* ]] && echo "$2, weights $4" || echo "$2, RANDOM weights"
}

part_videoseg() {
  local data=/tmp/xdino_davis_${videos}x$frames weights rss code t0
  [[ -d $data/ImageSets ]] ||
    "$python" bench/scenarios/make_eval_sets.py davis "$data" --videos "$videos" \
      --frames "$frames" | tee "$out/davis.json"
  read -ra weights < <(eval_weights)
  say "videoseg: $videos x $frames frames, $(weights_said "${weights[@]}")"
  t0=$SECONDS
  read -r rss code < <(with_rss "$out/videoseg.log" timeout 300 "$dino" video_segmentation \
    "${weights[@]}" --data_path "$data" --output_dir /tmp/xdino_videoseg)
  note "videoseg: exit $code in $((SECONDS - t0)) s, host RSS $rss MiB;" \
    "$(weights_said "${weights[@]}");" \
    "$(grep -aE 'J&F-Mean|error' "$out/videoseg.log" | tail -1)"
}

# dino visualize on the device and on the CPU (CUDA_VISIBLE_DEVICES empty), the same 3 photos
# and weights: both exit 0, and every attention picture agrees within a grey level or two.
part_visualize() {
  local weights pick t0=$SECONDS code_dev code_cpu on
  read -ra weights < <(eval_weights)
  pick=($(find "$photos/val" -type f | sort | head -3))
  say "visualize: ${#pick[@]} photos on $device and on the CPU, $(weights_said "${weights[@]}")"
  rm -rf /tmp/xdino_vis_dev /tmp/xdino_vis_cpu
  timeout 300 "$dino" visualize "${weights[@]}" --image_path "${pick[@]}" --image_size 224 \
    --threshold 0.6 --output_dir /tmp/xdino_vis_dev > "$out/visualize_dev.log" 2>&1
  code_dev=$?
  CUDA_VISIBLE_DEVICES= timeout 300 "$dino" visualize "${weights[@]}" --image_path "${pick[@]}" \
    --image_size 224 --threshold 0.6 --output_dir /tmp/xdino_vis_cpu > "$out/visualize_cpu.log" 2>&1
  code_cpu=$?
  on=$(grep -ao 'the model runs on [a-z:0-9]*' "$out/visualize_dev.log" | head -1)
  note "visualize: exit $code_dev (${on:-no device line}), exit $code_cpu with CUDA hidden," \
    "$((SECONDS - t0)) s; $("$python" - /tmp/xdino_vis_dev /tmp/xdino_vis_cpu <<'PY' 2>&1 | tail -1
import pathlib, sys
import numpy as np
from PIL import Image
a, b = map(pathlib.Path, sys.argv[1:])
names = sorted(p.relative_to(a) for p in a.rglob("attn-head*.png"))
worst = max((np.abs(np.asarray(Image.open(a / n), np.int16) -
                    np.asarray(Image.open(b / n), np.int16)).max() for n in names), default=-1)
print(f"{len(names)} attention pictures, largest pixel difference device vs CPU: {worst}")
PY
)"
}

part_copydetect() {
  local data=/tmp/xdino_copydays_$originals weights rss code t0
  [[ -d $data/original ]] ||
    "$python" bench/scenarios/make_eval_sets.py copydays "$data" --originals "$originals" |
      tee "$out/copydays.json"
  read -ra weights < <(eval_weights)
  say "copydetect: $originals originals at $imsize, $(weights_said "${weights[@]}")"
  t0=$SECONDS
  read -r rss code < <(with_rss "$out/copydetect.log" timeout 300 "$dino" copy_detection \
    "${weights[@]}" --data_path "$data" --whitening_path "$data/whitening" \
    --distractors_path "$data/distractors" --imsize "$imsize" --num_workers "$workers" \
    --output_dir /tmp/xdino_copydetect)
  note "copydetect: exit $code in $((SECONDS - t0)) s, host RSS $rss MiB;" \
    "$(weights_said "${weights[@]}");" \
    "$(grep -aE 'Copy detection:|error' "$out/copydetect.log" | tail -1)"
}

part_mainjob() {
  say "the GPU main job, sized for a lease (configs/fashion_mnist_gpu_10min.ini)"
  local data=/usr/share/datasets/fashion-mnist t0=$SECONDS
  [[ -d $bundle/data ]] && data=$bundle/data
  "$dino" pipeline --config configs/fashion_mnist.ini --config configs/fashion_mnist_gpu.ini \
    --config configs/fashion_mnist_gpu_10min.ini --data_path "$data" > "$out/mainjob.log" 2>&1
  note "main job: exit $? in $((SECONDS - t0)) s"
  cp runs/fashion_mnist_gpu_10min/report.md runs/fashion_mnist_gpu_10min/train/curves.png \
    runs/fashion_mnist_gpu_10min/train/log.txt "$out/" 2>/dev/null
  grep -aE "^\| " runs/fashion_mnist_gpu_10min/report.md 2>/dev/null | tee -a "$summary"
}

# e2e, program and resume_cpu_cuda read the photos: made here when the parts do not name data.
[[ " $parts " != *" data "* && " $parts " =~ (e2e|program|resume_cpu_cuda|visualize) ]] && part_data
for part in $parts; do
  if ((deadline > 0 && SECONDS - start >= deadline)); then
    note "$part: not started, ${deadline} s (GPU_USER_DEADLINE) had passed"
    continue
  fi
  case $part in
    data | step | program | resume_cpu_cuda | videoseg | copydetect | visualize | mainjob) "part_$part" ;;
    e2e:*) part_e2e "${part#e2e:}" ;;
    *) echo "gpu_user_run: unknown part '$part' (data, e2e:PRECISION, step, program," \
         "resume_cpu_cuda, videoseg, copydetect, visualize, mainjob)" >&2
       exit 2 ;;
  esac
done
say "done"
echo "--- summary"
cat "$summary"
