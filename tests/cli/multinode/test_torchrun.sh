#!/usr/bin/env bash
# The real torchrun as our users run it (docs/distributed.md, "Under torchrun"), not its
# variables set by hand: `torchrun --nproc_per_node 2 --max_restarts 1 --no-python dino train`
# on loopback, with rank 1 SIGKILLed after the first epoch's checkpoint. torchrun stops the
# other rank and starts both again on its agent's store, which still holds the first attempt's
# keys; the run must resume and end with the uninterrupted run's checkpoint.pth, byte for byte.
#  1. torchrun's default (static) rendezvous, --master_port;
#  2. its c10d rendezvous (--rdzv_backend c10d --rdzv_endpoint 127.0.0.1:PORT).
# usage: test_torchrun.sh DINO_BINARY TORCHRUN
#   TORCHRUN: Debian's /usr/bin/torchrun (torch 1.13) in the first CI phase, pip torch's
#   (build-cuda/venv/bin/torchrun, 2.15) in the CUDA phase (tests/cli/CMakeLists.txt picks it).
# Exits 0 on success, 1 with the failed check, 77 when it cannot run here.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../../support/require.sh"
source "$here/../../support/wait.sh"
source "$here/small_run.sh"
dino=$(readlink -f "$1")
torchrun=${2:-}
[[ -n $torchrun && -x $torchrun ]] ||
  skip_or_fail "torchrun (apt-get install python3-torch; got '${torchrun}')"
require_fashion_mnist
work=$(mktemp -d /tmp/xdino_torchrun.XXXXXX)
agent=
trap '[[ -n $agent ]] && kill -9 $(descendants $agent) $agent 2>/dev/null; if [[ -n ${failed:-} ]]; then echo "logs: $work" >&2; else rm -rf "$work"; fi' EXIT
fail() { echo "FAIL: $*" >&2; failed=1; exit 1; }

# torch 1.13 spells it --no_python (2.x takes both). Under Python 3.11, 1.13's default
# --redirects 0 maps to no member of its own Std enum, so it needs one said outright; 2 sends
# each worker's stderr to a file and --tee 2 to our log too, in both versions.
no_python=--no_python
"$torchrun" --help 2>&1 | grep -q -- '--no-python' && no_python=--no-python
python=$(head -1 "$torchrun" | sed 's/^#! *//')  # torchrun is a Python script
version=$($python -c 'import torch; print(torch.__version__)' 2>/dev/null || echo '?')
echo "torchrun: $torchrun (torch $version)"
run=$work/run  # every run writes here: its path is in the checkpoint's args
train_args() { small_train_args "$fashion_mnist" "$run" 3 --saveckp_freq 1 --dist_timeout 120 \
  --dist_heartbeat_timeout 8 | cut -d' ' -f2-; }
export PATH=$(dirname "$dino"):$PATH OMP_NUM_THREADS=1

# Every process below PID (torch 2.x starts its workers in sessions of their own, so not by
# process group).
descendants() {  # PID
  local child
  for child in $(pgrep -P "$1"); do
    echo "$child"
    descendants "$child"
  done
}

# torchrun_dino(LOG, RDZV_FLAGS...): torchrun of dino train in the background; sets $agent.
torchrun_dino() {
  local log=$1
  shift
  # setsid: the agent and its workers in a group of their own, so the trap can end them all.
  setsid "$torchrun" --nproc_per_node 2 --max_restarts 1 --redirects 2 --tee 2 \
    --log_dir "$work/torchrun-logs-$RANDOM" "$@" $no_python dino train $(train_args) \
    >"$log" 2>&1 &
  agent=$!
}

heal() {  # NAME RDZV_FLAGS...
  local name=$1
  shift
  rm -rf "$run"
  torchrun_dino "$work/$name-ref.log" "$@"
  wait_for $agent 300
  agent=
  [[ $code == 0 ]] || fail "$name: the uninterrupted run exited $code: $(tail -5 "$work/$name-ref.log")"
  mv "$run" "$work/$name-ref"

  torchrun_dino "$work/$name-heal.log" "$@"
  local deadline=$((SECONDS + 120))
  until [[ -e $run/checkpoint0000.pth ]]; do
    ((SECONDS < deadline)) && kill -0 $agent 2>/dev/null ||
      fail "$name: no checkpoint after epoch 0: $(tail -3 "$work/$name-heal.log")"
    sleep 0.1
  done
  local victim=$(pid_of_rank 1 $(descendants $agent))
  [[ -n $victim ]] || fail "$name: rank 1 of torchrun (pid $agent) was not found"
  kill -9 "$victim"
  wait_for $agent 300
  agent=
  local log=$work/$name-heal.log
  [[ $code == 0 ]] || fail "$name: the healed run exited $code: $(grep -m3 'error' "$log")"
  grep -q "error: rank [01] was started twice" "$log" && fail "$name: the restart met the first attempt's keys"
  [[ $(grep -c "process 0 of 2 (torchrun)" "$log") == 2 ]] ||
    fail "$name: rank 0 did not start twice (torchrun did not restart): $(grep -c 'process 0 of 2' "$log")"
  grep -q "Starting DINO training at epoch [12]" "$log" ||
    fail "$name: the restarted ranks did not resume: $(grep 'Starting DINO' "$log")"
  cmp -s "$work/$name-ref/checkpoint.pth" "$run/checkpoint.pth" ||
    fail "$name: the healed run's checkpoint.pth differs from the uninterrupted run's"
  echo "ok: $name: rank 1 SIGKILLed after epoch 0; torchrun restarted both, they resumed" \
    "($(grep -o 'Starting DINO training at epoch [0-9]*' "$log" | tail -1)) and ended with the" \
    "uninterrupted run's checkpoint.pth, byte for byte"
}

port=$((20000 + RANDOM % 20000))
heal static --master_addr 127.0.0.1 --master_port "$port"
heal c10d --rdzv_backend c10d --rdzv_endpoint "127.0.0.1:$((port + 1))" --rdzv_id xdino-test
