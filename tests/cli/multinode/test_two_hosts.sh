#!/usr/bin/env bash
# DINO training across two simulated hosts, node01 and node02 (tests/cli/multinode/hosts.sh),
# 2 ranks each, over a veth link with Gloo, started by the recipes of docs/distributed.md, "Many
# machines", with the same variables: `dino launch --nnodes 2` (torchrun's variables), launch/slurm/dino_train.sbatch
# (through tests/cli/multinode/bin/srun) and Open MPI's variables as `mpirun -x` sets them:
#  1. 2 hosts x 2 ranks give the checkpoint of 1 host x 4 ranks, byte for byte, each way;
#  2. the link goes down mid-run: every rank on both sides exits 1 within seconds of
#     --dist_heartbeat_timeout, naming the ranks and host it lost; checkpoint.pth is untouched;
#  3. the link comes back, the same commands rerun on both hosts, and the run ends with the
#     checkpoint of an uninterrupted run;
#  4. host B dies (all its processes SIGKILLed): host A ends at once naming ranks 2, 3 and B;
#     the rerun resumes to the uninterrupted run's checkpoint too;
#  5. the link held to 100 Mbit/s (tc tbf; this kernel has no netem for delay or loss, and the
#     test says so when it has none): the run still ends with the 1 x 4 checkpoint.
# usage: test_two_hosts.sh DINO_BINARY
# Exits 0 on success, 1 with the failed check, 77 when it cannot run here (no root).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
source "$here/hosts.sh"
source "$here/small_run.sh"
hosts_test_start two_hosts "$1"
data=$fashion_mnist
port=29500

fail() { echo "FAIL: $*" >&2; failed=1; exit 1; }
# A small run: 128 images, 4 ranks x 8 = 4 iterations per epoch.
train_args() {  # OUTPUT_DIR EPOCHS
  small_train_args "$data" "$1" "$2" --dist_timeout 600 --dist_heartbeat_timeout 8
}
# Node N of the 2-host run through `dino launch`, in the background; its pid in $! .
launch_node() {  # A|B NODE_RANK OUTPUT_DIR EPOCHS LOG
  local host=$1 node=$2 out=$3 epochs=$4 log=$5
  on_host "$host" env GLOO_SOCKET_IFNAME=eth0 "$dino" launch --nproc 2 --nnodes 2 \
    --node_rank "$node" --master_addr node01 --master_port "$port" --grace_seconds 5 \
    -- $(train_args "$out" "$epochs") >"$log" 2>&1 &
}
# A 4-epoch 2-host run, started in the background (pids $a, $b), returning once epoch 2 is
# under way (log.txt has epoch 1's line, so checkpoint.pth holds 2 complete epochs).
start_into_epoch_2() {  # LOG_SUFFIX
  launch_node B 1 "$run" 4 "$work/b$1.log"; b=$!
  launch_node A 0 "$run" 4 "$work/a$1.log"; a=$!
  local deadline=$((SECONDS + 120))
  until grep -q '"epoch": 1' "$run/log.txt" 2>/dev/null; do
    ((SECONDS < deadline)) || fail "the 2-host run did not finish 2 epochs: $(tail -3 "$work/a$1.log")"
    kill -0 $a 2>/dev/null || fail "node 0 ended early: $(tail -3 "$work/a$1.log")"
    sleep 0.2
  done
}
# Both nodes of one 2-host run, to the end; fails naming WHAT and the node's last lines.
run_two_hosts() {  # EPOCHS LOG_SUFFIX WHAT
  launch_node B 1 "$run" "$1" "$work/b$2.log"; local b=$!
  launch_node A 0 "$run" "$1" "$work/a$2.log"; local a=$!
  wait_for $a 300; [[ $code == 0 ]] || fail "$3, node 0: $(tail -3 "$work/a$2.log")"
  wait_for $b 300; [[ $code == 0 ]] || fail "$3, node 1: $(tail -3 "$work/b$2.log")"
}
same_checkpoint() {  # DIR_A DIR_B WHAT
  cmp -s "$1/checkpoint.pth" "$2/checkpoint.pth" || fail "$3: checkpoint.pth differs"
}

run=$work/run  # every run writes here: its path is in the checkpoint's args
keep() { mv "$run" "$work/$1"; }  # sets a finished run aside under NAME

# The SLURM recipe: the sbatch script as it is, its srun the fixture's (2 tasks per host).
run_sbatch() {  # EPOCHS LOG
  PATH="$here/bin:$PATH" XDINO_TEST_HOSTS="$HOST_A:node01 $HOST_B:node02" DINO="$dino" \
    SLURM_JOB_ID=9500 SLURM_JOB_NODELIST='node[01-02]' SLURM_NNODES=2 SLURM_NTASKS_PER_NODE=2 \
    GLOO_SOCKET_IFNAME=eth0 OMP_NUM_THREADS=1 \
    bash "$root/launch/slurm/dino_train.sbatch" $(train_args "$run" "$1" | cut -d' ' -f2-) >"$2" 2>&1
}
# The Open MPI recipe's variables, each rank started on its host by hand (no mpirun here):
# mpirun -np 4 -H node01:2,node02:2 -x MASTER_ADDR=node01 -x MASTER_PORT -x GLOO_SOCKET_IFNAME
start_mpi_ranks() {  # EPOCHS; pids in the array `pids`
  local r host
  pids=()
  for r in 0 1 2 3; do
    ((r < 2)) && host=A || host=B
    on_host $host env OMPI_COMM_WORLD_RANK=$r OMPI_COMM_WORLD_SIZE=4 \
      OMPI_COMM_WORLD_LOCAL_RANK=$((r % 2)) OMPI_COMM_WORLD_LOCAL_SIZE=2 MASTER_ADDR=node01 \
      MASTER_PORT=$port GLOO_SOCKET_IFNAME=eth0 OMP_NUM_THREADS=1 \
      "$dino" $(train_args "$run" "$1") >"$work/mpi.$r.log" 2>&1 &
    pids+=($!)
  done
}

# --- 1. 2 hosts x 2 ranks = 1 host x 4 ranks, through each launcher's variables ----------
"$dino" launch --nproc 4 --oversubscribe -- $(train_args "$run" 2) >"$work/ref.log" 2>&1 ||
  fail "1 x 4 run: $(tail -3 "$work/ref.log")"
keep ref2

run_two_hosts 2 "" "2 x 2 (dino launch)"
grep -q "launched ranks 2-3 of 4 on node 1 of 2" "$work/b.log" ||
  fail "node 1 did not start ranks 2-3: $(head -3 "$work/b.log")"
same_checkpoint "$work/ref2" "$run" "2 hosts x 2 ranks (dino launch --nnodes 2) vs 1 x 4"
keep launch2
echo "ok: 2 hosts x 2 ranks (dino launch --nnodes 2, torchrun's variables) = 1 host x 4 ranks"

run_sbatch 2 "$work/slurm.log" || fail "sbatch launch/slurm/dino_train.sbatch: $(tail -3 "$work/slurm.log")"
same_checkpoint "$work/ref2" "$run" "2 hosts x 2 ranks (sbatch, SLURM's variables) vs 1 x 4"
keep slurm
echo "ok: 2 hosts x 2 ranks (launch/slurm/dino_train.sbatch, node[01-02]) = 1 host x 4 ranks"

start_mpi_ranks 2
for r in 0 1 2 3; do
  wait_for ${pids[$r]} 300; [[ $code == 0 ]] || fail "mpi rank $r: $(tail -3 "$work/mpi.$r.log")"
done
same_checkpoint "$work/ref2" "$run" "2 hosts x 2 ranks (Open MPI's variables) vs 1 x 4"
keep mpi
echo "ok: 2 hosts x 2 ranks (Open MPI's variables) = 1 host x 4 ranks"

# --- 2. the link goes down in the middle of a run ------------------------------------------
"$dino" launch --nproc 4 --oversubscribe -- $(train_args "$run" 4) >"$work/ref4.log" 2>&1 ||
  fail "1 x 4 run of 4 epochs: $(tail -3 "$work/ref4.log")"
keep ref4
start_into_epoch_2 1
cp "$run/checkpoint.pth" "$work/before_cut.pth"
cut_at=$SECONDS
cut_link
wait_for $a 120; code_a=$code
wait_for $b 120; code_b=$code
took=$((SECONDS - cut_at))
[[ $code_a != 0 && $code_a != 124 ]] || fail "node 0 after the cut: exit $code_a: $(tail -5 "$work/a1.log")"
[[ $code_b != 0 && $code_b != 124 ]] || fail "node 1 after the cut: exit $code_b: $(tail -5 "$work/b1.log")"
((took < 60)) || fail "the cut took $took s to end the run (--dist_heartbeat_timeout 8)"
grep -q "lost rank 2, 3 on host node02 $ADDR_B: no heartbeat for 8 s" "$work/a1.log" ||
  fail "node 0 does not name ranks 2, 3 on $ADDR_B: $(grep error "$work/a1.log" | head -2)"
# The workers' store is on a port of its own each round (node_rendezvous.h), not $port.
grep -q "lost rank 0, 1 on host node01 $ADDR_A: rank 0's rendezvous store at node01:[0-9]* has not answered for 8 s" "$work/b1.log" ||
  fail "node 1 does not name ranks 0, 1 on $ADDR_A: $(grep error "$work/b1.log" | head -2)"
cmp -s "$run/checkpoint.pth" "$work/before_cut.pth" || fail "checkpoint.pth changed after the cut"
echo "ok: a cut link ends both hosts in $took s, each naming the other's ranks; checkpoint intact"

# --- 3. the link returns: the same commands resume to the uninterrupted run ----------------
restore_link
run_two_hosts 4 2 "rerun"
grep -q "Found checkpoint" "$work/a2.log" || fail "the rerun did not resume: $(head -5 "$work/a2.log")"
same_checkpoint "$work/ref4" "$run" "interrupted and resumed vs uninterrupted"
echo "ok: after the link returns, rerunning both hosts ends with the uninterrupted run's checkpoint"
keep resumed_after_cut

# --- 4. host B dies (every process on it SIGKILLed): the same outcome ------------------------
start_into_epoch_2 3
cp "$run/checkpoint.pth" "$work/before_death.pth"
died_at=$SECONDS
ip netns pids "$HOST_B" | xargs -r kill -9
wait_for $a 120; code_a=$code
took=$((SECONDS - died_at))
[[ $code_a != 0 && $code_a != 124 ]] || fail "node 0 after host B died: exit $code_a"
((took < 60)) || fail "host B's death took $took s to end node 0"
grep -q "lost rank 2, 3: the process died or is stopped (no heartbeat; rank 2, 3 on host node02 $ADDR_B)" \
  "$work/a3.log" || fail "node 0 does not name ranks 2, 3 on $ADDR_B: $(grep error "$work/a3.log" | head -2)"
cmp -s "$run/checkpoint.pth" "$work/before_death.pth" || fail "checkpoint.pth changed after host B died"
wait $b 2>/dev/null || true
run_two_hosts 4 4 "rerun after the death"
same_checkpoint "$work/ref4" "$run" "resumed after host B died vs uninterrupted"
echo "ok: host B dies: node 0 ends in $took s naming ranks 2, 3 and their host; the rerun resumes"
keep resumed_after_death

# --- 5. a slow link ------------------------------------------------------------------------
if on_host A tc qdisc add dev eth0 root netem delay 20ms loss 1% 2>/dev/null; then
  on_host B tc qdisc add dev eth0 root netem delay 20ms loss 1%
  slow="20 ms delay and 1% loss (netem)"
else
  echo "note: this kernel has no netem (no delay or loss can be added); the slow link is tbf's"
  tbf_link 100mbit
  slow="100 Mbit/s (tbf)"
fi
slow_at=$SECONDS
run_two_hosts 2 5 "slow link"
same_checkpoint "$work/ref2" "$run" "2 hosts x 2 ranks over a slow link vs 1 x 4"
echo "ok: over a link with $slow the 2 x 2 run ends with the 1 x 4 checkpoint ($((SECONDS - slow_at)) s)"
