# Shared by the long-context scripts (sourced).
# long_model BUILD_DIR MODEL_DIR: the `tiny` preset (LC_PRESET=small for the `small` one) with
# max_position_embeddings raised to 1.1 M, made once.
long_model() {
  local build=$1 model=$2
  [ -f "$model/config.json" ] && return 0
  "$build/bin/ragctl" make-model --preset "${LC_PRESET:-tiny}" --out "$model" >/dev/null
  python3 - "$model/config.json" <<'PY'
import json, sys
p = sys.argv[1]; c = json.load(open(p)); c["max_position_embeddings"] = 1100000
json.dump(c, open(p, "w"), indent=1)
PY
}
# ready_port LOG: waits for a daemon's "listening on" line and /readyz; prints its port ("" if not).
ready_port() {
  local log=$1 port=""
  for _ in $(seq 1 600); do
    port=$(grep -o 'listening on http://[0-9.]*:[0-9]*' "$log" | head -1 | sed 's/.*://') || true
    [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
    sleep 0.2
  done
  echo "$port"
}
