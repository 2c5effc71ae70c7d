#!/usr/bin/env bash
# Speed across hosts: all-reduce bandwidth and the DINO step for 1 host x 4 ranks against 2
# simulated hosts x 2 ranks (tests/cli/multinode/hosts.sh: two network namespaces and a veth link),
# on the open link and on the link held to 1 Gbit/s by tbf.
#   sudo bench/scenarios/multinode_step.sh [build_dir=build] [rounds=3]
# The kernel of our CI machines has no netem (`tc qdisc add ... netem` says "Specified qdisc kind
# is unknown"), so there is no added delay or loss here: tbf, which limits the rate, is the slow
# link this kernel can make. The script says which it used.
#
# Every rank is one process with one OpenMP/OpenBLAS thread, started by hand with torchrun's
# variables (RANK, WORLD_SIZE, ...), so both layouts run the same 4 processes on the same cores
# and differ only in the path between ranks 0-1 and 2-3: loopback inside host A, or the veth.
# The layouts alternate round by round and the medians are printed, as a ratio.
#
# The DINO step is bench_train's (synthetic crops; the trainer, grad buckets and all) at the main
# job's shapes (xcit_nano_4_p4, 2 x 28 px + 6 x 12 px crops, batch 8 per rank = 32) with
# out_dim 1024 (the main job) and 65536 (DINO's default head, 4x the gradient bytes). Its JSON
# gives allreduce_bytes_per_step (what each rank hands to all-reduce per step) and
# grad_wait_sec (the part of the gradient all-reduce that backward did not hide).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../../tests/cli/multinode/hosts.sh"
build=$(readlink -f "${1:-build}")
rounds=${2:-3}
hosts_require
hosts_up
tmp=$(mktemp -d /tmp/xdino_multinode_bench.XXXXXX)
trap 'hosts_down; rm -rf "$tmp"' EXIT

# Starts 4 ranks of CMD: "one" puts all on host A, "two" ranks 0-1 on A and 2-3 on B.
run_ranks() {  # LAYOUT PORT CMD...; rank 0's stdout to $tmp/out
  local layout=$1 port=$2 r host pids=()
  shift 2
  for r in 0 1 2 3; do
    if [[ $layout == two && $r -ge 2 ]]; then host=B; else host=A; fi
    on_host $host env RANK=$r WORLD_SIZE=4 LOCAL_RANK=$((r % 2)) LOCAL_WORLD_SIZE=2 \
      MASTER_ADDR=node01 MASTER_PORT="$port" GLOO_SOCKET_IFNAME=eth0 \
      OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE OPENBLAS_NUM_THREADS=1 "$@" \
      >"$tmp/out.$r" 2>"$tmp/err.$r" &
    pids+=($!)
  done
  for r in 0 1 2 3; do
    wait "${pids[$r]}" || { echo "rank $r failed: $(tail -3 "$tmp/err.$r")" >&2; return 1; }
  done
  cp "$tmp/out.0" "$tmp/out"
}

shape=(--arch xcit_nano_4_p4 --global_size 28 --local_size 12 --locals 6 --batch 8
       --head_hidden_dim 1024 --steps 12 --warmup 3 --device cpu --precision fp32 --threads 1)
port=29600
declare -A step comm bytes wait
for link in open tbf; do
  [[ $link == tbf ]] && tbf_link 1gbit
  for round in $(seq "$rounds"); do
    for layout in one two; do
      port=$((port + 1))
      run_ranks $layout $port "$build/bench/bench_allreduce" 4 64
      # 16 MiB: between the main job's gradients (~10 MB) and the default head's.
      ms=$(awk '$1 == 16777216 {print $2}' "$tmp/out")
      comm[$link.$layout]+="$ms "
      for dim in 1024 65536; do
        port=$((port + 1))
        run_ranks $layout $port "$build/bench/bench_train" "${shape[@]}" --out_dim $dim
        json=$(grep '^{' "$tmp/out")
        s=$(sed 's/.*"sec_per_step": \([0-9.]*\).*/\1/' <<<"$json")
        w=$(sed 's/.*"grad_wait_sec": \([0-9.]*\).*/\1/' <<<"$json")
        bytes[$dim]=$(sed 's/.*"allreduce_bytes_per_step": \([0-9]*\).*/\1/' <<<"$json")
        step[$link.$layout.$dim]+="$s "
        wait[$link.$layout.$dim]+="$w "
        echo "round $round, $link link, $layout host(s), out_dim $dim: $s s/step, $w s waiting for gradients"
      done
      echo "round $round, $link link, $layout host(s): all-reduce of 16 MiB in $ms ms"
    done
  done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", b / a}'; }
echo "# medians of $rounds rounds; 2-host/1-host ratio (1.00 = no cost for crossing hosts)"
for link in open tbf; do
  one=$(echo "${comm[$link.one]}" | median); two=$(echo "${comm[$link.two]}" | median)
  echo "$link link: all-reduce 16 MiB: 1 host $one ms, 2 hosts $two ms, ratio $(ratio "$one" "$two")"
  for dim in 1024 65536; do
    one=$(echo "${step[$link.one.$dim]}" | median); two=$(echo "${step[$link.two.$dim]}" | median)
    w1=$(echo "${wait[$link.one.$dim]}" | median); w2=$(echo "${wait[$link.two.$dim]}" | median)
    echo "$link link: DINO step, out_dim $dim (${bytes[$dim]} bytes all-reduced per rank):" \
         "1 host $one s (waits $w1 s), 2 hosts $two s (waits $w2 s), ratio $(ratio "$one" "$two")"
  done
done
