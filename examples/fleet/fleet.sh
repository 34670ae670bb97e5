#!/usr/bin/env bash
# A ragd fleet on loopback: Redis (the shared KV tier), a primary ragd that owns the corpus, N
# replica ragds on the same corpus and HAProxy in front of the replicas. Every process runs in the
# background with its log and PID file under the run directory and is stopped by that PID.
#
#   examples/fleet/fleet.sh start [options]   start everything, print the URLs (also in RUN/fleet.env)
#   examples/fleet/fleet.sh status [--dir RUN]
#   examples/fleet/fleet.sh stop [--dir RUN]
#   examples/fleet/fleet.sh redis-kill [--dir RUN]    kill -9 the fleet's Redis (a failure drill)
#   examples/fleet/fleet.sh redis-start [--dir RUN]   start it again, empty, on the same port
#   examples/fleet/fleet.sh replicas-restart [--dir RUN]  restart the replicas with empty local KV
#                                                         tiers (Redis keeps its contents)
#
# Options of start (each also as the environment variable in brackets):
#   --dir RUN            run directory [FLEET_DIR, default /tmp/ragd-fleet]
#   --bin DIR            ragd / ragctl binaries [FLEET_BIN, default build/bin]
#   --model DIR          model directory [FLEET_MODEL, default: a `small` random-weight model in RUN/model]
#   --replicas N         replica ragds [FLEET_REPLICAS, default 2]
#   --corpus C           synthetic:T (T topics x 4 documents, what `ragctl bench --topics T` asks about),
#                        sample (examples/qa_eval/corpus.jsonl) or a path for `ragctl ingest`
#                        [FLEET_CORPUS, default synthetic:100]; ingested once per run directory
#   --replica-mode M     secondary: replicas open the primary's data dir as RocksDB secondaries;
#                        snapshot: each replica serves its own `ragctl snapshot` of it, as a replica on
#                        another host would [FLEET_REPLICA_MODE, default secondary]
#   --no-remote          replicas without the shared tier ([kvstore.remote] url = "") [FLEET_REMOTE=0]
#   --no-mac             Redis values without the fleet MAC (kvstore.remote.trust_unauthenticated, for
#                        measuring the MAC's cost) [FLEET_MAC=0]; default: sealed with RUN/secrets/fleet.key
#   --redis-maxmemory M  Redis maxmemory [FLEET_REDIS_MAXMEMORY, default 2gb]
#   --redis-policy P     Redis maxmemory-policy [FLEET_REDIS_POLICY, default allkeys-lru]
#   --threads N          compute threads per replica [FLEET_THREADS, default cores / replicas, at least 1]
#   --balance B          HAProxy balance: leastconn | roundrobin [FLEET_BALANCE, default leastconn]
#   --set KEY=VALUE      passed to every ragd as --set (repeatable) [FLEET_SET, space-separated]
#
# Replicas start with empty local KV tiers (their directories are recreated); Redis starts empty
# (no persistence) and requires the password in RUN/secrets/redis.pass (redis-cli: export
# REDISCLI_AUTH="$(cat RUN/secrets/redis.pass)"). The primary's corpus stays in RUN/primary between starts.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

CMD=${1:-}
[[ $# -gt 0 ]] && shift
RUN=${FLEET_DIR:-/tmp/ragd-fleet}
BIN=${FLEET_BIN:-$ROOT/build/bin}
MODEL=${FLEET_MODEL:-}
REPLICAS=${FLEET_REPLICAS:-2}
CORPUS=${FLEET_CORPUS:-synthetic:100}
REPLICA_MODE=${FLEET_REPLICA_MODE:-secondary}
REMOTE=${FLEET_REMOTE:-1}
MAC=${FLEET_MAC:-1}
REDIS_MAXMEMORY=${FLEET_REDIS_MAXMEMORY:-2gb}
REDIS_POLICY=${FLEET_REDIS_POLICY:-allkeys-lru}
THREADS=${FLEET_THREADS:-}
BALANCE=${FLEET_BALANCE:-leastconn}
read -r -a SETS <<< "${FLEET_SET:-}"

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit "${1:-2}"; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --dir) RUN=$2; shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --replicas) REPLICAS=$2; shift 2 ;;
    --corpus) CORPUS=$2; shift 2 ;;
    --replica-mode) REPLICA_MODE=$2; shift 2 ;;
    --no-remote) REMOTE=0; shift ;;
    --no-mac) MAC=0; shift ;;
    --redis-maxmemory) REDIS_MAXMEMORY=$2; shift 2 ;;
    --redis-policy) REDIS_POLICY=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --balance) BALANCE=$2; shift 2 ;;
    --set) SETS+=("$2"); shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "fleet.sh: unknown option '$1'" >&2; usage ;;
  esac
done
mkdir -p "$RUN"
RUN=$(cd "$RUN" && pwd)
PIDS=$RUN/pids
LOGS=$RUN/logs
# The fleet's secrets, made once per run directory (readable by this user only): the fleet secret
# every replica seals and checks Redis values with (kvstore.remote.secret_file), and Redis's
# password (requirepass; kvstore.remote.password_file; redis-cli reads REDISCLI_AUTH).
SECRETS=$RUN/secrets
if [[ ! -s $SECRETS/fleet.key || ! -s $SECRETS/redis.pass ]]; then
  (umask 077; mkdir -p "$SECRETS"
   head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$SECRETS/fleet.key"
   head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$SECRETS/redis.pass")
fi
REDISCLI_AUTH=$(cat "$SECRETS/redis.pass")
export REDISCLI_AUTH

log() { printf 'fleet: %s\n' "$*"; }
die() { printf 'fleet: %s\n' "$*" >&2; exit 1; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# The PID in pids/NAME.pid when that process is alive and still runs the binary it was started as
# (a recycled PID is not ours to signal).
live_pid() {
  local f=$PIDS/$1.pid pid exe
  [[ -f $f ]] || return 1
  read -r pid exe < "$f"
  [[ -n $pid ]] && kill -0 "$pid" 2> /dev/null || return 1
  # A binary rebuilt while it runs reads as "PATH (deleted)".
  local now
  now=$(readlink "/proc/$pid/exe" 2> /dev/null) || return 1
  [[ $now == "$exe" || $now == "$exe (deleted)" ]] || return 1
  echo "$pid"
}

# spawn NAME CMD...: runs CMD in the background, output in logs/NAME.log, PID in pids/NAME.pid.
spawn() {
  local name=$1; shift
  nohup "$@" > "$LOGS/$name.log" 2>&1 < /dev/null &
  local pid=$!
  local exe
  exe=$(readlink -f "$(command -v "$1")")
  echo "$pid $exe" > "$PIDS/$name.pid"
  # nohup execs the command in place: same PID, once the exec happened.
  for _ in $(seq 1 50); do
    [[ "$(readlink "/proc/$pid/exe" 2> /dev/null)" == "$exe"* ]] && return 0
    kill -0 "$pid" 2> /dev/null || return 0
    sleep 0.02
  done
}

wait_ready() {  # NAME URL: until URL/readyz answers 200, or the process dies (then its log)
  local name=$1 url=$2
  for _ in $(seq 1 600); do
    curl -fs "$url/readyz" > /dev/null 2>&1 && return 0
    live_pid "$name" > /dev/null || { tail -n 30 "$LOGS/$name.log" >&2; die "$name exited while starting (log: $LOGS/$name.log)"; }
    sleep 0.2
  done
  die "$name not ready after 120 s (log: $LOGS/$name.log)"
}

stop_one() {  # NAME: TERM, up to 20 s to exit, then KILL
  local name=$1 pid
  if pid=$(live_pid "$name"); then
    kill -TERM "$pid" 2> /dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2> /dev/null || break; sleep 0.2; done
    if kill -0 "$pid" 2> /dev/null; then
      log "$name (pid $pid) did not exit after TERM; KILL"
      kill -KILL "$pid" 2> /dev/null || true
    fi
    log "stopped $name (pid $pid)"
  fi
  rm -f "$PIDS/$name.pid"
}

start_redis() {  # PORT
  # The shipped redis.conf plus the password, in a file only this user reads (not on the command line).
  (umask 077; printf 'include %s\nrequirepass %s\n' "$HERE/redis.conf" "$REDISCLI_AUTH" > "$SECRETS/redis.conf")
  spawn redis redis-server "$SECRETS/redis.conf" --port "$1" --dir "$RUN" \
    --maxmemory "$REDIS_MAXMEMORY" --maxmemory-policy "$REDIS_POLICY" --save "" --appendonly no
  for _ in $(seq 1 100); do redis-cli -p "$1" ping > /dev/null 2>&1 && break; sleep 0.1; done
  redis-cli -p "$1" ping > /dev/null || die "redis did not start (log: $LOGS/redis.log)"
}

cmd_redis_kill() {
  local pid
  pid=$(live_pid redis) || die "no running redis recorded in $RUN"
  kill -KILL "$pid"
  while kill -0 "$pid" 2> /dev/null; do sleep 0.05; done
  rm -f "$PIDS/redis.pid"
  log "killed redis (pid $pid, SIGKILL)"
}

cmd_redis_start() {
  [[ -f $RUN/fleet.env ]] || die "no fleet in $RUN"
  # shellcheck disable=SC1091
  source "$RUN/fleet.env"
  live_pid redis > /dev/null && die "redis is running"
  mv -f "$LOGS/redis.log" "$LOGS/redis.log.$(date +%s)" 2> /dev/null || true
  start_redis "$REDIS_PORT"
  log "redis started again on 127.0.0.1:$REDIS_PORT (pid $(live_pid redis), empty)"
}

# Every replica stopped and started again with the same options and an empty SSD KV tier: cold
# local caches behind a warm Redis, as a replica that joins or restarts sees it.
cmd_replicas_restart() {
  [[ -f $RUN/fleet.env ]] || die "no fleet in $RUN"
  # shellcheck disable=SC1091
  source "$RUN/fleet.env"
  local i argv var
  for i in $(seq 1 "$REPLICAS"); do
    stop_one "replica-$i"
    mapfile -d '' argv < "$PIDS/replica-$i.argv"
    rm -rf "$RUN/replica-$i/kvcache"
    spawn "replica-$i" "${argv[@]}"
  done
  for i in $(seq 1 "$REPLICAS"); do var=URL_replica_$i; wait_ready "replica-$i" "${!var}"; done
  # Back in HAProxy once their health checks pass again.
  for _ in $(seq 1 100); do
    [[ $(curl -fs "$STATS_URL;csv" 2> /dev/null | awk -F, '$1 == "ragd_replicas" && $2 != "BACKEND" && $18 == "UP"' | wc -l) -eq $REPLICAS ]] && break
    sleep 0.2
  done
  log "restarted $REPLICAS replicas (empty local KV tiers)"
}

cmd_stop() {
  [[ -d $PIDS ]] || { log "nothing recorded in $RUN"; return 0; }
  # Front to back: no new requests, then the replicas, the primary, Redis.
  local names=(haproxy)
  local f
  for f in "$PIDS"/replica-*.pid; do [[ -e $f ]] && names+=("$(basename "$f" .pid)"); done
  names+=(primary redis)
  for n in "${names[@]}"; do stop_one "$n"; done
}

cmd_status() {
  [[ -f $RUN/fleet.env ]] || { log "no fleet in $RUN"; return 1; }
  # shellcheck disable=SC1091
  source "$RUN/fleet.env"
  local down=0 f name pid state
  for f in "$PIDS"/*.pid; do
    [[ -e $f ]] || continue
    name=$(basename "$f" .pid)
    if pid=$(live_pid "$name"); then state="running (pid $pid)"; else state="NOT RUNNING"; down=1; fi
    case $name in
      redis) state+=", $(redis-cli -p "$REDIS_PORT" ping 2> /dev/null || echo 'no answer'), $(redis-cli -p "$REDIS_PORT" info memory 2> /dev/null | sed -n 's/^used_memory_human:\(.*\)\r$/used \1/p')" ;;
      haproxy) state+=", $FLEET_URL" ;;
      *) local var=URL_${name//-/_}
         state+=", ${!var} readyz: $(curl -s -o /dev/null -w '%{http_code}' "${!var}/readyz" || true)" ;;
    esac
    printf '  %-10s %s\n' "$name" "$state"
  done
  if live_pid haproxy > /dev/null; then
    echo "  requests per replica (HAProxy stats):"
    curl -fs "$STATS_URL;csv" | awk -F, '$1 == "ragd_replicas" && $2 != "BACKEND" { printf "    %-10s %s %s requests\n", $2, $18, $8 }'
  fi
  return $down
}

cmd_start() {
  [[ $REPLICAS =~ ^[1-9][0-9]*$ ]] || die "--replicas must be a positive integer, got '$REPLICAS'"
  [[ $REPLICA_MODE == secondary || $REPLICA_MODE == snapshot ]] || die "--replica-mode must be secondary or snapshot"
  [[ -x $BIN/ragd && -x $BIN/ragctl ]] || die "no ragd / ragctl in $BIN (cmake --build build --target ragd ragctl)"
  local dep
  for dep in redis-server redis-cli haproxy curl python3; do command -v "$dep" > /dev/null || die "$dep not found (scripts/install-deps.sh)"; done
  if [[ -d $PIDS ]]; then
    local f
    for f in "$PIDS"/*.pid; do
      [[ -e $f ]] && live_pid "$(basename "$f" .pid)" > /dev/null && die "a fleet is running in $RUN (fleet.sh stop --dir $RUN first)"
    done
  fi
  rm -rf "$PIDS" "$LOGS"
  mkdir -p "$PIDS" "$LOGS"
  [[ -n $THREADS ]] || THREADS=$(( $(nproc) / REPLICAS > 0 ? $(nproc) / REPLICAS : 1 ))

  if [[ -z $MODEL ]]; then
    MODEL=$RUN/model
    [[ -f $MODEL/config.json ]] || "$BIN/ragctl" make-model --preset small --seed 1 --out "$MODEL" > "$LOGS/make-model.log" 2>&1
  fi
  [[ -f $MODEL/config.json ]] || die "no model in $MODEL"

  local redis_port primary_port lb_port stats_port
  redis_port=$(free_port); primary_port=$(free_port); lb_port=$(free_port); stats_port=$(free_port)
  local redis_url="redis://127.0.0.1:$redis_port"
  local remote_url=$redis_url
  [[ $REMOTE == 1 ]] || remote_url=""

  log "redis on 127.0.0.1:$redis_port (maxmemory $REDIS_MAXMEMORY, $REDIS_POLICY, no persistence)"
  start_redis "$redis_port"

  local set_args=(--set "kvstore.remote.password_file=$SECRETS/redis.pass") s
  if [[ $MAC == 1 ]]; then
    set_args+=(--set "kvstore.remote.secret_file=$SECRETS/fleet.key")
  else
    set_args+=(--set "kvstore.remote.trust_unauthenticated=true")
  fi
  for s in "${SETS[@]}"; do [[ -n $s ]] && set_args+=(--set "$s"); done

  log "primary on 127.0.0.1:$primary_port (data $RUN/primary)"
  spawn primary "$BIN/ragd" --config "$HERE/primary.toml" --model "$MODEL" --data "$RUN/primary" \
    --listen "127.0.0.1:$primary_port" --set "kvstore.remote.url=$remote_url" "${set_args[@]}"
  wait_ready primary "http://127.0.0.1:$primary_port"

  local stamp=$RUN/primary/.fleet-ingested
  if [[ "$(cat "$stamp" 2> /dev/null)" != "$CORPUS" ]]; then
    log "ingesting $CORPUS through the primary"
    case $CORPUS in
      synthetic:*) "$BIN/ragctl" bench --url "http://127.0.0.1:$primary_port" --ingest-synthetic \
                     --topics "${CORPUS#synthetic:}" --requests 0 > "$LOGS/ingest.log" 2>&1 ;;
      sample) "$BIN/ragctl" ingest "$ROOT/examples/qa_eval/corpus.jsonl" --url "http://127.0.0.1:$primary_port" \
                --model "$MODEL" --quiet > "$LOGS/ingest.log" 2>&1 ;;
      *) "$BIN/ragctl" ingest "$CORPUS" --url "http://127.0.0.1:$primary_port" --model "$MODEL" --quiet > "$LOGS/ingest.log" 2>&1 ;;
    esac || { cat "$LOGS/ingest.log" >&2; die "ingest failed"; }
    echo "$CORPUS" > "$stamp"
  fi

  local servers="" i port dir replica_of urls=()
  for i in $(seq 1 "$REPLICAS"); do
    port=$(free_port)
    dir=$RUN/replica-$i
    rm -rf "$dir"
    replica_of=$RUN/primary
    if [[ $REPLICA_MODE == snapshot ]]; then
      "$BIN/ragctl" snapshot --data "$RUN/primary" --out "$dir" > "$LOGS/snapshot-$i.log"
      replica_of=""
    else
      mkdir -p "$dir"
    fi
    log "replica-$i on 127.0.0.1:$port ($REPLICA_MODE, $THREADS threads, remote ${remote_url:-off})"
    local argv=("$BIN/ragd" --config "$HERE/replica.toml" --model "$MODEL" --data "$dir"
      --listen "127.0.0.1:$port" --set "runtime.data_replica_of=$replica_of" --set "runtime.num_threads=$THREADS"
      --set "kvstore.remote.url=$remote_url" "${set_args[@]}")
    printf '%s\0' "${argv[@]}" > "$PIDS/replica-$i.argv"  # for replicas-restart
    spawn "replica-$i" "${argv[@]}"
    servers+="    server replica-$i 127.0.0.1:$port check"$'\n'
    urls+=("http://127.0.0.1:$port")
  done
  for i in $(seq 1 "$REPLICAS"); do wait_ready "replica-$i" "${urls[$((i - 1))]}"; done

  sed -e "s/@LISTEN@/$lb_port/; s/@STATS@/$stats_port/; s/@PRIMARY@/127.0.0.1:$primary_port/" \
      -e "s/^\( *balance\) .*/\1 $BALANCE/" "$HERE/haproxy.cfg" |
    awk -v servers="$servers" '/^ *@SERVERS@ *$/ { printf "%s", servers; next } { print }' > "$RUN/haproxy.cfg"
  haproxy -c -q -f "$RUN/haproxy.cfg" || die "haproxy rejected $RUN/haproxy.cfg"
  log "haproxy on 127.0.0.1:$lb_port ($BALANCE over $REPLICAS replicas, stats http://127.0.0.1:$stats_port/stats)"
  spawn haproxy haproxy -f "$RUN/haproxy.cfg" -db
  # Up once every replica passed its health check (rise 2 at 1 s intervals).
  for _ in $(seq 1 100); do
    local up
    up=$(curl -fs "http://127.0.0.1:$stats_port/stats;csv" 2> /dev/null | awk -F, '$1 == "ragd_replicas" && $2 != "BACKEND" && $18 == "UP"' | wc -l || true)
    [[ $up -eq $REPLICAS ]] && break
    live_pid haproxy > /dev/null || { cat "$LOGS/haproxy.log" >&2; die "haproxy exited"; }
    sleep 0.2
  done

  {
    echo "FLEET_URL=http://127.0.0.1:$lb_port"
    echo "STATS_URL=http://127.0.0.1:$stats_port/stats"
    echo "PRIMARY_URL=http://127.0.0.1:$primary_port"
    echo "URL_primary=http://127.0.0.1:$primary_port"
    echo "REDIS_PORT=$redis_port"
    echo "REDIS_MAXMEMORY=$REDIS_MAXMEMORY"
    echo "REDIS_POLICY=$REDIS_POLICY"
    echo "REDIS_URL=$redis_url"
    echo "REDIS_PASSWORD_FILE=$SECRETS/redis.pass"
    echo "FLEET_SECRET_FILE=$SECRETS/fleet.key"
    echo "MAC=$MAC"
    echo "REMOTE_URL=$remote_url"
    echo "MODEL=$MODEL"
    echo "REPLICAS=$REPLICAS"
    for i in $(seq 1 "$REPLICAS"); do echo "URL_replica_$i=${urls[$((i - 1))]}"; done
    echo "REPLICA_URLS=\"${urls[*]}\""
  } > "$RUN/fleet.env"
  log "up: $REPLICAS replicas behind http://127.0.0.1:$lb_port (settings in $RUN/fleet.env, logs in $LOGS)"
}

case $CMD in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  redis-kill) cmd_redis_kill ;;
  redis-start) cmd_redis_start ;;
  replicas-restart) cmd_replicas_restart ;;
  -h|--help|help) usage 0 ;;
  *) usage ;;
esac
