#!/usr/bin/env bash
# ragctl plan: the plan for a 65,537-token prompt on 1, 2 and 4 workers is consistent (KV bytes per
# worker = tokens / W x layers x K+V bytes, FLOPs independent of W, predicted prefill and decode
# falling with W), and bad arguments are refused naming the problem.
#   plan_check.sh RAGCTL
set -euo pipefail
RAGCTL=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$RAGCTL" make-model --preset tiny --out "$dir/model" > /dev/null 2>&1
OMP_NUM_THREADS=1 "$RAGCTL" plan --model "$dir/model" --tokens 65537 --workers 1,2,4 --json 2> /dev/null > "$dir/plan.json"
python3 - "$dir/plan.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
p = {x["workers"]: x for x in d["plans"]}
assert sorted(p) == [1, 2, 4], p
per_token = 2 * 2 * (2 * 16) * 4  # layers x (K+V) x kv_dim x f32
for w, x in p.items():
    want = 65537 / w * per_token
    assert abs(x["kv_bytes_per_worker"] - want) <= 1 + 1e-9 * want, (w, x["kv_bytes_per_worker"], want)
    assert 0.5 < x["compute_efficiency"] < 1.5, x  # the masked kernel may run a little faster than the causal one
assert p[1]["prefill_flops"] == p[2]["prefill_flops"] == p[4]["prefill_flops"]
assert p[1]["prefill_s"] > p[2]["prefill_s"] > p[4]["prefill_s"] > 0, p
assert p[1]["decode_s"] > p[2]["decode_s"] > p[4]["decode_s"] > 0, p
r = d["rates"]
assert all(r[k] > 0 for k in ("dense_tokens_per_s", "attn_pairs_per_s", "kv_read_bytes_per_s", "link_bytes_per_s")), r
print("plan ok:", {w: round(x["prefill_s"], 2) for w, x in p.items()})
PY
expect_fail() {  # expect_fail NEEDLE CMD...
  local needle=$1; shift
  if out=$("$@" 2>&1); then echo "FAIL: '$*' succeeded"; exit 1; fi
  grep -q -- "$needle" <<< "$out" || { echo "FAIL: '$*' did not name '$needle': $out"; exit 1; }
}
expect_fail "not a positive worker count" "$RAGCTL" plan --model "$dir/model" --tokens 10 --workers 2,0
expect_fail "must be in \[1, 2^31 - 1\]" "$RAGCTL" plan --model "$dir/model" --tokens 0
expect_fail "config.json" "$RAGCTL" plan --model "$dir/nowhere" --tokens 10
echo PASS
