# Waiting for a background process with a bound, for the shell tests. Sourced by
# tests/*/test_*.sh.

# Sets $code: PID's exit status, or 124 (after killing it) when it runs past SECONDS. Not for
# $(...): a subshell cannot wait for this shell's children.
wait_for() {  # PID SECONDS
  local pid=$1 deadline=$((SECONDS + $2))
  while kill -0 "$pid" 2>/dev/null; do
    ((SECONDS < deadline)) || { kill -9 "$pid" 2>/dev/null; code=124; return; }
    sleep 0.2
  done
  code=0
  wait "$pid" || code=$?
}

# Waits up to SECONDS for a line matching the grep pattern PATTERN in FILE while PID runs;
# returns 1 when the time passes or PID ends first.
wait_for_line() {  # PATTERN FILE PID SECONDS
  local deadline=$((SECONDS + $4))
  until grep -q "$1" "$2" 2>/dev/null; do
    ((SECONDS < deadline)) && kill -0 "$3" 2>/dev/null || return 1
    sleep 0.1
  done
}

# The pid of the process with RANK=RANK in its environment among PIDS, or nothing.
pid_of_rank() {  # RANK PIDS...
  local rank=$1 pid
  shift
  for pid in "$@"; do
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "RANK=$rank" && echo "$pid"
  done
  return 0
}
