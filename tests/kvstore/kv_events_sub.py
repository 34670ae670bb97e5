#!/usr/bin/python3
"""A KV-event subscriber written against vLLM 0.10's definitions (vllm/distributed/kv_events.py):

  message  = (topic, seq: 8 bytes big-endian, payload)
  payload  = msgpack EventBatch, array_like: [ts: float, events: list, data_parallel_rank]
  event    = [tag, fields...] with tag the class name:
             ["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium]
             ["BlockRemoved", block_hashes, medium]
             ["AllBlocksCleared"]
  replay   = DEALER/REQ -> ROUTER: (b"", start_seq 8 bytes BE); answers (b"", seq, payload) per
             buffered batch with seq >= start_seq, then (b"", -1 as 8 bytes BE signed, b"").

Usage:
  kv_events_sub.py live   SUB_ENDPOINT EXPECT_JSON   prints "ready", then checks the live stream
  kv_events_sub.py replay REPLAY_ENDPOINT EXPECT_JSON  asks for every batch from seq 0, checks them
  kv_events_sub.py decode FILE                        prints the msgpack object in FILE as JSON

EXPECT_JSON: {"block_size": 16, "path_tokens": [...], "removed_after_eviction": true,
              "extra_root_tokens": [...],
              "curve_server_key": Z85, "curve_public_key": Z85, "curve_secret_key": Z85 (optional: CURVE),
              "token_ids": false (optional: BlockStored carries no token ids; chains are checked by hash),
              "expect_nothing": true (optional: an unauthorized subscriber; passes when nothing arrives)}
Exit status 0 when every check passes; the reason is printed otherwise.
"""
import json
import sys
import time

import msgpack
import zmq

MEDIUMS = {"GPU", "CPU", "DISK", None}
EXPECT = {}  # the expectation of the running check (set by main)


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def decode_batch(payload):
    batch = msgpack.unpackb(payload, raw=False)
    if not isinstance(batch, list) or len(batch) not in (2, 3):
        fail("EventBatch is not an array of 2 or 3: %r" % (batch,))
    ts, events = batch[0], batch[1]
    if not isinstance(ts, float):
        fail("ts is not a float: %r" % (ts,))
    if abs(ts - time.time()) > 600:
        fail("ts is not unix seconds: %r" % (ts,))
    if len(batch) == 3 and not (batch[2] is None or isinstance(batch[2], int)):
        fail("data_parallel_rank is not an int: %r" % (batch[2],))
    out = []
    for e in events:
        if not isinstance(e, list) or not e or not isinstance(e[0], str):
            fail("event is not a tagged array: %r" % (e,))
        tag = e[0]
        if tag == "BlockStored":
            if len(e) != 7:
                fail("BlockStored has %d fields" % len(e))
            _, hashes, parent, tokens, block_size, lora_id, medium = e
            if not all(isinstance(h, int) and 0 <= h < 2**64 for h in hashes):
                fail("block_hashes are not uint64: %r" % (hashes,))
            if parent is not None and not isinstance(parent, int):
                fail("parent_block_hash: %r" % (parent,))
            if not all(isinstance(t, int) for t in tokens):
                fail("token_ids are not ints")
            if len(tokens) != len(hashes) * block_size and not (tokens == [] and EXPECT.get("token_ids") is False):
                fail("token_ids (%d) != blocks (%d) * block_size (%d)" % (len(tokens), len(hashes), block_size))
            if tokens and EXPECT.get("token_ids") is False:
                fail("token ids published where they were to be left out")
            if lora_id is not None:
                fail("lora_id is not nil")
            if medium not in MEDIUMS:
                fail("medium %r" % (medium,))
            out.append({"tag": tag, "hashes": hashes, "parent": parent, "tokens": tokens, "block_size": block_size,
                        "medium": medium})
        elif tag == "BlockRemoved":
            if len(e) != 3:
                fail("BlockRemoved has %d fields" % len(e))
            if e[2] not in MEDIUMS:
                fail("medium %r" % (e[2],))
            out.append({"tag": tag, "hashes": e[1], "medium": e[2]})
        elif tag == "AllBlocksCleared":
            if len(e) != 1:
                fail("AllBlocksCleared has fields")
            out.append({"tag": tag})
        else:
            fail("unknown tag %r" % (tag,))
    return out


def check(events, expect):
    """The path's blocks are stored on GPU with hashes chaining parent -> child and the path's tokens;
    the evicted leaf is removed from GPU (and stored on CPU when demoted)."""
    bs = expect["block_size"]
    path = expect["path_tokens"]
    stored_gpu = [e for e in events if e["tag"] == "BlockStored" and e["medium"] == "GPU"]
    # The path's events: those whose tokens continue the path, in order.
    chain, tokens, last = [], [], None
    no_ids = expect.get("token_ids") is False
    for e in stored_gpu:
        if no_ids:
            # Without token ids a router follows hashes: the chain's next event names its last hash as parent.
            if e["parent"] == last and e["hashes"] and len(tokens) < len(path) // bs * bs:
                chain.append(e)
                tokens += path[len(tokens):len(tokens) + len(e["hashes"]) * bs]
                last = e["hashes"][-1]
            continue
        if e["parent"] == last and path[len(tokens):len(tokens) + len(e["tokens"])] == e["tokens"] and e["tokens"]:
            chain.append(e)
            tokens += e["tokens"]
            last = e["hashes"][-1]
    want_blocks = len(path) // bs
    if len(tokens) != want_blocks * bs:
        fail("path blocks stored on GPU cover %d tokens, want %d (events: %s)" % (len(tokens), want_blocks * bs,
                                                                                json.dumps(events)[:2000]))
    if chain[0]["parent"] is not None:
        fail("first block of the path has a parent hash")
    for e in chain:
        if e["block_size"] != bs:
            fail("block_size %d" % e["block_size"])
    hashes = [h for e in chain for h in e["hashes"]]
    if len(set(hashes)) != len(hashes):
        fail("repeated block hashes along the path")
    if expect.get("extra_root_tokens") and not no_ids:
        extra = expect["extra_root_tokens"]
        n = len(extra) // bs * bs
        if not any(e["parent"] is None and e["tokens"] == extra[:n] for e in stored_gpu):
            fail("the second root path was not stored")
    if expect.get("removed_after_eviction"):
        leaf = chain[-1]["hashes"]
        removed = [e for e in events if e["tag"] == "BlockRemoved" and e["medium"] == "GPU" and e["hashes"] == leaf]
        if not removed:
            fail("no BlockRemoved(GPU) for the evicted leaf")
        demoted = [e for e in events if e["tag"] == "BlockStored" and e["medium"] == "CPU" and e["hashes"] == leaf]
        if expect.get("demoted_to_cpu") and not demoted:
            fail("no BlockStored(CPU) for the demoted leaf")
        if expect.get("demoted_to_cpu") and demoted[0]["parent"] != chain[-1]["parent"]:
            fail("the demoted leaf's parent hash changed")
    return len(chain)


def satisfied(events, expect):
    try:
        import io
        import contextlib
        with contextlib.redirect_stdout(io.StringIO()):
            check(events, expect)
        return True
    except SystemExit:
        return False


def secure(sock, expect):
    """ZeroMQ CURVE as a client, when the expectation carries keys."""
    if expect.get("curve_server_key"):
        sock.curve_serverkey = expect["curve_server_key"].encode()
        sock.curve_publickey = expect["curve_public_key"].encode()
        sock.curve_secretkey = expect["curve_secret_key"].encode()


def new_context():
    """Sockets that drop unsent messages at exit: a refused client's queued request (its handshake
    never completes) would otherwise hold the context's termination, and the process, forever."""
    ctx = zmq.Context()
    ctx.setsockopt(zmq.LINGER, 0)
    return ctx


def live(endpoint, expect):
    ctx = new_context()
    sub = ctx.socket(zmq.SUB)
    secure(sub, expect)
    sub.setsockopt(zmq.SUBSCRIBE, expect.get("topic", "").encode())
    sub.connect(endpoint)
    time.sleep(0.5)  # PUB/SUB joins asynchronously
    print("ready", flush=True)
    events, seqs = [], []
    deadline = time.time() + float(expect.get("timeout_s", 20))
    while time.time() < deadline:
        if not sub.poll(200):
            if events and satisfied(events, expect):
                break
            continue
        frames = sub.recv_multipart()
        if len(frames) != 3:
            fail("message has %d frames" % len(frames))
        topic, seq_b, payload = frames
        if topic != expect.get("topic", "").encode():
            fail("topic %r" % (topic,))
        if len(seq_b) != 8:
            fail("seq frame of %d bytes" % len(seq_b))
        seqs.append(int.from_bytes(seq_b, "big"))
        events += decode_batch(payload)
    if expect.get("expect_nothing"):
        if seqs:
            fail("an unauthorized subscriber received %d messages" % len(seqs))
        print("ok nothing received", flush=True)
        return
    if not seqs:
        fail("no messages")
    if seqs != list(range(seqs[0], seqs[0] + len(seqs))):
        fail("seq not contiguous: %r" % (seqs,))
    if seqs[0] != 0:
        fail("first seq %d (joined before the first batch)" % seqs[0])
    n = check(events, expect)
    print("ok live batches=%d events=%d path_events=%d last_seq=%d" % (len(seqs), len(events), n, seqs[-1]), flush=True)


def replay(endpoint, expect):
    ctx = new_context()
    s = ctx.socket(zmq.DEALER)
    secure(s, expect)
    s.connect(endpoint)
    s.send_multipart([b"", (0).to_bytes(8, "big")])
    events, seqs = [], []
    end = (-1).to_bytes(8, "big", signed=True)
    while True:
        if not s.poll(5000):
            if expect.get("expect_nothing") and not seqs:
                print("ok nothing received", flush=True)
                return
            fail("replay: no answer (got %d batches)" % len(seqs))
        frames = s.recv_multipart()
        if len(frames) != 3 or frames[0] != b"":
            fail("replay answer of %d frames" % len(frames))
        _, seq_b, payload = frames
        if seq_b == end:
            if payload != b"":
                fail("end marker with a payload")
            break
        seqs.append(int.from_bytes(seq_b, "big"))
        events += decode_batch(payload)
    if seqs != list(range(len(seqs))):
        fail("replayed seqs are not 0..n-1: %r" % (seqs,))
    n = check(events, expect)
    print("ok replay batches=%d events=%d path_events=%d" % (len(seqs), len(events), n), flush=True)


def main():
    mode = sys.argv[1]
    if mode == "decode":
        with open(sys.argv[2], "rb") as f:
            data = f.read()
        obj = msgpack.unpackb(data, raw=False, strict_map_key=False)
        repacked = msgpack.packb(obj, use_bin_type=True)

        def conv(o):
            if isinstance(o, bytes):
                return {"bin": o.hex()}
            if isinstance(o, list):
                return [conv(x) for x in o]
            if isinstance(o, dict):
                return {str(k): conv(v) for k, v in o.items()}
            return o

        print(json.dumps({"value": conv(obj), "same_bytes_when_repacked": repacked == data}), flush=True)
        return
    with open(sys.argv[3]) as f:
        expect = json.load(f)
    EXPECT.update(expect)
    if mode == "live":
        live(sys.argv[2], expect)
    elif mode == "replay":
        replay(sys.argv[2], expect)
    else:
        fail("mode " + mode)


if __name__ == "__main__":
    main()
