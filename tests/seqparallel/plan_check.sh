#!/usr/bin/env bash
# ragctl plan: the plan for a 65,537-token prompt on 1, 2 and 4 workers is consistent (KV bytes per
# worker = tokens / W x layers x K+V bytes, FLOPs independent of W, predicted prefill and decode
# falling with W), and bad arguments are refused naming the problem. With --rates (kernel rates
# measured elsewhere, here the committed H200 file) the predictions are recomputed naively from the
# rates and the model's shape, and malformed rates files are refused naming the field.
#   plan_check.sh RAGCTL
set -euo pipefail
RAGCTL=$1
RATES=$(cd "$(dirname "$0")/../.." && pwd)/bench/rates/h200-llama3-8b.json
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
    # A ratio of two kernel rates measured at run time (masked against causal attention): positive
    # and finite; its value follows the machine's load, so it is not checked against a band.
    assert 0 < x["compute_efficiency"] < float("inf"), x
assert p[1]["prefill_flops"] == p[2]["prefill_flops"] == p[4]["prefill_flops"]
assert p[1]["prefill_s"] > p[2]["prefill_s"] > p[4]["prefill_s"] > 0, p
assert p[1]["decode_s"] > p[2]["decode_s"] > p[4]["decode_s"] > 0, p
r = d["rates"]
assert all(r[k] > 0 for k in ("dense_tokens_per_s", "attn_pairs_per_s", "kv_read_bytes_per_s", "link_bytes_per_s")), r
print("plan ok:", {w: round(x["prefill_s"], 2) for w, x in p.items()})
PY
# Rates from a file, a preset's shape (llama3-8b: 32 layers, 8 KV heads x 128; bf16 KV).
"$RAGCTL" plan --preset llama3-8b --rates "$RATES" --kv-dtype bf16 --tokens 1048577 --workers 1,2,8 --json \
  > "$dir/rates_plan.json"
python3 - "$dir/rates_plan.json" "$RATES" <<'PY'
import json, math, sys
d = json.load(open(sys.argv[1]))
want = json.load(open(sys.argv[2]))
r = d["rates"]
for k, v in want.items():
    assert r[k] == v, (k, r[k], v)  # the file's rates, unchanged
n = 1048577
per_token = 32 * 2 * 8 * 128 * 2  # layers x (K+V) x kv_dim x bf16
pairs = n * (n + 1) / 2
p = {x["workers"]: x for x in d["plans"]}
for w, x in p.items():
    kv = n / w * per_token
    assert abs(x["kv_bytes_per_worker"] - kv) <= 1 + 1e-9 * kv, (w, x["kv_bytes_per_worker"], kv)
    rate = r["attn_pairs_per_s"] if w == 1 else r["masked_pairs_per_s"]
    compute = n / w / r["dense_tokens_per_s"] + pairs / w / rate
    assert abs(x["prefill_s"] - x["prefill_exposed_comm_s"] - compute) <= 1e-5 * compute, (w, x, compute)  # printed with 6 significant digits
    decode = r["decode_dense_s"] + kv / r["kv_read_bytes_per_s"]
    if w > 1:
        decode += 32 * math.ceil(math.log2(w)) * r["link_latency_s"]
    assert abs(x["decode_s"] - decode) <= 1e-5 * decode, (w, x["decode_s"], decode)
print("rates plan ok:", {w: round(x["prefill_s"], 1) for w, x in p.items()})
PY
python3 - "$RATES" "$dir" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
missing = dict(r); del missing["kv_read_bytes_per_s"]
unknown = dict(r); unknown["kv_read_bytes_per_sec"] = 1.0
zero = dict(r); zero["dense_tokens_per_s"] = 0
fresh = dict(r); fresh["fresh_bytes_per_s"] = 2.5e9
fresh_zero = dict(r); fresh_zero["fresh_bytes_per_s"] = 0
for name, v in (("missing", missing), ("unknown", unknown), ("zero", zero), ("fresh", fresh), ("fresh_zero", fresh_zero)):
    json.dump(v, open(f"{sys.argv[2]}/{name}.json", "w"))
open(f"{sys.argv[2]}/array.json", "w").write("[1, 2]")
open(f"{sys.argv[2]}/broken.json", "w").write('{"dense_tokens_per_s": ')
PY
expect_fail() {  # expect_fail NEEDLE CMD...
  local needle=$1; shift
  if out=$("$@" 2>&1); then echo "FAIL: '$*' succeeded"; exit 1; fi
  grep -q -- "$needle" <<< "$out" || { echo "FAIL: '$*' did not name '$needle': $out"; exit 1; }
}
expect_fail "not a positive worker count" "$RAGCTL" plan --model "$dir/model" --tokens 10 --workers 2,0
expect_fail "must be in \[1, 2^31 - 1\]" "$RAGCTL" plan --model "$dir/model" --tokens 0
expect_fail "config.json" "$RAGCTL" plan --model "$dir/nowhere" --tokens 10
plan_rates() { "$RAGCTL" plan --preset llama3-8b --tokens 1000 --rates "$@"; }
expect_fail "missing 'kv_read_bytes_per_s'" plan_rates "$dir/missing.json"
expect_fail "unknown field 'kv_read_bytes_per_sec'" plan_rates "$dir/unknown.json"
expect_fail "'dense_tokens_per_s' must be a positive number" plan_rates "$dir/zero.json"
expect_fail "'fresh_bytes_per_s' must be a positive number" plan_rates "$dir/fresh_zero.json"
# The optional first-touch rate is read and kept.
"$RAGCTL" plan --preset llama3-8b --tokens 1000 --rates "$dir/fresh.json" --json > "$dir/fresh_plan.json"
python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['rates']; assert r['fresh_bytes_per_s'] == 2.5e9, r" "$dir/fresh_plan.json"
expect_fail "expected a JSON object" plan_rates "$dir/array.json"
expect_fail "not JSON" plan_rates "$dir/broken.json"
expect_fail "cannot read" plan_rates "$dir/nowhere.json"
expect_fail "--preset needs --rates" "$RAGCTL" plan --preset llama3-8b --tokens 1000
expect_fail "give one of --model DIR and --preset NAME" "$RAGCTL" plan --model "$dir/model" --preset tiny --tokens 10 --rates "$RATES"
expect_fail "unknown preset" "$RAGCTL" plan --preset llama9 --tokens 10 --rates "$RATES"
echo PASS
