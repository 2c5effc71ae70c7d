#!/usr/bin/env bash
# Runs that heal across two simulated hosts, node01 and node02 (tests/multinode/hosts.sh), 2
# ranks each, every node's `dino launch` with --max_restarts and the run with timed
# checkpoints (--saveckp_minutes) after nearly every iteration:
#  1. one rank on host B SIGKILLed mid-epoch: both launchers restart their ranks by themselves
#     and the run ends with the uninterrupted run's checkpoint, byte for byte;
#  2. the link cut for 20 s, then restored: the same, with nobody rerunning anything;
#  3. the link cut for good: every launcher gives up, one line and exit 1, within
#     --rdzv_timeout plus --dist_heartbeat_timeout (plus --grace_seconds and the 10 s before
#     SIGKILL); the checkpoint left behind resumes, once the link is back, to the same end;
#  4. SLURM: SIGUSR1 to launch/slurm/dino_train.sbatch (its srun and scontrol are the stand-ins
#     of tests/multinode/bin) saves mid-epoch, asks for the requeue and exits 0; the requeued
#     job resumes to the uninterrupted run's checkpoint.
# usage: test_healing_hosts.sh DINO_BINARY
# Exits 0 on success, 1 with the failed check, 77 when it cannot run here (no root).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
source "$here/hosts.sh"
source "$here/../support/wait.sh"
dino=$(readlink -f "$1")
hosts_require
require_fashion_mnist
hosts_up
work=$(mktemp -d /tmp/xdino_healing.XXXXXX)
trap 'hosts_down; if [[ -n ${failed:-} ]]; then echo "logs: $work" >&2; else rm -rf "$work"; fi' EXIT
port=29600
rdzv_timeout=20
heartbeat=8
grace=5

fail() { echo "FAIL: $*" >&2; failed=1; exit 1; }
run=$work/run  # every run writes here: its path is in the checkpoint's args
# 128 images, 4 ranks x 8 = 4 iterations per epoch, 4 epochs.
train_args() {
  echo train --data_path "$fashion_mnist" --max_samples 128 --arch xcit_nano_4_p4 \
    --global_crops_size 28 --local_crops_size 12 --local_crops_number 2 --out_dim 64 \
    --head_hidden_dim 64 --head_bottleneck_dim 32 --batch_size_per_gpu 8 --epochs 4 \
    --warmup_epochs 1 --num_workers 1 --saveckp_freq 100 --seed 0 --output_dir "$run" \
    --saveckp_minutes 0.001 --dist_timeout 600 --dist_heartbeat_timeout $heartbeat
}
# Node N's launcher, healing, in the background: pid in $a (node 0) or $b (node 1).
launch_node() {  # A|B NODE_RANK LOG
  on_host "$1" env GLOO_SOCKET_IFNAME=eth0 "$dino" launch --nproc 2 --nnodes 2 \
    --node_rank "$2" --master_addr node01 --master_port "$port" --grace_seconds $grace \
    --max_restarts 1 --rdzv_timeout $rdzv_timeout -- $(train_args) >"$3" 2>&1 &
}
# Both nodes, returning once epoch 1 is under way (a timed checkpoint mid-epoch 1).
start_into_epoch_1() {  # LOG_SUFFIX
  launch_node B 1 "$work/b$1.log"; b=$!
  launch_node A 0 "$work/a$1.log"; a=$!
  wait_for_line "saved before iteration [5-7] " "$work/a$1.log" $a 120 ||
    fail "no timed checkpoint in epoch 1: $(tail -3 "$work/a$1.log")"
}
# Both launchers end by themselves, successfully, with the uninterrupted run's checkpoint.
expect_healed() {  # LOG_SUFFIX WHAT
  wait_for $a 300; [[ $code == 0 ]] || fail "$2, node 0 exited $code: $(tail -3 "$work/a$1.log")"
  wait_for $b 300; [[ $code == 0 ]] || fail "$2, node 1 exited $code: $(tail -3 "$work/b$1.log")"
  cmp -s "$work/ref/checkpoint.pth" "$run/checkpoint.pth" || fail "$2: checkpoint.pth differs"
  grep -q "restart 1 of 1 after: " "$work/a$1.log" || fail "$2: node 0 did not restart"
  grep -q "restart 1 of 1 after: " "$work/b$1.log" || fail "$2: node 1 did not restart"
}
# The iteration the restarted ranks resumed from (rank 0's log).
resumed_from() {  # LOG
  sed -n 's/.*Starting DINO training at epoch [0-9]*, iteration \([0-9]*\)$/\1/p' "$1" | tail -1
}

"$dino" launch --nproc 4 -- $(train_args) >"$work/ref.log" 2>&1 ||
  fail "1 x 4 run: $(tail -3 "$work/ref.log")"
mv "$run" "$work/ref"

# --- 1. one rank on host B killed mid-epoch ------------------------------------------------
start_into_epoch_1 1
victim=$(pid_of_rank 2 $(ip netns pids "$HOST_B"))
[[ -n $victim ]] || fail "rank 2 was not found on host B"
kill -9 "$victim"
expect_healed 1 "rank 2 SIGKILLed"
echo "ok: rank 2 on host B SIGKILLed mid-epoch: both launchers restarted, the run resumed from" \
  "iteration $(resumed_from "$work/a1.log") and ended with the uninterrupted checkpoint"
rm -rf "$run"

# --- 2. the link cut for 20 s, then back ----------------------------------------------------
start_into_epoch_1 2
cut_at=$SECONDS
cut_link
sleep 20
restore_link
expect_healed 2 "link cut for 20 s"
echo "ok: the link cut for 20 s: both launchers restarted and re-formed the run once it was" \
  "back ($((SECONDS - cut_at)) s from the cut to the end), resumed from iteration" \
  "$(resumed_from "$work/a2.log"), same checkpoint"
rm -rf "$run"

# --- 3. the link cut for good ---------------------------------------------------------------
start_into_epoch_1 3
cut_at=$SECONDS
cut_link
limit=$((rdzv_timeout + heartbeat + grace + 10 + 15))
wait_for $a $limit; code_a=$code; took_a=$((SECONDS - cut_at))
wait_for $b $limit; code_b=$code; took_b=$((SECONDS - cut_at))
[[ $code_a == 1 ]] || fail "node 0 after a lasting cut exited $code_a: $(tail -3 "$work/a3.log")"
[[ $code_b == 1 ]] || fail "node 1 after a lasting cut exited $code_b: $(tail -3 "$work/b3.log")"
for log in a3 b3; do
  [[ $(grep -c "dino launch: error: gave up" "$work/$log.log") == 1 ]] ||
    fail "$log: no single line giving up: $(tail -3 "$work/$log.log")"
done
restore_link
a=; b=
launch_node B 1 "$work/b3r.log"; b=$!
launch_node A 0 "$work/a3r.log"; a=$!
wait_for $a 300; [[ $code == 0 ]] || fail "rerun after the lasting cut: $(tail -3 "$work/a3r.log")"
wait_for $b 300; [[ $code == 0 ]] || fail "rerun after the lasting cut, node 1: $(tail -3 "$work/b3r.log")"
cmp -s "$work/ref/checkpoint.pth" "$run/checkpoint.pth" ||
  fail "the checkpoint left by the lasting cut did not resume to the uninterrupted run's"
echo "ok: a lasting cut: node 0 gave up after $took_a s, node 1 after $took_b s (--rdzv_timeout" \
  "$rdzv_timeout, --dist_heartbeat_timeout $heartbeat), one line each, exit 1; the checkpoint" \
  "resumes: $(grep -h "gave up" "$work/b3.log")"
rm -rf "$run"

# --- 4. SLURM: preemption's SIGUSR1, a save, a requeue, a resume -----------------------------
run_sbatch() {  # LOG
  PATH="$here/bin:$PATH" XDINO_TEST_HOSTS="$HOST_A:node01 $HOST_B:node02" DINO="$dino" \
    XDINO_TEST_SCONTROL_LOG="$work/scontrol.log" SLURM_JOB_ID=9600 \
    SLURM_JOB_NODELIST='node[01-02]' SLURM_NNODES=2 SLURM_NTASKS_PER_NODE=2 \
    GLOO_SOCKET_IFNAME=eth0 OMP_NUM_THREADS=1 \
    bash "$root/launch/slurm/dino_train.sbatch" $(train_args | cut -d' ' -f2-) >"$1" 2>&1
}
run_sbatch "$work/slurm1.log" &
job=$!
wait_for_line "saved before iteration [5-7] " "$work/slurm1.log" $job 120 ||
  fail "the sbatch job reached no timed checkpoint in epoch 1: $(tail -3 "$work/slurm1.log")"
# SLURM signals the batch shell (--signal=B:USR1), not the subshell running run_sbatch.
batch=$(pgrep -P $job -f dino_train.sbatch) || fail "the batch script's shell was not found"
kill -USR1 "$batch"
wait_for $job 120
[[ $code == 0 ]] || fail "the sbatch job after SIGUSR1 exited $code: $(tail -3 "$work/slurm1.log")"
grep -q "Stopped by signal 10: checkpoint.pth saved before iteration" "$work/slurm1.log" ||
  fail "SIGUSR1 did not save mid-epoch: $(tail -3 "$work/slurm1.log")"
[[ $(cat "$work/scontrol.log" 2>/dev/null) == "requeue 9600" ]] ||
  fail "the batch script did not ask for 'scontrol requeue 9600'"
run_sbatch "$work/slurm2.log" || fail "the requeued job: $(tail -3 "$work/slurm2.log")"
grep -q "Found checkpoint" "$work/slurm2.log" || fail "the requeued job did not resume"
cmp -s "$work/ref/checkpoint.pth" "$run/checkpoint.pth" ||
  fail "the requeued job's checkpoint differs from the uninterrupted run's"
echo "ok: SLURM preemption: SIGUSR1 saved before iteration $(resumed_from "$work/slurm2.log")," \
  "the job asked for its requeue, and the requeued job ended with the uninterrupted checkpoint"
