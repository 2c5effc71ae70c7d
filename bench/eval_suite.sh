#!/bin/bash
# Time per image / frame of `dino copy_detection`, `dino retrieval` and `dino video_segmentation`
# next to the
# official scripts' code paths on the same CPU and data (bench/official_eval_suite.py, which
# imports a fetched checkout: scripts/fetch_official.sh). Random ViT-S/16 weights on both sides
# (the time does not depend on the weights). Data: the tests' synthetic Copydays and DAVIS
# sets, the latter with FRAMES frames per video (480 x 832 after the scripts' resize).
#   bench/eval_suite.sh [BUILD_DIR] [FRAMES]
# Needs python3-torchvision and, for the official DAVIS path, python3-opencv.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
frames=${2:-16}
threads=2
work=$(mktemp -d /tmp/xdino_eval_suite.XXXXXX)
trap 'rm -rf "$work"' EXIT
export OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=1
[ -d bench/official/dino ] || { echo "run scripts/fetch_official.sh first" >&2; exit 2; }
/usr/bin/python3 tests/data/retrieval/make_sets.py copydays "$work/copydays"
/usr/bin/python3 tests/data/video/make_davis.py "$work/davis" "$frames"
/usr/bin/python3 tests/data/retrieval/make_sets.py revisited "$work/revisited"
/usr/bin/python3 -c "import json, pickle, sys; pickle.dump(json.load(open(sys.argv[1])), \
  open(sys.argv[2], 'wb'))" "$work/revisited/ground.json" "$work/revisited/roxford5k/gnd_roxford5k.pkl"

echo "== copy detection: ViT-S/16 at 320 x 320, CLS + GeM"
"$build/dino" copy_detection --data_path "$work/copydays" --arch vit_small --patch_size 16 \
  --imsize 320 --num_workers $threads --output_dir "$work/cd" > "$work/cd.log" 2>&1
/usr/bin/python3 - "$work/cd/copy_detection.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
n = j["num_queries"] + j["num_database"]
s = j["seconds"]["extraction"]
print(json.dumps({"what": "dino copy_detection features", "images": n, "seconds": s, "per_second": n / s}))
PY
/usr/bin/python3 bench/official_eval_suite.py copydays "$work/copydays" --threads $threads

echo "== video segmentation: ViT-S/16, 480 x 832 frames, 7 context frames, neighbourhood 12"
start=$(date +%s.%N)
"$build/dino" video_segmentation --data_path "$work/davis" --arch vit_small --patch_size 16 \
  --evaluate false --output_dir "$work/vs" > "$work/vs.log" 2>&1
end=$(date +%s.%N)
/usr/bin/python3 -c "
import sys; n = 2 * $frames; s = $end - $start
print('{\"what\": \"dino video_segmentation (process, model load included)\", \"frames\": %d, \"seconds\": %.2f, \"per_second\": %.3f}' % (n, s, n / s))"
/usr/bin/python3 bench/official_eval_suite.py davis "$work/davis" --threads $threads --output "$work/official_vs"

echo "== image retrieval: ViT-S/16, thumbnails of 224, batch 1, single and multi-scale"
for ms in 0 1; do
  flag=$([ $ms = 1 ] && echo true || echo false)
  "$build/dino" retrieval --data_path "$work/revisited" --dataset roxford5k --arch vit_small \
    --patch_size 16 --imsize 224 --multiscale $flag --num_workers $threads \
    --output_dir "$work/ret$ms" > "$work/ret$ms.log" 2>&1
  /usr/bin/python3 - "$work/ret$ms/retrieval.json" $ms <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
n = j["num_queries"] + j["num_database"]
s = j["seconds"]["extraction"]
what = "dino retrieval features" + (", multiscale" if sys.argv[2] == "1" else "")
print(json.dumps({"what": what, "images": n, "seconds": s, "per_second": n / s}))
PY
  /usr/bin/python3 bench/official_eval_suite.py revisited "$work/revisited" --imsize 224 \
    --multiscale $ms --threads $threads
done
