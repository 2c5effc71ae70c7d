#!/usr/bin/env bash
# A rendezvous that survives any host (issue 72): `dino launch --rdzv_backend etcd` on three
# simulated hosts, node01..node03 (tests/cli/multinode/hosts.sh, hosts_up 3), each running one
# member of a three-member etcd cluster (tests/cli/multinode/etcd_cluster.sh). Hosts A and B
# run a launcher each, 1 rank per node; host C runs only its etcd member. No launcher serves
# the rendezvous: every launcher is equal, the round lives in etcd under
# /xdino/rendezvous/<rdzv_id>/ and a launcher's heartbeat is a lease of keep_alive_interval x
# keep_alive_max_attempt seconds. Each run gives --rdzv_endpoint node01:2379,node02:2379,
# node03:2379, a fresh --rdzv_id, --max_restarts 1 and timed checkpoints (--saveckp_minutes)
# after nearly every iteration:
#  1. an uninterrupted run: its checkpoint is the reference;
#  2. node 0's host (A, unless the rendezvous gave node 0 to B) dies whole in epoch 1: its
#     launcher, its rank and its etcd member SIGKILLed; the member is started again on its data
#     folder and the launcher with the same command: the run ends by itself with the
#     reference's checkpoint, byte for byte, and the member is healthy again;
#  3. host C's member down for a whole run (2 of 3 members), named first in --rdzv_endpoint
#     (node03:2379,node01:2379,node02:2379: every call must move past it): the run ends with
#     the reference's checkpoint;
#  4. quorum lost (the members of B and C SIGKILLed) while a run trains: both launchers exit
#     non-zero within join_timeout + read_timeout + the lease's TTL + --grace_seconds + the
#     10 s before SIGKILL (+ 15 s), each with one error line, its last, naming etcd; a launcher
#     started while quorum is still lost (a run that would form) does the same within
#     join_timeout + read_timeout (+ 15 s);
#  5. an endpoint list nobody serves (a port with no etcd on any host): exit 2, one line.
# usage: test_etcd_hosts.sh DINO_BINARY
# Exits 0 on success, 1 with the failed check, 77 when it cannot run here (no root, no etcd).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/hosts.sh"
source "$here/etcd_cluster.sh"
source "$here/small_run.sh"
etcd_require
hosts_test_start etcd_hosts "$1" 3
grace=5
heartbeat=8
join_timeout=20
read_timeout=5
keep_alive_interval=1
keep_alive_max_attempt=3
ttl=$((keep_alive_interval * keep_alive_max_attempt))
rdzv_conf=keep_alive_interval=$keep_alive_interval,keep_alive_max_attempt=$keep_alive_max_attempt
rdzv_conf+=,join_timeout=$join_timeout,read_timeout=$read_timeout

fail() { echo "FAIL: $*" >&2; failed=1; exit 1; }
etcd_cluster_start "$work" || fail "the etcd cluster did not start: $(tail -3 "$work"/etcd*.log)"
run=$work/run  # every run writes here: its path is in the checkpoint's args
# 128 images, 2 ranks x 8 = 8 iterations per epoch, 2 epochs, a checkpoint after (nearly)
# every iteration. The kill comes in epoch 1, the last: the epoch's log line, which
# checkpoint.pth holds, then sums statistics from before and after the resume, and must come
# out bit for bit (each rank resumes its own sums, ssl/training_state.h; with all of them on
# rank 0, as before 2026-11-28, its last digit differed).
epochs=2
train_args() {  # OUTPUT_DIR EPOCHS
  small_train_args "$fashion_mnist" "$1" "$2" \
    --saveckp_minutes 0.001 --dist_timeout 600 --dist_heartbeat_timeout $heartbeat
}
# A node's launcher in the background, its pid in pid[HOST]. stdout and stderr into LOG, or
# stderr alone into ERR_LOG when given. $endpoints, $out and $epochs may be overridden.
declare -A pid=()
launch_node() {  # A|B RDZV_ID LOG [ERR_LOG]
  local cmd=(on_host "$1" env GLOO_SOCKET_IFNAME=eth0 "$dino" launch --nnodes 2
    --nproc_per_node 1 --rdzv_backend etcd --rdzv_endpoint "${endpoints:-$ETCD_ENDPOINTS}"
    --rdzv_id "$2" --rdzv_conf "$rdzv_conf" --max_restarts 1 --grace_seconds $grace
    -- $(train_args "${out:-$run}" "$epochs"))
  if [[ -n ${4:-} ]]; then
    "${cmd[@]}" >"$3" 2>"$4" &
  else
    "${cmd[@]}" >"$3" 2>&1 &
  fi
  pid[$1]=$!
}
# Both nodes (A first), returning once PATTERN is in one of their logs (rank 0's node's).
start_both() {  # RDZV_ID LOG_SUFFIX PATTERN [ERR]
  launch_node A "$1" "$work/a$2.log" ${4:+"$work/a$2.err"}
  sleep 1
  launch_node B "$1" "$work/b$2.log" ${4:+"$work/b$2.err"}
  local deadline=$((SECONDS + 120))
  until grep -q "$3" "$work/a$2.log" "$work/b$2.log" 2>/dev/null; do
    ((SECONDS < deadline)) || fail "no '$3' within 120 s: $(tail -3 "$work/a$2.log")"
    kill -0 ${pid[A]} 2>/dev/null || fail "node A ended early: $(tail -3 "$work/a$2"*)"
    kill -0 ${pid[B]} 2>/dev/null || fail "node B ended early: $(tail -3 "$work/b$2"*)"
    sleep 0.1
  done
}
# Waits for HOST's launcher (up to SECONDS) and fails unless it exited 0.
expect_success() {  # HOST LOG SECONDS WHAT
  wait_for ${pid[$1]} "$3"
  [[ $code == 0 ]] || fail "$4: node $1's launcher exited $code: $(tail -3 "$2")"
}
same_checkpoint() {  # WHAT
  cmp -s "$work/ref/checkpoint.pth" "$run/checkpoint.pth" || fail "$1: checkpoint.pth differs"
}
# The host whose launcher got node 0 in LOG_SUFFIX's run: A or B.
node0_host() {  # LOG_SUFFIX
  if grep -q "^launched ranks 0-0 of 2 on node 0 of 2 " "$work/a$1.log"; then echo A; else echo B; fi
}
# The iteration the run's last start resumed from (rank 0's line, either node's log).
resumed_from() {  # LOG...
  sed -n 's/.*Starting DINO training at epoch [0-9]*, iteration \([0-9]*\)$/\1/p' "$@" |
    sort -n | tail -1
}
# A launcher that gave up on a lost etcd: non-zero, not killed by wait_for, one error line of
# its own (a rank's are "[rank N] ..." or "dino train: error: ..."), the last, naming etcd.
expect_gave_up_on_etcd() {  # HOST ERR_LOG TOOK BOUND WHAT
  [[ $code != 0 && $code != 124 ]] ||
    fail "$5: node $1's launcher exited $code after $3 s (bound $4 s): $(tail -3 "$2")"
  local errors
  errors=$(grep -cE '^(dino launch: )?error: ' "$2" || true)
  [[ $errors == 1 ]] || fail "$5: node $1's launcher wrote $errors error lines: $(tail -3 "$2")"
  [[ $(tail -1 "$2") =~ ^(dino\ launch:\ )?error:\ .*etcd ]] ||
    fail "$5: node $1's last stderr line does not name etcd: $(tail -1 "$2")"
}

# --- 1. an uninterrupted run: the reference --------------------------------------------------
launch_node A etcd-ref "$work/a1.log"
sleep 1
launch_node B etcd-ref "$work/b1.log"
expect_success A "$work/a1.log" 300 "the uninterrupted run"
expect_success B "$work/b1.log" 300 "the uninterrupted run"
grep -q "^launched ranks 0-0 of 2 on node 0 of 2 " "$work/a1.log" "$work/b1.log" &&
  grep -q "^launched ranks 1-1 of 2 on node 1 of 2 " "$work/a1.log" "$work/b1.log" ||
  fail "the nodes did not get ranks 0 and 1: $(grep -h "^launched" "$work/a1.log" "$work/b1.log")"
mv "$run" "$work/ref"
echo "ok: an uninterrupted 2-node run through the etcd rendezvous (node 0 on host" \
  "$(node0_host 1)): the reference checkpoint"

# --- 2. node 0's host dies whole, and comes back ---------------------------------------------
start_both etcd-host 2 "saved before iteration 1[0-3] "
dead=$(node0_host 2)
[[ $dead == A ]] && alive=B || alive=A
died_at=$SECONDS
kill -9 $(ip netns pids "$(host_namespace $dead)")  # its launcher, its rank, its etcd member
wait ${pid[$dead]} 2>/dev/null || true
etcd_member_kill $dead
sleep 2
etcd_member_restart $dead
launch_node $dead etcd-host "$work/${dead,}2r.log"
expect_success $dead "$work/${dead,}2r.log" 300 "host $dead died and came back"
expect_success $alive "$work/${alive,}2.log" 300 "host $dead died and came back"
took=$((SECONDS - died_at))
same_checkpoint "host $dead died and came back"
[[ $(grep -c "^launched ranks" "$work/${alive,}2.log") -ge 2 ]] ||
  fail "host $dead died: node $alive did not start its rank again: $(tail -3 "$work/${alive,}2.log")"
etcd_wait_healthy 20 A B C || fail "host $dead's etcd member did not rejoin on its data folder"
echo "ok: node 0's host ($dead) killed whole (launcher, rank, etcd member) in epoch 1 and" \
  "started again: the run resumed from iteration" \
  "$(resumed_from "$work/${alive,}2.log" "$work/${dead,}2r.log") and ended by itself $took s" \
  "after the kill with the reference checkpoint; the member rejoined"
rm -rf "$run"

# --- 3. one member down for a whole run -------------------------------------------------------
etcd_member_kill C
# The dead member first: each launcher's first call goes to it, and must move on.
endpoints=node03:2379,node01:2379,node02:2379
launch_node A etcd-two-members "$work/a3.log"
sleep 1
launch_node B etcd-two-members "$work/b3.log"
endpoints=
expect_success A "$work/a3.log" 300 "host C's member down"
expect_success B "$work/b3.log" 300 "host C's member down"
same_checkpoint "host C's member down"
etcd_member_restart C
etcd_wait_healthy 20 A B C || fail "host C's etcd member did not come back"
echo "ok: host C's etcd member down for a whole run (2 of 3 members, named first in" \
  "--rdzv_endpoint): the run ended with the reference checkpoint"
rm -rf "$run"

# --- 4. quorum lost -------------------------------------------------------------------------
# A run far longer than the bound, in a folder of its own: it cannot end by itself meanwhile.
out=$work/run_quorum epochs=100 start_both etcd-quorum 4 "saved before iteration " err
lost_at=$SECONDS
etcd_member_kill B
etcd_member_kill C
bound=$((join_timeout + read_timeout + ttl + grace + 10 + 15))
declare -A took_by=()
for h in A B; do
  wait_for ${pid[$h]} $((bound - (SECONDS - lost_at) > 1 ? bound - (SECONDS - lost_at) : 1))
  took_by[$h]=$((SECONDS - lost_at))
  expect_gave_up_on_etcd $h "$work/${h,}4.err" ${took_by[$h]} $bound "quorum lost while training"
done
echo "ok: quorum lost while training: node A's launcher exited after ${took_by[A]} s, node B's" \
  "after ${took_by[B]} s (bound $bound s): $(tail -1 "$work/b4.err")"
started=$SECONDS
out=$work/run_quorum launch_node A etcd-forming "$work/a4f.log" "$work/a4f.err"
bound=$((join_timeout + read_timeout + 15))
wait_for ${pid[A]} $bound
took=$((SECONDS - started))
expect_gave_up_on_etcd A "$work/a4f.err" $took $bound "a run forming without quorum"
echo "ok: a launcher started without quorum exited after $took s (bound $bound s):" \
  "$(tail -1 "$work/a4f.err")"

# --- 5. an endpoint list nobody serves --------------------------------------------------------
started=$SECONDS
endpoints=node01:2391,node02:2391,node03:2391 launch_node A etcd-nobody "$work/a5.log" "$work/a5.err"
bound=$((join_timeout + read_timeout + 15))
wait_for ${pid[A]} $bound
took=$((SECONDS - started))
[[ $code == 2 ]] ||
  fail "an endpoint list nobody serves: exit $code after $took s: $(tail -3 "$work/a5.err")"
[[ $(grep -c . "$work/a5.err") == 1 ]] && grep -q "^dino launch: error: " "$work/a5.err" ||
  fail "an endpoint list nobody serves: not one error line: $(head -3 "$work/a5.err")"
echo "ok: an endpoint list nobody serves: exit 2 after $took s, one line: $(cat "$work/a5.err")"
