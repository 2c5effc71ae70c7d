#!/usr/bin/env bash
# Runs that heal across two simulated hosts, node01 and node02 (tests/cli/multinode/hosts.sh), 2
# ranks each, every node's `dino launch` with --max_restarts and the run with timed
# checkpoints (--saveckp_minutes) after nearly every iteration:
#  1. one rank on host B SIGKILLed mid-epoch: both launchers restart their ranks by themselves
#     and the run ends with the uninterrupted run's checkpoint, byte for byte;
#  2. the link cut for 20 s, then restored: the same, with nobody rerunning anything;
#  3. the link cut for good: every launcher gives up, one line and exit 1, within
#     --rdzv_timeout plus --dist_heartbeat_timeout (plus --grace_seconds and the 10 s before
#     SIGKILL); the checkpoint left behind resumes, once the link is back, to the same end;
#  4. SLURM: SIGUSR1 to launch/slurm/dino_train.sbatch (its srun and scontrol are the stand-ins
#     of tests/cli/multinode/bin) saves mid-epoch, asks for the requeue and exits 0; the requeued
#     job resumes to the uninterrupted run's checkpoint;
#  5. host B dies whole (its launcher and ranks SIGKILLed) and its launcher is started again,
#     as SLURM or a person would: it joins the round node 0 is in, and the run ends by itself
#     with the uninterrupted run's checkpoint;
#  6. the same for host A, whose launcher serves the rendezvous store: node 1 waits for it,
#     joins the new store, and the run heals the same way;
#  7. a rank on host B dies before it joins the workers' rendezvous: node 1 asks for a new
#     round and node 0 re-forms with it (no restart counted there), to the same checkpoint;
#  8. a usage error on one node (its --data_path is missing): that launcher closes the
#     rendezvous and the other stops within seconds with its reason, not after --rdzv_timeout;
#  9. a restart storm on both hosts (checkpoint.pth is not a checkpoint): both give up within
#     their restarts, one line each, the file untouched.
# usage: test_healing_hosts.sh DINO_BINARY
# Exits 0 on success, 1 with the failed check, 77 when it cannot run here (no root).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
source "$here/hosts.sh"
source "$here/small_run.sh"
hosts_test_start healing "$1"
port=29600
rdzv_timeout=20
heartbeat=8
grace=5
# A launcher that stops beating is out of the rendezvous after 1 s x 3 (torchrun's 5 s x 3).
rdzv_conf=keep_alive_interval=1,keep_alive_max_attempt=3

fail() { echo "FAIL: $*" >&2; failed=1; exit 1; }
run=$work/run  # every run writes here: its path is in the checkpoint's args
# 128 images, 4 ranks x 8 = 4 iterations per epoch, 4 epochs.
train_args() {
  small_train_args "${data:-$fashion_mnist}" "$run" 4 \
    --saveckp_minutes 0.001 --dist_timeout 600 --dist_heartbeat_timeout $heartbeat
}
# Node N's launcher, healing, in the background: pid in $a (node 0) or $b (node 1).
launch_node() {  # A|B NODE_RANK LOG
  on_host "$1" env GLOO_SOCKET_IFNAME=eth0 "$dino" launch --nproc 2 --nnodes 2 \
    --node_rank "$2" --master_addr node01 --master_port "$port" --grace_seconds $grace \
    --max_restarts ${restarts:-1} --rdzv_timeout $rdzv_timeout --rdzv_conf $rdzv_conf \
    -- $(train_args) >"$3" 2>&1 &
}
# Both nodes, returning once epoch 1 is under way (a timed checkpoint mid-epoch 1).
start_into_epoch_1() {  # LOG_SUFFIX
  launch_node B 1 "$work/b$1.log"; b=$!
  launch_node A 0 "$work/a$1.log"; a=$!
  wait_for_line "saved before iteration [5-7] " "$work/a$1.log" $a 120 ||
    fail "no timed checkpoint in epoch 1: $(tail -3 "$work/a$1.log")"
}
# The node's launcher started its ranks again, in a later round: either it counted a restart
# after its own ranks failed, or it stopped them to re-form the run with a launcher waiting to
# join, which counts none (launch/local_launcher.h). Where a node lost no rank of its own, which
# comes first is a race: its ranks ending after the lost peer, or the other launcher's restart
# reaching the rendezvous (seen in CI's CUDA build, whose processes take longer to end).
reformed() {  # LOG
  grep -qE "restart 1 of 1 after: |is waiting to join; stopping this node's processes" "$1" &&
    grep -qE "^launched ranks .*, round [1-9][0-9]*\)$" "$1"
}
restart_kind() {  # LOG: which of the two the node did
  grep -q "restart 1 of 1 after: " "$1" && echo "a counted restart" || echo "a re-form, uncounted"
}
# Both launchers end by themselves, successfully, with the uninterrupted run's checkpoint.
expect_healed() {  # LOG_SUFFIX WHAT
  wait_for $a 300; [[ $code == 0 ]] || fail "$2, node 0 exited $code: $(tail -3 "$work/a$1.log")"
  wait_for $b 300; [[ $code == 0 ]] || fail "$2, node 1 exited $code: $(tail -3 "$work/b$1.log")"
  cmp -s "$work/ref/checkpoint.pth" "$run/checkpoint.pth" || fail "$2: checkpoint.pth differs"
  reformed "$work/a$1.log" || fail "$2: node 0 did not restart: $(tail -3 "$work/a$1.log")"
  reformed "$work/b$1.log" || fail "$2: node 1 did not restart: $(tail -3 "$work/b$1.log")"
  grep -q "restart 1 of 1 after: " "$work/a$1.log" "$work/b$1.log" ||
    fail "$2: neither node counted a restart"
}
# The iteration the restarted ranks resumed from (rank 0's log).
resumed_from() {  # LOG
  sed -n 's/.*Starting DINO training at epoch [0-9]*, iteration \([0-9]*\)$/\1/p' "$1" | tail -1
}

"$dino" launch --nproc 4 --oversubscribe -- $(train_args) >"$work/ref.log" 2>&1 ||
  fail "1 x 4 run: $(tail -3 "$work/ref.log")"
mv "$run" "$work/ref"

# --- 1. one rank on host B killed mid-epoch ------------------------------------------------
start_into_epoch_1 1
victim=$(pid_of_rank 2 $(ip netns pids "$HOST_B"))
[[ -n $victim ]] || fail "rank 2 was not found on host B"
kill -9 "$victim"
expect_healed 1 "rank 2 SIGKILLed"
grep -q "restart 1 of 1 after: rank 2 (pid $victim) was killed by signal 9" "$work/b1.log" ||
  fail "node 1 did not count a restart for its killed rank: $(tail -3 "$work/b1.log")"
echo "ok: rank 2 on host B SIGKILLed mid-epoch: both launchers restarted (node 0:" \
  "$(restart_kind "$work/a1.log")), the run resumed from iteration" \
  "$(resumed_from "$work/a1.log") and ended with the uninterrupted checkpoint"
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
rm -rf "$run"

# --- 5. host B dies whole, and its launcher is started again ---------------------------------
# A launcher started again is a new node of the rendezvous: it joins whatever round the others
# are in (node_rendezvous.h), where before it started at its own count and waited forever.
# Both ends are checked: the node that stayed restarted once, the new one started afresh.
kill_host_and_restart() {  # A|B LOG_SUFFIX
  local pids
  pids=$(ip netns pids "$([[ $1 == A ]] && echo "$HOST_A" || echo "$HOST_B")")
  kill -9 $pids
  if [[ $1 == A ]]; then
    wait $a 2>/dev/null || true
    sleep 2
    launch_node A 0 "$work/a$2r.log"; a=$!
  else
    wait $b 2>/dev/null || true
    sleep 2
    launch_node B 1 "$work/b$2r.log"; b=$!
  fi
}
start_into_epoch_1 5
kill_host_and_restart B 5
wait_for $a 300; [[ $code == 0 ]] || fail "host B died and came back: node 0 exited $code: $(tail -3 "$work/a5.log")"
wait_for $b 300; [[ $code == 0 ]] || fail "host B came back: its new launcher exited $code: $(tail -3 "$work/b5r.log")"
cmp -s "$work/ref/checkpoint.pth" "$run/checkpoint.pth" || fail "host B died and came back: checkpoint.pth differs"
reformed "$work/a5.log" || fail "host B died: node 0 did not restart: $(tail -3 "$work/a5.log")"
echo "ok: host B killed whole, its launcher started again: it joined round" \
  "$(sed -n 's/.*round \([0-9]*\))$/\1/p' "$work/b5r.log" | tail -1), the run resumed from" \
  "iteration $(resumed_from "$work/a5.log") and ended with the uninterrupted checkpoint"
rm -rf "$run"

# --- 6. host A dies whole: the store's host ---------------------------------------------------
start_into_epoch_1 6
kill_host_and_restart A 6
wait_for $a 300; [[ $code == 0 ]] || fail "host A came back: its new launcher exited $code: $(tail -3 "$work/a6r.log")"
wait_for $b 300; [[ $code == 0 ]] || fail "host A died and came back: node 1 exited $code: $(tail -3 "$work/b6.log")"
cmp -s "$work/ref/checkpoint.pth" "$run/checkpoint.pth" || fail "host A died and came back: checkpoint.pth differs"
echo "ok: host A (the rendezvous store's) killed whole and started again: node 1 joined its new" \
  "store and the run ended with the uninterrupted checkpoint"
rm -rf "$run"

# --- 7. a rank dies before it joins the workers' rendezvous, on host B only -----------------
launch_node A 0 "$work/a7.log"; a=$!
launch_node B 1 "$work/b7.log"; b=$!
victim=
for _ in $(seq 600); do  # up to 30 s: the first rank of node 1, as soon as it exists
  victim=$(pid_of_rank 2 $(ip netns pids "$HOST_B") 2>/dev/null)
  [[ -n $victim ]] && break
  sleep 0.05
done
[[ -n $victim ]] || fail "rank 2 never started on host B: $(tail -3 "$work/b7.log")"
kill -9 "$victim"
wait_for $a 300; [[ $code == 0 ]] || fail "a rank died before joining: node 0 exited $code: $(tail -3 "$work/a7.log")"
wait_for $b 300; [[ $code == 0 ]] || fail "a rank died before joining: node 1 exited $code: $(tail -3 "$work/b7.log")"
cmp -s "$work/ref/checkpoint.pth" "$run/checkpoint.pth" || fail "a rank died before joining: checkpoint.pth differs"
grep -q "restart 1 of 1 after: rank 2 (pid $victim) was killed by signal 9" "$work/b7.log" ||
  fail "node 1 did not restart after its rank died: $(grep -i restart "$work/b7.log" | head -2)"
grep -Eq "is waiting to join; stopping|restart 1 of 1 after: " "$work/a7.log" ||
  fail "node 0 did not re-form with node 1: $(tail -3 "$work/a7.log")"
echo "ok: rank 2 killed before it joined: node 1 restarted, node 0 re-formed with it, same checkpoint"
rm -rf "$run"

# --- 8. a usage error on one node closes the rendezvous for both ----------------------------
started=$SECONDS
launch_node A 0 "$work/a8.log"; a=$!
data=/nonexistent/fashion-mnist launch_node B 1 "$work/b8.log"; b=$!
wait_for $b 120; code_b=$code
wait_for $a 120; code_a=$code; took=$((SECONDS - started))
[[ $code_b == 2 ]] || fail "the node with the missing data exited $code_b: $(tail -3 "$work/b8.log")"
[[ $code_a == 1 ]] || fail "the other node exited $code_a: $(tail -3 "$work/a8.log")"
((took < rdzv_timeout)) || fail "node 0 took $took s to stop (--rdzv_timeout $rdzv_timeout)"
[[ $(grep -c "dino launch: error: stopped: the rendezvous at node01:$port was closed: node02 (launcher pid [0-9]*) gave up: " \
  "$work/a8.log") == 1 ]] || fail "node 0 does not say, once, who closed it: $(tail -3 "$work/a8.log")"
echo "ok: a usage error on node 1 closed the rendezvous; node 0 stopped after $took s: $(grep -h "was closed" "$work/a8.log")"
rm -rf "$run"

# --- 9. a restart storm on both hosts ---------------------------------------------------------
mkdir -p "$run"
echo "not a checkpoint" >"$run/checkpoint.pth"
started=$SECONDS
restarts=2 launch_node A 0 "$work/a9.log"; a=$!
restarts=2 launch_node B 1 "$work/b9.log"; b=$!
wait_for $a 240; code_a=$code
wait_for $b 240; code_b=$code; took=$((SECONDS - started))
for node in a b; do
  log=$work/${node}9.log
  code=$([[ $node == a ]] && echo $code_a || echo $code_b)
  [[ $code == 1 ]] || fail "storm, node $node exited $code: $(tail -3 "$log")"
  starts=$(grep -c "^launched ranks" "$log")
  ((starts >= 1 && starts <= 3)) || fail "storm, node $node started its ranks $starts times (1 + 2 restarts at most)"
  grep -Eq "gave up after 2 restarts|was closed: " "$log" || fail "storm, node $node: no line ending it: $(tail -3 "$log")"
done
((took < 120)) || fail "the storm took $took s to end"
[[ $(cat "$run/checkpoint.pth") == "not a checkpoint" ]] || fail "the storm changed checkpoint.pth"
echo "ok: a restart storm on both hosts ended in $took s: $(grep -h "gave up after\|was closed" "$work/a9.log" "$work/b9.log" | head -2 | tr '\n' ' ')"
