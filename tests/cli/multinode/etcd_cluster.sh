# A three-member etcd cluster on the three simulated hosts of tests/cli/multinode/hosts.sh
# (hosts_up 3): one member per host, each inside its host's namespace, listening on that host's
# address only (clients on 2379, peers on 2380), its data and log under a folder of the test.
# Sourced by tests/cli/multinode/test_*.sh after hosts.sh.
#
# Contract:
#  - etcd_require: without etcd (etcd-server) or curl, skips the test or fails it under
#    XDINO_REQUIRE_ALL=1 (CI), naming what is missing (tests/support/require.sh).
#  - etcd_cluster_start DIR: starts members m1, m2, m3 on hosts A, B, C (node01..node03), a new
#    cluster whose --initial-cluster-token is unique to this call, data in DIR/etcdI, output
#    appended to DIR/etcdI.log; returns once every member answers /health (curl from inside
#    its namespace) or, after $etcd_start_timeout seconds (20), returns 1 naming the members
#    that did not. Sets $ETCD_ENDPOINTS to "node01:2379,node02:2379,node03:2379" (the form
#    `dino launch --rdzv_endpoint` takes) and $etcd_pids[A|B|C] to each member's pid.
#  - etcd_member_kill A|B|C: SIGKILLs that host's member (no clean shutdown: a host dying) and
#    returns once it has ended. A member already gone (its host killed whole) is fine.
#  - etcd_member_restart A|B|C: starts that host's member again with the same flags and data
#    folder (etcd ignores --initial-* once its WAL exists, so it rejoins as the member it was).
#  - etcd_wait_healthy SECONDS A|B|C...: returns once each given member answers /health with
#    "true" (it sees a leader), or returns 1 after SECONDS naming those that did not.
#  - etcd_put HOST KEY VALUE / etcd_get HOST KEY: one write / read through HOST's member (the
#    v3 JSON gateway, curl from inside HOST, at most $etcd_curl_timeout seconds: 3). etcd_put
#    returns 1 unless the write was committed (a revision came back); etcd_get prints the value
#    and returns 1 when there is none or the read failed.
#  - etcd_keys HOST PREFIX: the keys under PREFIX, one a line (for a failing test's message).
# hosts_down kills the members with every other process of the namespaces; the data folders go
# with the test's $work.

etcd_start_timeout=20
etcd_curl_timeout=3
declare -gA etcd_pids=()

etcd_require() {
  require_command etcd etcd-server
  require_command curl curl
}

etcd_index() {  # A|B|C: the member's number
  case $1 in A) echo 1 ;; B) echo 2 ;; C) echo 3 ;; *) echo "no etcd host '$1'" >&2; return 2 ;; esac
}

etcd_cluster_start() {  # DIR
  etcd_dir=$1
  etcd_token="xdino-$$-$(date +%s%N)"
  etcd_initial="m1=http://$ADDR_A:2380,m2=http://$ADDR_B:2380,m3=http://$ADDR_C:2380"
  ETCD_ENDPOINTS="node01:2379,node02:2379,node03:2379"
  local h
  for h in A B C; do etcd_member_restart $h; done
  etcd_wait_healthy "$etcd_start_timeout" A B C
}

# Starts (or starts again) HOST's member in the background; its pid in etcd_pids[HOST]. Not
# through on_host: a function run with & is a subshell whose $! is not the member's pid. Started
# from a subshell that ends at once, so that the member is no job of the test's shell (which
# would print a "Killed" line for each member it outlives).
etcd_member_restart() {  # A|B|C
  local i addr ns
  i=$(etcd_index "$1")
  addr=$(host_addr "$1")
  ns=$(host_namespace "$1")
  echo "--- $(date '+%H:%M:%S.%N') started by the test" >>"$etcd_dir/etcd$i.log"
  etcd_pids[$1]=$(
    ip netns exec "$ns" etcd --name "m$i" --data-dir "$etcd_dir/etcd$i" \
      --listen-client-urls "http://$addr:2379" --advertise-client-urls "http://$addr:2379" \
      --listen-peer-urls "http://$addr:2380" --initial-advertise-peer-urls "http://$addr:2380" \
      --initial-cluster "$etcd_initial" --initial-cluster-state new \
      --initial-cluster-token "$etcd_token" </dev/null >>"$etcd_dir/etcd$i.log" 2>&1 &
    echo $!
  )
}

# PID has ended: gone, or a zombie that init has not reaped yet (its sockets are closed).
etcd_ended() {  # PID
  ! kill -0 "$1" 2>/dev/null || [[ $(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null) == Z* ]]
}

etcd_member_kill() {  # A|B|C
  local pids p deadline=$((SECONDS + 10))
  pids=${etcd_pids[$1]:-}
  etcd_pids[$1]=
  # Any other member there too (one started twice would hold the data folder's lock).
  for p in $(ip netns pids "$(host_namespace "$1")" 2>/dev/null); do
    [[ $(cat "/proc/$p/comm" 2>/dev/null) == etcd ]] && pids+=" $p"
  done
  for p in $pids; do kill -9 "$p" 2>/dev/null || true; done
  for p in $pids; do
    until etcd_ended "$p"; do
      ((SECONDS < deadline)) || { echo "etcd: member pid $p outlived SIGKILL" >&2; return 1; }
      sleep 0.05
    done
  done
}

# curl from inside HOST's namespace (no host name of its own needed), bounded.
etcd_curl() {  # HOST CURL_ARGS...
  local ns
  ns=$(host_namespace "$1") || return 2
  shift
  ip netns exec "$ns" curl -s --max-time "$etcd_curl_timeout" "$@"
}

etcd_healthy() {  # A|B|C
  local out
  out=$(etcd_curl "$1" "http://$(host_addr "$1"):2379/health" 2>/dev/null) || return 1
  [[ $out == *'"health":"true"'* ]]
}

etcd_wait_healthy() {  # SECONDS A|B|C...
  local deadline=$((SECONDS + $1)) h pending
  shift
  pending=("$@")
  while :; do
    local left=()
    for h in "${pending[@]}"; do etcd_healthy "$h" || left+=("$h"); done
    ((${#left[@]} == 0)) && return 0
    if ((SECONDS >= deadline)); then
      echo "etcd: no healthy member on host ${left[*]} after $1 s (logs: $etcd_dir/etcd*.log)" >&2
      return 1
    fi
    pending=("${left[@]}")
    sleep 0.2
  done
}

etcd_b64() { printf '%s' "$1" | base64 -w0; }

etcd_put() {  # HOST KEY VALUE
  local out body
  body="{\"key\":\"$(etcd_b64 "$2")\",\"value\":\"$(etcd_b64 "$3")\"}"
  out=$(etcd_curl "$1" -X POST "http://$(host_addr "$1"):2379/v3/kv/put" -d "$body" 2>/dev/null) ||
    return 1
  [[ $out == *'"revision"'* && $out != *'"error"'* ]]
}

etcd_get() {  # HOST KEY
  local out value body
  body="{\"key\":\"$(etcd_b64 "$2")\"}"
  out=$(etcd_curl "$1" -X POST "http://$(host_addr "$1"):2379/v3/kv/range" -d "$body" 2>/dev/null) ||
    return 1
  [[ $out != *'"error"'* ]] || return 1
  value=$(sed -n 's/.*"kvs":\[{[^]]*"value":"\([^"]*\)".*/\1/p' <<<"$out")
  [[ -n $value ]] || return 1
  base64 -d <<<"$value"
  echo
}

etcd_keys() {  # HOST PREFIX
  local last end out k body
  # The range [PREFIX, PREFIX with its last byte + 1): every key that starts with PREFIX.
  last=$(printf '%d' "'${2: -1}")
  end="${2%?}$(printf "\\$(printf '%03o' $((last + 1)))")"
  body="{\"key\":\"$(etcd_b64 "$2")\",\"range_end\":\"$(etcd_b64 "$end")\",\"keys_only\":true}"
  out=$(etcd_curl "$1" -X POST "http://$(host_addr "$1"):2379/v3/kv/range" -d "$body" 2>/dev/null) ||
    return 1
  for k in $(grep -o '"key":"[^"]*"' <<<"$out" | sed 's/"key":"\(.*\)"/\1/'); do
    base64 -d <<<"$k"
    echo
  done
}
