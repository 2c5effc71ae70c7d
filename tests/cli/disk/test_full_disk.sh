#!/usr/bin/env bash
# The README's main job at smoke size (`dino pipeline` with configs/fashion_mnist.ini and
# fashion_mnist_smoke.ini: training with checkpoints, three k-NN runs, the linear probe, the
# report, the pictures) writing to a disk that fills up: a tmpfs mounted with size=, which
# refuses a write past it with ENOSPC as a full disk does. The disk fills during training (a
# disk of half what training writes), and during the evaluations, report and pictures (training
# done, then a file leaves 1%, 5% or 90% of what they write); each time:
#  1. the pipeline exits 1 and its last line names the file and "No space left on device";
#  2. nothing is half-written: no temporary is left behind, every checkpoint present is a
#     whole zip whose CRC-32s hold (checkpointNNNN.pth equal the uninterrupted run's byte for
#     byte), every JSON present parses;
#  3. once space is freed (the tmpfs grown, the file removed), the same command finishes, with the checkpoint,
#     the k-NN and linear results and the report of the uninterrupted run.
# usage: test_full_disk.sh DINO_BINARY
# Needs root (mount); without it skipped (77), or failed under XDINO_REQUIRE_ALL=1.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
source "$root/tests/support/require.sh"
dino=$(readlink -f "$1")
require_root "mounting a small tmpfs"
require_command python3 python3
require_fashion_mnist

work=$(mktemp -d /tmp/xdino_full_disk.XXXXXX)
disk=$work/disk
mkdir "$disk"
cleanup() {
  umount "$disk" 2>/dev/null || true
  if [[ -n ${failed:-} ]]; then echo "logs: $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
fail() { echo "FAIL: $*" >&2; failed=1; exit 1; }

pipeline() {  # DIR LOG: the main job at smoke size, its outputs under DIR/runs
  (cd "$1" && "$dino" pipeline --config "$root/configs/fashion_mnist.ini" \
    --config "$root/configs/fashion_mnist_smoke.ini") >"$2" 2>&1
}
results() {  # DIR: the numbers a user reads (k-NN and linear accuracies, the report's table)
  (cd "$1/runs/fashion_mnist_smoke" &&
   python3 -c 'import json, sys
for f in sys.argv[1:]:
    r = json.load(open(f))
    print(f, {k: v for k, v in r.items() if "acc" in k or k in ("top1", "top5")})' \
     $(find . -name 'knn.json' -o -name 'linear.json' | sort) &&
   grep '^|' report.md)
}

mkdir "$work/ref"
pipeline "$work/ref" "$work/ref.log" || fail "the uninterrupted pipeline: $(tail -3 "$work/ref.log")"
total=$(du -sb "$work/ref/runs" | cut -f1)
results "$work/ref" >"$work/ref.results"
[[ -s $work/ref.results ]] || fail "the uninterrupted pipeline wrote no results"

# The checks after a run that met a full disk (exit 1, its line, nothing half-written), and after
# the rerun once space is back (the uninterrupted run's checkpoint and results).
check_full() {  # WHAT LOG
  local what=$1 log=$2 code=0 last leftovers f
  pipeline "$disk" "$log" || code=$?
  [[ $code == 1 ]] || fail "$what: exit $code, expected 1: $(tail -3 "$log")"
  last=$(grep -v '^\s*$' "$log" | tail -1)
  [[ $last == *"No space left on device"* ]] ||
    fail "$what: the last line does not say the disk is full: $last"
  leftovers=$(find "$disk" -name '*.tmp-*')
  [[ -z $leftovers ]] || fail "$what: temporaries left behind: $leftovers"
  # checkpoint.pth is the last complete epoch's: a whole zip whose every CRC-32 holds;
  # checkpointNNNN.pth, written once each, are the uninterrupted run's.
  while IFS= read -r f; do
    python3 -c 'import sys, zipfile; sys.exit(zipfile.ZipFile(sys.argv[1]).testzip() is not None)' \
      "$disk/$f" 2>/dev/null || fail "$what: $f is not a complete checkpoint"
    [[ $f != *checkpoint[0-9]*.pth ]] || cmp -s "$disk/$f" "$work/ref/$f" ||
      fail "$what: $f differs from the uninterrupted run's"
  done < <(cd "$disk" && find . -name '*.pth')
  while IFS= read -r f; do
    python3 -m json.tool "$disk/$f" >/dev/null 2>&1 || fail "$what: $f is not valid JSON"
  done < <(cd "$disk" && find . -name '*.json')
  echo "ok: $what: exit 1 with '${last:0:150}...'"
}
check_rerun() {  # WHAT LOG
  pipeline "$disk" "$2" || fail "the rerun after freeing space ($1): $(tail -3 "$2")"
  cmp -s "$disk/runs/fashion_mnist_smoke/train/checkpoint.pth" \
    "$work/ref/runs/fashion_mnist_smoke/train/checkpoint.pth" ||
    fail "the rerun after freeing space ($1): checkpoint.pth differs from the uninterrupted run's"
  diff <(results "$disk") "$work/ref.results" >&2 ||
    fail "the rerun after freeing space ($1): results differ from the uninterrupted run's"
  echo "ok: $1: once space is freed the same command ends with the uninterrupted run's checkpoint and results"
}

# 1. The disk fills during training: a disk of half what training writes.
train_bytes=$(du -sb "$work/ref/runs/fashion_mnist_smoke/train" | cut -f1)
mount -t tmpfs -o size=$((train_bytes / 2)) xdino_full_disk "$disk"
check_full "a disk of half the training's $train_bytes bytes" "$work/train.log"
mount -o remount,size=$((total * 3)) "$disk"
check_rerun "full during training" "$work/train.rerun.log"
umount "$disk"

# 2. The disk fills during the evaluations, report and pictures: the uninterrupted run's
#    training (its folder holds no absolute path) on a large disk; then, for each case, their outputs removed and a file taking all but PERCENT% of
#    what they occupy (in the disk's blocks): 1% fails in the first k-NN run, 5% in the
#    linear probe, 90% in the pictures.
eval_bytes=$(($(du -B1 -s "$work/ref/runs" | cut -f1) -
              $(du -B1 -s "$work/ref/runs/fashion_mnist_smoke/train" | cut -f1)))
mount -t tmpfs -o size=$((total * 3)) xdino_full_disk "$disk"
mkdir -p "$disk/runs/fashion_mnist_smoke"
cp -a "$work/ref/runs/fashion_mnist_smoke/train" "$disk/runs/fashion_mnist_smoke/"
for percent in 1 5 90; do
  find "$disk/runs/fashion_mnist_smoke" -mindepth 1 -maxdepth 1 ! -name train -exec rm -rf {} +
  avail=$(df -B1 --output=avail "$disk" | tail -1)
  head -c $((avail - eval_bytes * percent / 100)) /dev/zero >"$disk/filler" 2>/dev/null || true
  check_full "$percent% of the evaluations' $eval_bytes bytes free" "$work/eval$percent.log"
  rm "$disk/filler"
  check_rerun "full during the evaluations ($percent%)" "$work/eval$percent.rerun.log"
done
umount "$disk"
