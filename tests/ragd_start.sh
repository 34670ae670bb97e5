# Sourced (bash) by the test scripts that drive a real server over HTTP (tests/clients/run.sh,
# tests/console/run.sh, tests/daemon/node/run.sh): start it in the background on the loopback port
# it picks, wait for its address and, where asked, for /readyz; stop it by its PID.
#
#   ragd_start DIR WHAT SECONDS CMD...  runs CMD with stdout in DIR/out.log and stderr in DIR/err.log,
#                                       waits up to SECONDS for its "ragd listening on http://..." line
#                                       and sets ragd_addr (http://HOST:PORT) and ragd_pid. WHAT names
#                                       the server in messages ("ragd", "server").
#   ragd_wait_ready SECONDS             polls $ragd_addr/readyz until it answers 200; returns 1 when
#                                       it never does.
#   ragd_stop                           SIGTERM and wait; nothing when no server runs. Call it from the
#                                       caller's EXIT trap.
# A server that exits while it is waited for, or prints no address in time: its stderr is printed and
# the calling script exits 1.

ragd_pid=""
ragd_addr=""
ragd_what="ragd"
ragd_err_log=""

ragd_start() {
  local dir="$1" seconds="$3"
  ragd_what="$2"
  ragd_err_log="$dir/err.log"
  shift 3
  "$@" >"$dir/out.log" 2>"$ragd_err_log" &
  ragd_pid=$!
  ragd_addr=""
  for _ in $(seq 1 $((seconds * 10))); do
    ragd_addr="$(sed -n 's/^ragd listening on \(http:\/\/.*\)$/\1/p' "$dir/out.log" 2>/dev/null | head -1 || true)"
    [ -n "$ragd_addr" ] && return 0
    ragd_exited_check
    sleep 0.1
  done
  echo "$ragd_what did not print its address"; cat "$ragd_err_log"; exit 1
}

ragd_wait_ready() {
  for _ in $(seq 1 $(($1 * 10))); do
    curl -fsS "$ragd_addr/readyz" >/dev/null 2>&1 && return 0
    ragd_exited_check
    sleep 0.1
  done
  return 1
}

ragd_exited_check() {
  if ! kill -0 "$ragd_pid" 2>/dev/null; then echo "$ragd_what exited:"; cat "$ragd_err_log"; exit 1; fi
}

ragd_stop() {
  if [ -n "$ragd_pid" ]; then
    kill -TERM "$ragd_pid" 2>/dev/null
    wait "$ragd_pid" 2>/dev/null
    ragd_pid=""
  fi
}
