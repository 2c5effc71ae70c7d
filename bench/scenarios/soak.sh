#!/usr/bin/env bash
# Memory over a long run (issue 34): does the resident set stay flat?
#   bench/scenarios/soak.sh [build_dir=build] [minutes=20] [out=soak]
# 1. `dino train` with the main job's recipe (configs/fashion_mnist.ini: xcit_nano_4_p4, 6000
#    images, 187 iterations per epoch, the online k-NN and a checkpoint after every epoch), its
#    epochs raised so that it outlives MINUTES; then SIGTERM, which saves and exits 0. VmRSS and
#    VmHWM of the process are sampled every 5 s into OUT/train_rss.csv (seconds, rss_kib,
#    epochs done). Printed: the largest RSS of each epoch, and the least-squares trend of those
#    peaks after warm-up (epoch 0), in % per 1000 iterations (goal: < 1%).
# 2. `dino knn --load_features` over a bank of 10^6 x 128 synthetic unit features (512 MB) and
#    10^5 queries (bench_knn writes them): peak RSS against the bank's bytes (eval/knn.h: the
#    search never holds more than faiss's block of similarities beside the features).
set -euo pipefail
build=$(readlink -f "${1:-build}")
minutes=${2:-20}
out=$(mkdir -p "${3:-soak}" && readlink -f "${3:-soak}")
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d /tmp/xdino_soak.XXXXXX)
pid=
trap '[[ -n $pid ]] && kill -9 $pid 2>/dev/null; rm -rf "$tmp"' EXIT
export OMP_WAIT_POLICY=PASSIVE

kib() { awk -v k="$1" '$1 == k":" {print $2}' "/proc/$2/status" 2>/dev/null || true; }
epochs_done() { [[ -f $1/log.txt ]] && wc -l <"$1/log.txt" || echo 0; }

# --- 1. training ---------------------------------------------------------------------------
"$build/dino" train --config "$root/configs/fashion_mnist.ini" --epochs 1000 \
  --output_dir "$tmp/train" >"$out/train.log" 2>&1 &
pid=$!
start=$SECONDS
echo "seconds,rss_kib,epochs_done" >"$out/train_rss.csv"
while kill -0 $pid 2>/dev/null && ((SECONDS - start < minutes * 60)); do
  rss=$(kib VmRSS $pid)
  [[ -n $rss ]] && echo "$((SECONDS - start)),$rss,$(epochs_done "$tmp/train")" >>"$out/train_rss.csv"
  sleep 5
done
hwm=$(kib VmHWM $pid)
kill -TERM $pid
code=0
wait $pid || code=$?
pid=
echo "train: stopped by SIGTERM after $((SECONDS - start)) s, exit $code, peak RSS ${hwm} KiB"
awk -F, 'NR > 1 {peak[$3] = ($2 > peak[$3] ? $2 : peak[$3]); last = $3}
  END {
    for (e = 0; e < last; ++e) printf "epoch %d: largest RSS %.1f MiB\n", e, peak[e] / 1024
    # Least-squares slope of the per-epoch peaks after warm-up (epochs 1 .. last-1), against
    # iterations: one noisy epoch moves it less than it moves a first-to-last difference.
    n = 0; sx = sy = sxx = sxy = 0
    for (e = 1; e < last; ++e) {
      x = e * 187; y = peak[e] / 1024; ++n; sx += x; sy += y; sxx += x * x; sxy += x * y
      lo = (n == 1 || y < lo) ? y : lo; hi = (n == 1 || y > hi) ? y : hi
    }
    if (n >= 3) {
      slope = (n * sxy - sx * sy) / (n * sxx - sx * sx)
      printf "epochs 1-%d: peaks %.1f-%.1f MiB; trend %+.1f MiB = %+.2f%% per 1000 iterations\n",
             last - 1, lo, hi, slope * 1000, 100 * slope * 1000 / (sy / n)
    }
  }' "$out/train_rss.csv" | tee "$out/train_summary.txt"

# --- 2. k-NN over a large bank -------------------------------------------------------------
"$build/bench/bench_knn" --train 1000000 --test 100000 --dim 128 --classes 1000 --queries 1000 \
  --threads 2 --skip-torch --dump "$tmp/feat" >"$out/bench_knn.log" 2>&1
mv "$tmp/feat/train.h5" "$tmp/feat/trainfeat.h5"
mv "$tmp/feat/test.h5" "$tmp/feat/testfeat.h5"
bank=$(( $(stat -c %s "$tmp/feat/trainfeat.h5") + $(stat -c %s "$tmp/feat/testfeat.h5") ))
knn_start=$SECONDS
"$build/dino" knn --load_features "$tmp/feat" --nb_knn 20 --output_dir "$tmp/knn" \
  >"$out/knn.log" 2>&1 &
pid=$!
peak=0
while kill -0 $pid 2>/dev/null; do  # VmHWM: the peak so far (sampled until the process ends)
  h=$(kib VmHWM $pid)
  [[ -n $h ]] && ((h > peak)) && peak=$h
  sleep 0.5
done
wait $pid || { echo "dino knn failed: $(tail -3 "$out/knn.log")"; exit 1; }
pid=
echo "knn: 10^6 x 128 bank + 10^5 queries ($((bank / 1048576)) MiB of features): peak RSS" \
     "$((peak / 1024)) MiB (at least), $((SECONDS - knn_start)) s" | tee "$out/knn_summary.txt"
