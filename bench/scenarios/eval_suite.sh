#!/bin/bash
# Time per image / frame of `dino copy_detection`, `dino retrieval` and `dino video_segmentation`
# next to the official scripts' code paths on the same CPU and data
# (bench/reference/official_eval_suite.py, which imports a fetched checkout:
# scripts/fetch_official.sh). Results: bench/results/eval_suite.md.
# Random ViT-S/16 weights on both sides (the time does not depend on the weights). Data: the
# tests' synthetic Copydays, revisited and DAVIS sets, the last with FRAMES frames per video
# (480 x 832 after the scripts' resize). Each task runs ROUNDS times as ours, official, ours,
# official, ... so both sides see the same drift; the last lines give each side's median rate
# and the median of the per-round ratios.
#   bench/scenarios/eval_suite.sh [BUILD_DIR] [FRAMES] [ROUNDS] [TASKS]
#     TASKS: copydays,davis,revisited
# Needs python3-torchvision and, for the official DAVIS path, python3-opencv.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
frames=${2:-16}
rounds=${3:-3}
tasks=${4:-copydays,davis,revisited}
threads=2
work=$(mktemp -d /tmp/xdino_eval_suite.XXXXXX)
trap 'rm -rf "$work"' EXIT
export OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=1
[ -d bench/reference/official/dino ] || { echo "run scripts/fetch_official.sh first" >&2; exit 2; }
/usr/bin/python3 tests/data/retrieval/make_sets.py copydays "$work/copydays"
/usr/bin/python3 tests/data/video/make_davis.py "$work/davis" "$frames"
/usr/bin/python3 tests/data/retrieval/make_sets.py revisited "$work/revisited"
/usr/bin/python3 -c "import json, pickle, sys; pickle.dump(json.load(open(sys.argv[1])), \
  open(sys.argv[2], 'wb'))" "$work/revisited/ground.json" "$work/revisited/roxford5k/gnd_roxford5k.pkl"
results="$work/results.jsonl"

# rate WHAT JSON: one line {"what", "side": "ours", "images", "seconds", "per_second"} from the
# extraction time a dino result JSON records.
rate() {
  /usr/bin/python3 - "$1" "$2" <<'PY' | tee -a "$results"
import json, sys
j = json.load(open(sys.argv[2]))
n = j["num_queries"] + j["num_database"]
s = j["seconds"]["extraction"]
print(json.dumps({"what": sys.argv[1], "side": "ours", "images": n, "seconds": s, "per_second": n / s}))
PY
}
official() {  # official TASK WHAT ARGS...: the official side's line, tagged like ours
  local what=$2
  /usr/bin/python3 bench/reference/official_eval_suite.py "$1" "${@:3}" --threads $threads |
    /usr/bin/python3 -c "import json, sys; j = json.loads(sys.stdin.read().strip().splitlines()[-1]); \
j.update(what='$what', side='official'); print(json.dumps(j))" | tee -a "$results"
}

copydays() {
  "$build/dino" copy_detection --data_path "$work/copydays" --arch vit_small --patch_size 16 \
    --imsize 320 --num_workers $threads --output_dir "$work/cd" > "$work/cd.log" 2>&1
  rate "copy detection features, ViT-S/16 at 320, CLS + GeM" "$work/cd/copy_detection.json"
  official copydays "copy detection features, ViT-S/16 at 320, CLS + GeM" "$work/copydays"
}

davis() {
  local what="video segmentation, ViT-S/16, 480 x 832, 7 contexts, neighbourhood 12"
  local start end
  start=$(date +%s.%N)
  "$build/dino" video_segmentation --data_path "$work/davis" --arch vit_small --patch_size 16 \
    --evaluate false --output_dir "$work/vs" > "$work/vs.log" 2>&1
  end=$(date +%s.%N)
  /usr/bin/python3 -c "import json; n = 2 * $frames; s = $end - $start
print(json.dumps({'what': '$what', 'side': 'ours', 'frames': n, 'seconds': s, 'per_second': n / s}))" |
    tee -a "$results"
  official davis "$what" "$work/davis" --output "$work/official_vs"
}

revisited() {
  local ms flag what
  for ms in 0 1; do
    flag=$([ $ms = 1 ] && echo true || echo false)
    what="retrieval features, ViT-S/16, thumbnails of 224, batch 1, multiscale $flag"
    "$build/dino" retrieval --data_path "$work/revisited" --dataset roxford5k --arch vit_small \
      --patch_size 16 --imsize 224 --multiscale $flag --num_workers $threads \
      --output_dir "$work/ret$ms" > "$work/ret$ms.log" 2>&1
    rate "$what" "$work/ret$ms/retrieval.json"
    official revisited "$what" "$work/revisited" --imsize 224 --multiscale $ms
  done
}

for round in $(seq "$rounds"); do
  echo "== round $round of $rounds"
  for task in ${tasks//,/ }; do "$task"; done
done

echo "== medians over $rounds rounds (ratio: ours / official per round, speed)"
/usr/bin/python3 - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for what in dict.fromkeys(r["what"] for r in rows):
    ours = [r["per_second"] for r in rows if r["what"] == what and r["side"] == "ours"]
    theirs = [r["per_second"] for r in rows if r["what"] == what and r["side"] == "official"]
    ratios = [a / b for a, b in zip(ours, theirs)]
    print(json.dumps({"what": what, "ours_per_second": statistics.median(ours),
                      "official_per_second": statistics.median(theirs),
                      "ratio_median": statistics.median(ratios),
                      "ratio_min": min(ratios), "ratio_max": max(ratios), "rounds": len(ratios)}))
PY
