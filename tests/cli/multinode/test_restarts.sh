#!/usr/bin/env bash
# `dino launch --max_restarts` and timed checkpoints on one host (loopback, no root needed):
#  1. a rank SIGKILLed mid-epoch: the launcher stops the other, starts both again, they resume
#     from the newest timed checkpoint (--saveckp_minutes), and the run ends by itself with
#     the uninterrupted run's checkpoint, byte for byte;
#  2. a restart storm (every start fails at once: checkpoint.pth is not a checkpoint): it
#     gives up after --max_restarts restarts with one line, the failure's exit code, and the
#     file left as it was;
#  3. half a run (node 0 of 2; node 1 never starts): the launcher gives up once
#     --rdzv_timeout has passed, with one line, exit 1, having started no process;
#  4. a usage error (exit 2) is not restarted: a restart would fail the same way;
#  5. the ranks themselves SIGTERMed (`pkill -f`, not the launcher): they save, and the launcher
#     exits 0 with one line saying why it does not restart, having started them once.
# usage: test_restarts.sh DINO_BINARY
# Exits 0 on success, 1 with the failed check, 77 when it cannot run here.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../../support/require.sh"
source "$here/../../support/wait.sh"
source "$here/small_run.sh"
dino=$(readlink -f "$1")
require_fashion_mnist
work=$(mktemp -d /tmp/xdino_restarts.XXXXXX)
launcher=
# On a failure the logs stay, and the line says where; a launcher still running is stopped.
trap '[[ -n $launcher ]] && kill -9 $launcher 2>/dev/null; if [[ -n ${failed:-} ]]; then echo "logs: $work" >&2; else rm -rf "$work"; fi' EXIT

fail() { echo "FAIL: $*" >&2; failed=1; exit 1; }
run=$work/run  # every run writes here: its path is in the checkpoint's args
# 128 images, 2 ranks x 8 = 8 iterations per epoch, 3 epochs; a checkpoint after (nearly)
# every iteration.
train_args() {
  small_train_args "$fashion_mnist" "$run" 3 \
    --saveckp_minutes 0.001 --dist_timeout 120 --dist_heartbeat_timeout 8
}

# --- 1. a rank killed mid-epoch: the launcher restarts, the run heals ----------------------
"$dino" launch --nproc 2 -- $(train_args) >"$work/ref.log" 2>&1 ||
  fail "uninterrupted run: $(tail -3 "$work/ref.log")"
mv "$run" "$work/ref"

"$dino" launch --nproc 2 --grace_seconds 5 --max_restarts 1 --rdzv_timeout 60 -- \
  $(train_args) >"$work/heal.log" 2>&1 &
launcher=$!
wait_for_line "saved before iteration 1[0-9] " "$work/heal.log" $launcher 120 ||
  fail "no timed checkpoint in epoch 1: $(tail -3 "$work/heal.log")"
victim=$(pid_of_rank 1 $(pgrep -P $launcher))
[[ -n $victim ]] || fail "rank 1 of the launcher (pid $launcher) was not found"
kill -9 "$victim"
wait_for $launcher 180
launcher=
[[ $code == 0 ]] || fail "the healed run exited $code: $(tail -5 "$work/heal.log")"
grep -q "restart 1 of 1 after: rank 1 (pid $victim) was killed by signal 9" "$work/heal.log" ||
  fail "the restart and its cause are not logged: $(grep -i restart "$work/heal.log" | head -3)"
# The newest checkpoint before the restart is the one the restarted ranks resume from.
saved=$(sed -n '/restart 1 of 1/q;s/.*saved before iteration \([0-9]*\) .*/\1/p' "$work/heal.log" | tail -1)
resumed=$(sed -n 's/.*Starting DINO training at epoch [0-9]*, iteration \([0-9]*\)$/\1/p' \
  "$work/heal.log" | tail -1)
[[ -n $saved && $saved == "$resumed" ]] ||
  fail "resumed from iteration ${resumed:-?}, but the newest checkpoint was saved before ${saved:-?}"
cmp -s "$work/ref/checkpoint.pth" "$run/checkpoint.pth" ||
  fail "the healed run's checkpoint.pth differs from the uninterrupted run's"
echo "ok: rank 1 SIGKILLed in epoch 1: restarted, resumed from iteration $resumed (the newest" \
  "timed checkpoint; only the iteration in progress was redone), same checkpoint byte for byte"
rm -rf "$run"

# --- 2. a restart storm: every start fails at once -------------------------------------------
mkdir -p "$run"
echo "not a checkpoint" >"$run/checkpoint.pth"
code=0
"$dino" launch --nproc 2 --grace_seconds 5 --max_restarts 2 --rdzv_timeout 60 -- \
  $(train_args) >"$work/storm.log" 2>&1 || code=$?
[[ $code == 1 ]] || fail "the storm exited $code, expected the ranks' 1: $(tail -3 "$work/storm.log")"
starts=$(grep -c "^launched 2 processes" "$work/storm.log")
[[ $starts == 3 ]] || fail "the storm started the ranks $starts times, expected 1 + 2 restarts"
grep -q "gave up after 2 restarts (--max_restarts): rank [01] (pid [0-9]*) exited with code 1" \
  "$work/storm.log" || fail "no line giving up: $(tail -3 "$work/storm.log")"
[[ $(cat "$run/checkpoint.pth") == "not a checkpoint" ]] || fail "the storm changed checkpoint.pth"
echo "ok: a start that fails at once every time: 3 starts, then one line and exit 1"
rm -rf "$run"

# --- 3. half a run: the other node never comes ----------------------------------------------
port=$((20000 + RANDOM % 20000))
started=$SECONDS
code=0
"$dino" launch --nproc 1 --nnodes 2 --node_rank 0 --master_addr 127.0.0.2 \
  --master_port "$port" --max_restarts 3 --rdzv_timeout 4 -- $(train_args) \
  >"$work/half.log" 2>&1 || code=$?
took=$((SECONDS - started))
[[ $code == 1 ]] || fail "half a run exited $code: $(tail -3 "$work/half.log")"
grep -q "dino launch: error: gave up: the rendezvous at 127.0.0.2:$port did not form within --rdzv_timeout 4 s" \
  "$work/half.log" || fail "no line giving up on the rendezvous: $(tail -3 "$work/half.log")"
((took < 4 + 10 + 20)) || fail "giving up took $took s (--rdzv_timeout 4)"
[[ $(grep -c "^launched" "$work/half.log") == 0 ]] || fail "processes were started for a rendezvous that never formed"
echo "ok: node 1 never comes: node 0's launcher gives up after $took s (--rdzv_timeout 4), exit 1"
rm -rf "$run"

# --- 4. a usage error is not restarted ------------------------------------------------------
code=0
"$dino" launch --nproc 1 --max_restarts 3 -- train --data_path "$fashion_mnist" --epochs -1 \
  --output_dir "$run" >"$work/usage.log" 2>&1 || code=$?
[[ $code == 2 ]] || fail "a usage error exited $code: $(tail -3 "$work/usage.log")"
grep -q "not restarting: exit code 2 is a usage error" "$work/usage.log" ||
  fail "no line saying why it did not restart: $(tail -3 "$work/usage.log")"
echo "ok: a usage error (exit 2) is not restarted"
rm -rf "$run"

# --- 5. the ranks stopped by a signal sent to them, not to the launcher ----------------------
"$dino" launch --nproc 2 --grace_seconds 5 --max_restarts 1 --rdzv_timeout 60 -- \
  $(train_args) >"$work/term.log" 2>&1 &
launcher=$!
wait_for_line "saved before iteration [0-9]* " "$work/term.log" $launcher 120 ||
  fail "no timed checkpoint: $(tail -3 "$work/term.log")"
kill -TERM $(pgrep -P $launcher)
wait_for $launcher 120
launcher=
[[ $code == 0 ]] || fail "the stopped run's launcher exited $code: $(tail -3 "$work/term.log")"
grep -q "not restarting: this node's processes were stopped by a signal sent to them" \
  "$work/term.log" || fail "no line saying why it did not restart: $(tail -3 "$work/term.log")"
[[ $(grep -c "^launched 2 processes" "$work/term.log") == 1 ]] ||
  fail "the ranks were started again after a signal sent to them"
grep -q "Stopped by signal 15: checkpoint.pth saved before iteration" "$work/term.log" ||
  fail "the ranks did not save on SIGTERM: $(tail -3 "$work/term.log")"
echo "ok: the ranks SIGTERMed themselves: saved, not restarted, one line, exit 0"
