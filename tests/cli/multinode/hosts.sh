# Simulated hosts for the multi-host tests: two network namespaces joined by a veth pair, each
# with its own address, so that ranks started in them talk through real network stacks over a
# link the test can cut. Sourced by tests/cli/multinode/test_*.sh.
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
#  - on_host A|B CMD...: runs CMD inside that host's namespace, under host name node01 / node02.
#  - cut_link / restore_link: the link down / up, from host A's side.
#  - tbf_link RATE: both ends of the link held to RATE (tc tbf: the slow link a kernel without
#    netem can make).
#  - hosts_down: kills every process left in the namespaces, deletes them and their
#    /etc/netns folders. Idempotent; runs on every exit path.
#  - hosts_test_start NAME DINO_BINARY: the opening of a two-host test: sets $dino to the
#    binary's absolute path, skips or fails as hosts_require and require_fashion_mnist do (then
#    $fashion_mnist is the data), brings the hosts up (hosts_up) and makes $work, a fresh folder
#    /tmp/xdino_NAME.XXXXXX for the logs; on EXIT, hosts_down, and $work is removed, or kept
#    and named on stderr when the test has set $failed.
# Also brings tests/support/wait.sh (wait_for, wait_for_line, pid_of_rank): a host test waits
# on the ranks it starts in the background.
# Traffic never leaves the two namespaces: no address outside them is used.

source "$(dirname "${BASH_SOURCE[0]}")/../../support/require.sh"
source "$(dirname "${BASH_SOURCE[0]}")/../../support/wait.sh"

hosts_require() {
  require_root "network namespaces"
  require_command ip iproute2
  require_command unshare util-linux
}

hosts_down() {
  local ns
  for ns in "${HOST_A:-}" "${HOST_B:-}"; do
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
  for ns in $(ip netns list | awk '{print $1}' | grep -E '^xdt[0-9]+[ab]$' || true); do
    pid=${ns#xdt}
    pid=${pid%?}
    if ! kill -0 "$pid" 2>/dev/null; then
      ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
      ip netns del "$ns" 2>/dev/null || true
      rm -rf "/etc/netns/$ns"
    fi
  done
}

hosts_up() {
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

on_host() {
  local which=$1 ns name
  shift
  if [[ $which == A ]]; then ns=$HOST_A name=node01; else ns=$HOST_B name=node02; fi
  # Its own host name too (a UTS namespace), as the error lines name hosts by it. Both exec,
  # so the caller's $! is the command's own pid.
  ip netns exec "$ns" unshare --uts bash -c 'hostname "$0" && exec "$@"' "$name" "$@"
}

cut_link() { ip -n "$HOST_A" link set eth0 down; }
restore_link() {
  ip -n "$HOST_A" link set eth0 up
  ip -n "$HOST_A" addr replace "$ADDR_A/24" dev eth0
}

hosts_test_start() {  # NAME DINO_BINARY
  dino=$(readlink -f "$2")
  hosts_require
  require_fashion_mnist
  hosts_up
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
