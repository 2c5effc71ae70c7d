# Simulated hosts for the multi-host tests: two (or three) network namespaces, each with its own
# address, so that ranks started in them talk through real network stacks over a link the test
# can cut. Sourced by tests/cli/multinode/test_*.sh.
#
# Contract:
#  - hosts_require: without root, `ip` or `unshare`, skips the test or fails it under
#    XDINO_REQUIRE_ALL=1 (CI), naming what is missing (tests/support/require.sh).
#  - hosts_up: makes namespaces $HOST_A and $HOST_B (names carry this shell's PID, so parallel
#    runs never collide; namespaces left by a killed run, whose PID is gone, are removed
#    first), links them (a veth pair whose ends are called eth0 on both hosts, as on a cluster
#    node: $ADDR_A in A, $ADDR_B in B, a /24 that exists only inside these two namespaces) and
#    writes /etc/netns/<ns>/hosts mapping node01 and node02 to them, so that `ip netns exec`
#    resolves the names as a cluster's DNS would. Registers hosts_down on EXIT, INT and TERM.
#  - hosts_up 3: the same with a third host, $HOST_C (node03, $ADDR_C), for the tests that need
#    a host of their own for a third service (tests/cli/multinode/etcd_cluster.sh). Three hosts
#    cannot share one veth pair: each host's eth0 is one end of a veth pair whose other end is
#    a port of a bridge (br0) in a fourth namespace, $HOST_SWITCH, that has no address of its
#    own (a switch). Every host's /etc/netns hosts file maps node01, node02 and node03. Without
#    the argument (or with 2) nothing of this exists: the two-host tests get exactly the pair
#    above.
#  - on_host A|B|C CMD...: runs CMD inside that host's namespace, under host name node01 /
#    node02 / node03 (C only after hosts_up 3).
#  - cut_link / restore_link: host A's link down / up, from host A's side (with three hosts,
#    A is cut off from both others).
#  - tbf_link RATE: the eth0 of hosts A and B held to RATE (tc tbf: the slow link a kernel
#    without netem can make).
#  - hosts_down: kills every process left in the namespaces (the switch's too), deletes them
#    and their /etc/netns folders. Idempotent; runs on every exit path.
#  - hosts_test_start NAME DINO_BINARY [3]: the opening of a multi-host test: sets $dino to the
#    binary's absolute path, skips or fails as hosts_require and require_fashion_mnist do (then
#    $fashion_mnist is the data), brings the hosts up (hosts_up, with 3 when given) and makes
#    $work, a fresh folder /tmp/xdino_NAME.XXXXXX for the logs; on EXIT, hosts_down, and $work
#    is removed, or kept and named on stderr when the test has set $failed.
# Also brings tests/support/wait.sh (wait_for, wait_for_line, pid_of_rank): a host test waits
# on the ranks it starts in the background.
# Traffic never leaves the namespaces: no address outside them is used, and no interface of
# the root namespace is made (with three hosts, every veth end is created in its namespace).

source "$(dirname "${BASH_SOURCE[0]}")/../../support/require.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../../support/wait.sh"

hosts_require() {
  require_root "network namespaces"
  require_command ip iproute2
  require_command unshare util-linux
}

hosts_down() {
  local ns
  for ns in "${HOST_A:-}" "${HOST_B:-}" "${HOST_C:-}" "${HOST_SWITCH:-}"; do
    [[ -n "$ns" ]] || continue
    if ip netns list | grep -qw "^$ns"; then
      ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
      ip netns del "$ns" 2>/dev/null || true
    fi
    rm -rf "/etc/netns/$ns"
  done
}

remove_stale_hosts() {
  local ns pid
  for ns in $(ip netns list | awk '{print $1}' | grep -E '^xdt[0-9]+[abcs]$' || true); do
    pid=${ns#xdt}
    pid=${pid%?}
    # Gone, or a zombie its parent has not reaped yet (its namespaces are as stale).
    if ! kill -0 "$pid" 2>/dev/null ||
      [[ $(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null) == Z* ]]; then
      ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
      ip netns del "$ns" 2>/dev/null || true
      rm -rf "/etc/netns/$ns"
    fi
  done
}

hosts_up() {  # [3]
  local count=${1:-2}
  if [[ $count != 2 && $count != 3 ]]; then
    echo "hosts_up: 2 or 3 hosts, not '$count'" >&2
    return 2
  fi
  remove_stale_hosts
  HOST_A="xdt$$a"
  HOST_B="xdt$$b"
  local veth_a="xdv$$a" veth_b="xdv$$b"
  local net="10.231.$(($$ % 250)).0"
  ADDR_A="${net%.0}.1"
  ADDR_B="${net%.0}.2"
  trap hosts_down EXIT
  trap 'hosts_down; exit 130' INT
  trap 'hosts_down; exit 143' TERM
  HOST_C='' HOST_SWITCH='' ADDR_C=''
  if [[ $count == 3 ]]; then
    hosts_up_switched
    return
  fi
  ip netns add "$HOST_A"
  ip netns add "$HOST_B"
  # Made in the root namespace under unique names, renamed once inside their namespaces.
  ip link add "$veth_a" type veth peer name "$veth_b"
  ip link set "$veth_a" netns "$HOST_A"
  ip link set "$veth_b" netns "$HOST_B"
  ip -n "$HOST_A" link set "$veth_a" name eth0
  ip -n "$HOST_B" link set "$veth_b" name eth0
  ip -n "$HOST_A" addr add "$ADDR_A/24" dev eth0
  ip -n "$HOST_B" addr add "$ADDR_B/24" dev eth0
  local ns
  for ns in "$HOST_A" "$HOST_B"; do
    ip -n "$ns" link set lo up
    mkdir -p "/etc/netns/$ns"
    printf '127.0.0.1 localhost\n%s node01\n%s node02\n' "$ADDR_A" "$ADDR_B" \
      >"/etc/netns/$ns/hosts"
  done
  ip -n "$HOST_A" link set eth0 up
  ip -n "$HOST_B" link set eth0 up
}

# Three hosts on a switch: $HOST_SWITCH holds a bridge, br0, and one port per host; each host's
# eth0 is the other end of its port's veth pair. Called by hosts_up 3, which has set the traps,
# $HOST_A, $HOST_B, $ADDR_A and $ADDR_B.
hosts_up_switched() {
  HOST_C="xdt$$c"
  HOST_SWITCH="xdt$$s"
  ADDR_C="${ADDR_A%.1}.3"
  local ns h
  for ns in "$HOST_SWITCH" "$HOST_A" "$HOST_B" "$HOST_C"; do
    ip netns add "$ns"
    ip -n "$ns" link set lo up
  done
  ip -n "$HOST_SWITCH" link add br0 type bridge
  ip -n "$HOST_SWITCH" link set br0 up
  for h in A B C; do
    ns=$(host_namespace $h)
    # Both ends made where they live: port$h on the switch, eth0 in the host.
    ip -n "$HOST_SWITCH" link add "port$h" type veth peer name eth0 netns "$ns"
    ip -n "$HOST_SWITCH" link set "port$h" master br0
    ip -n "$HOST_SWITCH" link set "port$h" up
    ip -n "$ns" addr add "$(host_addr $h)/24" dev eth0
    mkdir -p "/etc/netns/$ns"
    printf '127.0.0.1 localhost\n%s node01\n%s node02\n%s node03\n' "$ADDR_A" "$ADDR_B" \
      "$ADDR_C" >"/etc/netns/$ns/hosts"
    ip -n "$ns" link set eth0 up
  done
}

# The namespace, address and host name of host A, B or C (C only after hosts_up 3).
host_namespace() {  # A|B|C
  case $1 in
    A) echo "$HOST_A" ;;
    B) echo "$HOST_B" ;;
    C) echo "${HOST_C:?host C exists only after hosts_up 3}" ;;
    *) echo "no host '$1' (A, B or C)" >&2; return 2 ;;
  esac
}
host_addr() {  # A|B|C
  case $1 in
    A) echo "$ADDR_A" ;;
    B) echo "$ADDR_B" ;;
    C) echo "${ADDR_C:?host C exists only after hosts_up 3}" ;;
    *) echo "no host '$1' (A, B or C)" >&2; return 2 ;;
  esac
}

on_host() {
  local which=$1 ns name
  shift
  case $which in
    A) ns=$HOST_A name=node01 ;;
    B) ns=$HOST_B name=node02 ;;
    C) ns=${HOST_C:?host C exists only after hosts_up 3} name=node03 ;;
    *) echo "on_host: no host '$which' (A, B or C)" >&2; return 2 ;;
  esac
  # Its own host name too (a UTS namespace), as the error lines name hosts by it. Both exec,
  # so the caller's $! is the command's own pid.
  ip netns exec "$ns" unshare --uts bash -c 'hostname "$0" && exec "$@"' "$name" "$@"
}

cut_link() { ip -n "$HOST_A" link set eth0 down; }
restore_link() {
  ip -n "$HOST_A" link set eth0 up
  ip -n "$HOST_A" addr replace "$ADDR_A/24" dev eth0
}

hosts_test_start() {  # NAME DINO_BINARY [3]
  dino=$(readlink -f "$2")
  hosts_require
  require_fashion_mnist
  hosts_up "${3:-2}"
  work=$(mktemp -d "/tmp/xdino_$1.XXXXXX")
  # On a failure the logs stay, and the line says where.
  trap 'hosts_down; if [[ -n ${failed:-} ]]; then echo "logs: $work" >&2; else rm -rf "$work"; fi' EXIT
}

tbf_link() {
  local ns
  for ns in "$HOST_A" "$HOST_B"; do
    ip netns exec "$ns" tc qdisc replace dev eth0 root tbf rate "$1" burst 256kb latency 50ms
  done
}
