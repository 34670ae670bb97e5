#!/usr/bin/env python3
"""Trains the QA model on tokenized RAG episodes (see make_data.py and `ragctl encode-episodes`).

    /usr/bin/python3 tools/train/train.py --data data/train --out data/train/run --minutes 90

Runs on CPU within a wall-clock budget: the learning-rate schedule follows the fraction of the
budget spent; the curriculum (stage 0 -> 1 -> 2: more passages, harder distractors) advances when
the answer loss on the current stage is low enough. Checkpoints every few minutes (model, optimiser, RNG, elapsed time)
and resumes from the last one when restarted. Progress lines carry loss, held-out exact match and
an ETA; the same numbers go to log.jsonl for the model card's training curve.

Held-out exact match is teacher-forced: an episode counts when every answer token is the argmax
given the gold prefix, which is exactly when greedy decoding reproduces the gold answer.
"""
import argparse
import contextlib
import json
import math
import os
import random
import struct
import subprocess
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

import llama


def load_episodes(path):
    """Episodes as (ids, spans): spans are the answer tokens [start, start + len) (the targets of the
    answer loss). Version 1 files have one answer after the prompt; version 2 several (follow-up turns)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] not in (b"RAGDEPS1", b"RAGDEPS2"):
        raise SystemExit(f"{path}: not an encoded episode file")
    v2 = data[:8] == b"RAGDEPS2"
    (count,) = struct.unpack_from("<I", data, 8)
    off, eps = 12, []
    for _ in range(count):
        if v2:
            n, k = struct.unpack_from("<II", data, off)
            off += 8
            spans = [struct.unpack_from("<II", data, off + 8 * i) for i in range(k)]
            off += 8 * k
        else:
            p, a = struct.unpack_from("<II", data, off)
            off += 8
            n, spans = p + a, [(p, a)]
        ids = np.frombuffer(data, dtype=np.int32, count=n, offset=off)
        off += 4 * n
        eps.append((ids, spans))
    return eps


def encode_file(ragctl, tokenizer, src):
    """The episodes of a JSONL file as ragd lays them out (`ragctl encode-episodes`), loaded."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "e.bin")
        subprocess.run([ragctl, "encode-episodes", "--tokenizer", tokenizer, "--in", src, "--out", out], check=True,
                       stdout=subprocess.DEVNULL)
        return load_episodes(out)


def encode_rows(ragctl, tokenizer, rows):
    """The same for episodes given as dicts (make_data.py's JSONL fields)."""
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "e.jsonl")
        with open(src, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        return encode_file(ragctl, tokenizer, src)


def make_batch(eps, pad_to=1):
    """ids [B, T], targets [B, T] (-1 = none), answer mask [B, T] (target is an answer token). T is
    rounded up to a multiple of pad_to (fewer distinct shapes for a GPU's kernels)."""
    t = max(len(e[0]) for e in eps)
    t = (t + pad_to - 1) // pad_to * pad_to
    ids = torch.zeros(len(eps), t, dtype=torch.long)
    tgt = torch.full((len(eps), t), -1, dtype=torch.long)
    ans = torch.zeros(len(eps), t, dtype=torch.bool)
    for i, (x, spans) in enumerate(eps):
        x = torch.from_numpy(x.astype(np.int64))
        n = len(x)
        ids[i, :n] = x
        tgt[i, :n - 1] = x[1:]
        for s, k in spans:
            ans[i, s - 1:s - 1 + k] = True
    return ids, tgt, ans


class Device:
    """Where the model trains: the CPU in fp32 (the default; PyTorch 1.13 is enough), or a CUDA
    device with bf16 autocast (weights and optimiser state stay fp32)."""

    def __init__(self, name):
        self.dev = torch.device(name)
        self.cuda = self.dev.type == "cuda"
        self.pad_to = 64 if self.cuda else 1

    def batch(self, eps):
        return tuple(t.to(self.dev, non_blocking=True) for t in make_batch(eps, self.pad_to))

    def autocast(self):
        if self.cuda:
            return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()


def losses(model, ids, tgt, ans, dev):
    with dev.autocast():
        logits = model(ids)
    logits = logits.float()
    ce = F.cross_entropy(logits.view(-1, logits.shape[-1]), tgt.view(-1).clamp(min=0), reduction="none").view(tgt.shape)
    real = tgt >= 0
    ctx = real & ~ans
    return (ce * ans).sum() / ans.sum(), (ce * ctx).sum() / ctx.sum().clamp(min=1), logits


@torch.no_grad()
def teacher_forced_hits(model, eps, dev, batch=16):
    """Per episode: True when every answer token is the argmax given the gold prefix (greedy
    decoding would reproduce the answer). The model's train / eval mode is restored."""
    was_training = model.training
    model.eval()
    hits = []
    for i in range(0, len(eps), batch):
        ids, tgt, ans = dev.batch(eps[i:i + batch])
        with dev.autocast():
            pred = model(ids).argmax(-1)
        hits += ((pred == tgt) | ~ans).all(dim=1).tolist()
    model.train(was_training)
    return hits


def held_out_em(model, eps, dev, batch=16):
    return sum(teacher_forced_hits(model, eps, dev, batch)) / len(eps)


def lr_at(frac, step, peak, warmup=150):
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0))))


# Curriculum: a stage is left once the answer loss on it falls below this (and it had this many
# steps), so slow and fast machines see the same progression.
ADVANCE_LOSS = 0.5
MIN_STAGE_STEPS = 100
# ... or, with --stage-by F1,F2, at the latest when those fractions of the budget are spent (off by
# default: a 90-minute run forced to stages 1 and 2 at 25 % / 50 % learned no copying at all).


def stage_mix(stage):
    """Which stage each sampled episode comes from, as (stage, weight): mostly the current stage,
    some of the one before it so that it is not forgotten."""
    return [(stage, 1.0)] if stage == 0 else [(stage - 1, 0.2), (stage, 0.8)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="folder with stage{0,1,2}.bin, val.bin, tokenizer.json; "
                    "several folders separated by commas pool their episodes (validation and tokenizer: the first)")
    ap.add_argument("--device", default="cpu", help="cpu (fp32) or cuda[:N] (bf16 autocast)")
    ap.add_argument("--out", required=True, help="run folder: checkpoints, log.jsonl, exported model")
    ap.add_argument("--minutes", type=float, default=90.0, help="wall-clock training budget")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch-tokens", type=int, default=4096, help="approximate tokens per step")
    ap.add_argument("--lr", type=float, default=1.5e-3)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--ffn", type=int, default=768)
    ap.add_argument("--ctx-weight", type=float, default=0.2, help="weight of the context LM loss vs the answer loss")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--init-from", help="start from this exported model directory (continued training) "
                                        "when the run folder has no checkpoint")
    ap.add_argument("--start-stage", type=int, default=0, help="curriculum stage to start at (0..2)")
    ap.add_argument("--stage-by", default="", help="F1,F2: advance to stage 1 / 2 at the latest at these fractions "
                                                   "of the budget (default: by answer loss only)")
    ap.add_argument("--warmup", type=int, default=150, help="steps of linear learning-rate warm-up")
    ap.add_argument("--ckpt-minutes", type=float, default=4.0)
    ap.add_argument("--eval-minutes", type=float, default=4.0)
    args = ap.parse_args()

    stage_by = [float(x) for x in args.stage_by.split(",")] if args.stage_by else [2.0, 2.0]
    torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)
    dirs = args.data.split(",")
    dev = Device(args.device)
    stages = [[e for d in dirs for e in load_episodes(os.path.join(d, f"stage{s}.bin"))] for s in range(3)]
    val = load_episodes(os.path.join(dirs[0], "val.bin"))[:200]
    with open(os.path.join(dirs[0], "tokenizer.json")) as f:
        tok = json.load(f)
    vocab = max([v for v in tok["model"]["vocab"].values()] + [t["id"] for t in tok["added_tokens"]]) + 1
    specials = {t["content"]: t["id"] for t in tok["added_tokens"]}
    eos = [specials[s] for s in ("<|eot_id|>", "<|end_of_text|>") if s in specials]
    cfg = llama.Config(vocab_size=vocab, hidden_size=args.hidden, num_hidden_layers=args.layers,
                       num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
                       intermediate_size=args.ffn, bos_token_id=specials.get("<|begin_of_text|>", 0), eos_token_id=eos)

    torch.manual_seed(args.seed)
    model = llama.Llama(cfg).to(dev.dev)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95))
    rng = random.Random(args.seed)
    step, elapsed, best_em, stage, stage_steps = 0, 0.0, -1.0, 0, 0
    ckpt = os.path.join(args.out, "ckpt.pt")
    if os.path.exists(ckpt):
        st = torch.load(ckpt, map_location=dev.dev, weights_only=False) if dev.cuda else torch.load(ckpt)
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        rng.setstate(st["rng"])
        torch.set_rng_state(st["torch_rng"].cpu())
        step, elapsed, best_em = st["step"], st["elapsed"], st.get("best_em", -1.0)
        stage, stage_steps = st.get("stage", 0), st.get("stage_steps", 0)
        print(f"resumed at step {step}, {elapsed / 60:.1f} min trained", flush=True)
    elif args.init_from:
        model.load_state_dict(llama.load_safetensors(os.path.join(args.init_from, "model.safetensors")), strict=True)
        stage = args.start_stage
        print(f"initialised from {args.init_from}, curriculum stage {stage}", flush=True)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params / 1e6:.2f}M parameters, vocab {vocab}, {args.layers} layers x {args.hidden}, "
          f"{args.heads}/{args.kv_heads} heads; budget {args.minutes} min on {args.threads} threads, device {dev.dev}, "
          f"PyTorch {torch.__version__}, {sum(len(x) for x in stages)} episodes", flush=True)

    log = open(os.path.join(args.out, "log.jsonl"), "a")
    budget = args.minutes * 60
    t_start = time.time() - elapsed
    last_ckpt = last_eval = time.time()
    tok_count, t_window = 0, time.time()
    ans_avg = ctx_avg = None

    def save(path):
        tmp = path + ".tmp"
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "rng": rng.getstate(),
                    "torch_rng": torch.get_rng_state(), "step": step, "elapsed": time.time() - t_start,
                    "best_em": best_em, "stage": stage, "stage_steps": stage_steps, "args": vars(args)}, tmp)
        os.replace(tmp, path)

    def evaluate():
        nonlocal best_em
        em = held_out_em(model, val, dev)
        el = time.time() - t_start
        rec = {"step": step, "minutes": round(el / 60, 2), "stage": stage, "answer_loss": ans_avg, "context_loss": ctx_avg,
               "lr": opt.param_groups[0]["lr"], "held_out_em": em}
        log.write(json.dumps(rec) + "\n")
        log.flush()
        if em >= best_em:
            best_em = em
            os.makedirs(os.path.join(args.out, "best"), exist_ok=True)
            llama.export(model, os.path.join(args.out, "best"))
        eta = max(0.0, budget - el) / 60
        print(f"step {step:6d}  {el / 60:5.1f} min  answer loss {ans_avg:.3f}  context loss {ctx_avg:.3f}  "
              f"held-out EM {em * 100:5.1f}%  (best {best_em * 100:.1f}%)  ETA {eta:.1f} min", flush=True)

    model.train()
    while time.time() - t_start < budget:
        frac = (time.time() - t_start) / budget
        lr = lr_at(frac, step, args.lr, args.warmup)
        for g in opt.param_groups:
            g["lr"] = lr
        if stage < 2 and ((stage_steps >= MIN_STAGE_STEPS and ans_avg is not None and ans_avg < ADVANCE_LOSS)
                          or frac >= stage_by[stage]):
            stage, stage_steps, ans_avg = stage + 1, 0, None
            print(f"step {step}: curriculum advances to stage {stage}", flush=True)
        mix = stage_mix(stage)
        batch, toks = [], 0
        while toks < args.batch_tokens:
            s = rng.choices([m[0] for m in mix], weights=[m[1] for m in mix])[0]
            e = stages[s][rng.randrange(len(stages[s]))]
            batch.append(e)
            toks += len(e[0])
        ids, tgt, ans = dev.batch(batch)
        a_loss, c_loss, _ = losses(model, ids, tgt, ans, dev)
        loss = a_loss + args.ctx_weight * c_loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        stage_steps += 1
        tok_count += toks
        ans_avg = a_loss.item() if ans_avg is None else 0.95 * ans_avg + 0.05 * a_loss.item()
        ctx_avg = c_loss.item() if ctx_avg is None else 0.95 * ctx_avg + 0.05 * c_loss.item()
        if step % 25 == 0:
            dt = time.time() - t_window
            print(f"step {step:6d}  stage mix {mix}  lr {lr:.2e}  answer {ans_avg:.3f}  context {ctx_avg:.3f}  "
                  f"{tok_count / dt:.0f} tok/s", flush=True)
            tok_count, t_window = 0, time.time()
        if time.time() - last_eval > args.eval_minutes * 60:
            evaluate()
            last_eval = time.time()
        if time.time() - last_ckpt > args.ckpt_minutes * 60:
            save(ckpt)
            last_ckpt = time.time()
    evaluate()
    save(ckpt)
    llama.export(model, os.path.join(args.out, "final"))
    print(f"done: {step} steps, best held-out EM {best_em * 100:.1f}%", flush=True)


if __name__ == "__main__":
    main()
