#!/usr/bin/env bash
# What a lost process costs at the main job's shapes (configs/fashion_mnist.ini, one host):
#   bench/scenarios/heal_cost.sh [build_dir=build] [saveckp_minutes=0.5] [kill_after_seconds=40]
# 1. `dino launch --nproc 2 --max_restarts 1 -- train --config configs/fashion_mnist.ini` with
#    timed checkpoints every SAVECKP_MINUTES;
# 2. KILL_AFTER seconds after the first timed save, rank 1 is SIGKILLed;
# 3. prints, from the logs, each timed save's stall (rank 0's write: every rank waits for it),
#    the checkpoint's size, the work lost (time from the newest save to the kill, and the
#    iterations redone), and the restart's cost: from the kill to the restarted ranks'
#    "Starting DINO training" line (noticing, stopping, start-up, rendezvous, checkpoint load).
# Times are when this script saw each line (it polls the log every 0.1 s). Read against the same
# run without a loss (its iteration rate) and against the official code, which loses everything
# since the last epoch's save (bench/results/distributed_and_healing.md, "Runs that heal").
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(readlink -f "${1:-build}")
minutes=${2:-0.5}
kill_after=${3:-40}
dino=$build/dino
tmp=$(mktemp -d /tmp/xdino_heal_cost.XXXXXX)
launcher=
trap '[[ -n $launcher ]] && kill -9 $launcher 2>/dev/null; rm -rf "$tmp"' EXIT
source "$root/tests/support/wait.sh"
log=$tmp/train.log
now() { date +%s.%N; }

cd "$root"
"$dino" launch --nproc 2 --grace_seconds 10 --max_restarts 1 -- train \
  --config configs/fashion_mnist.ini --output_dir "$tmp/run" --saveckp_minutes "$minutes" \
  --knn_every 0 >"$log" 2>&1 &
launcher=$!
wait_for_line "saved before iteration" "$log" $launcher 900 || { tail -5 "$log"; exit 1; }
# Wait KILL_AFTER seconds, noting when the newest save appeared.
saves=0
saved_at=$(now)
end=$((SECONDS + kill_after))
while ((SECONDS < end)); do
  count=$(grep -c "saved before iteration" "$log" || true)
  ((count > saves)) && { saves=$count; saved_at=$(now); }
  sleep 0.1
done
last_save=$(grep "saved before iteration" "$log" | tail -1)
victim=$(pid_of_rank 1 $(pgrep -P $launcher))
killed_at=$(now)
kill -9 "$victim"
wait_for_line "restart 1 of 1" "$log" $launcher 300
noticed_at=$(now)
until [[ $(grep -c "Starting DINO training" "$log") -ge 2 ]]; do sleep 0.1; done
resumed_at=$(now)
awk -v s="$saved_at" -v k="$killed_at" -v n="$noticed_at" -v r="$resumed_at" 'BEGIN {
  printf "work lost: %.1f s (from the newest save to the kill)\n", k - s
  printf "restart: %.1f s from the kill to the launcher restarting, %.1f s to training again\n", n - k, r - k }'
echo "newest save before the kill: $last_save"
grep "Starting DINO training" "$log" | tail -1
grep "saved before iteration" "$log" | sed 's/.* in \([0-9.e-]*\) s$/\1/' |
  sort -g | awk '{ a[NR] = $1 } END { printf "timed saves: %d, stall min %.3f median %.3f max %.3f s\n", NR, a[1], a[int((NR + 1) / 2)], a[NR] }'
echo "checkpoint.pth: $(stat -c %s "$tmp/run/checkpoint.pth") bytes"
grep -o "[0-9.]* it/s" "$log" | tail -1 | sed 's/^/iteration rate (last progress line): /'
kill -TERM $launcher 2>/dev/null || true
wait_for $launcher 120
launcher=
