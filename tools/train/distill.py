#!/usr/bin/env python3
"""Distils a small draft model for speculative decoding from a trained teacher (the QA model).

    /usr/bin/python3 tools/train/distill.py --teacher models/ragd-qa-quote --data data/train-draft \
        --out data/train-draft/run --layers 2 --steps 400

The student has the teacher's tokenizer, width and head layout and fewer layers. It starts as a
copy of the teacher's embeddings, final norm and the pair of teacher layers whose stack already
agrees most with the teacher (measured on validation episodes before the first step), and learns to
match the teacher's next-token distribution: the loss is KL(teacher || student) on every answer
token plus --ctx-weight times the same on the prompt's tokens (the drafter reads prompts too, but
only its answer predictions are drafts). Targets come from the teacher run alongside in
inference mode, so no gold label is needed: the student learns what the teacher would say, which is
what a verifier accepts.

The measure that matters is the acceptance of its greedy drafts by the teacher's greedy choice:
validation reports the per-token agreement of the two argmaxes on answer tokens (teacher-forced on
the gold answer) and the mean length of the agreeing run that a k-token draft would get accepted.

Deterministic for a seed: a fixed number of steps, seeded episode sampling, one thread by default.
Writes log.jsonl (one line per evaluation) and the exported model (config.json + bf16
model.safetensors) under --out/final.
"""
import argparse
import itertools
import json
import os
import random
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama  # noqa: E402
from train import Device, load_episodes, lr_at, stage_mix  # noqa: E402


def student_from(teacher, layers):
    """A student of len(layers) layers: the teacher's embeddings and final norm with copies of the
    teacher layers at the given indices."""
    t = teacher.c
    cfg = llama.Config(vocab_size=t.vocab_size, hidden_size=t.hidden_size, num_hidden_layers=len(layers),
                       num_attention_heads=t.num_attention_heads, num_key_value_heads=t.num_key_value_heads,
                       intermediate_size=t.intermediate_size, rope_theta=t.rope_theta, rms_norm_eps=t.rms_norm_eps,
                       max_position_embeddings=t.max_position_embeddings, tie_word_embeddings=t.tie_word_embeddings,
                       bos_token_id=t.bos_token_id, eos_token_id=t.eos_token_id)
    s = llama.Llama(cfg)
    s.model.embed_tokens.load_state_dict(teacher.model.embed_tokens.state_dict())
    s.model.norm.load_state_dict(teacher.model.norm.state_dict())
    if s.lm_head is not None:
        s.lm_head.load_state_dict(teacher.lm_head.state_dict())
    for i, src in enumerate(layers):
        s.model.layers[i].load_state_dict(teacher.model.layers[src].state_dict())
    return s


def batch_tensors(eps):
    """ids [B, T], real-token mask [B, T] (position predicts a next token), answer mask [B, T]."""
    t = max(len(e[0]) for e in eps)
    ids = torch.zeros(len(eps), t, dtype=torch.long)
    real = torch.zeros(len(eps), t, dtype=torch.bool)
    ans = torch.zeros(len(eps), t, dtype=torch.bool)
    for i, (x, spans) in enumerate(eps):
        n = len(x)
        ids[i, :n] = torch.from_numpy(x.astype("int64"))
        real[i, :n - 1] = True
        for s, k in spans:
            ans[i, s - 1:s - 1 + k] = True
    return ids, real, ans


def long_answer_mask(eps, min_span):
    """[B, T] True on the answer positions of answers of at least min_span tokens (quotations)."""
    t = max(len(e[0]) for e in eps)
    m = torch.zeros(len(eps), t, dtype=torch.bool)
    for i, (_, spans) in enumerate(eps):
        for s, k in spans:
            if k >= min_span:
                m[i, s - 1:s - 1 + k] = True
    return m


def kl_rows(t_logits, s_logits):
    """Per position KL(teacher || student) in nats: [B, T]."""
    tl = F.log_softmax(t_logits.float(), dim=-1)
    sl = F.log_softmax(s_logits.float(), dim=-1)
    return (tl.exp() * (tl - sl)).sum(-1)


@torch.no_grad()
def agreement(student, teacher, eps, k=8, batch=8, teacher_preds=None, min_span=0):
    """Greedy agreement on answer tokens, teacher-forced on the gold answers: the share of answer
    positions where student and teacher argmax agree, and the mean number of leading agreeing
    positions of a k-token window starting at each answer position (what a k-token chain draft
    would have accepted there). `teacher_preds`: the teacher's argmaxes, computed once and reused."""
    student.eval()
    agree = total = 0
    run_sum = run_n = 0
    preds = [] if teacher_preds is None else teacher_preds
    for bi, i in enumerate(range(0, len(eps), batch)):
        ids, real, ans = batch_tensors(eps[i:i + batch])
        if min_span > 0:
            ans &= long_answer_mask(eps[i:i + batch], min_span)
        if teacher_preds is None:
            preds.append(teacher(ids).argmax(-1))
        tp = preds[bi]
        sp = student(ids).argmax(-1)
        same = (tp == sp) & ans
        agree += same.sum().item()
        total += ans.sum().item()
        for b in range(ids.shape[0]):
            pos = ans[b].nonzero().flatten().tolist()
            row = same[b].tolist()
            aset = set(pos)
            for p in pos:
                n = 0
                while n < k and (p + n) in aset and row[p + n]:
                    n += 1
                run_sum += n
                run_n += 1
    student.train()
    return agree / max(total, 1), run_sum / max(run_n, 1), preds


def pick_layers(teacher, eps, n_layers):
    """The teacher layers (in order) whose n_layers-layer stack has the lowest answer-token KL to
    the teacher on `eps`."""
    ids, real, ans = batch_tensors(eps)
    with torch.no_grad():
        t_logits = teacher(ids)
        best = None
        for combo in itertools.combinations(range(teacher.c.num_hidden_layers), n_layers):
            s = student_from(teacher, list(combo)).eval()
            kl = (kl_rows(t_logits, s(ids)) * ans).sum().item() / ans.sum().item()
            print(f"  init layers {combo}: answer KL {kl:.3f}", flush=True)
            if best is None or kl < best[0]:
                best = (kl, list(combo))
    return best[1], best[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--teacher", required=True, help="exported model directory (config.json + model.safetensors)")
    ap.add_argument("--data", required=True, help="folder with stage{1,2}.bin and val.bin (ragctl encode-episodes)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--init-layers", default="auto", help="teacher layer indices to start from (e.g. 0,7) or auto")
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--batch-tokens", type=int, default=2048)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--ctx-weight", type=float, default=0.1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=41)
    ap.add_argument("--val", type=int, default=96, help="validation episodes")
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--evaluate", help="no training: report this exported student against the teacher on "
                    "--eval-file (one JSON line on stdout)")
    ap.add_argument("--eval-file", help="encoded episodes for --evaluate")
    args = ap.parse_args()
    if args.evaluate:
        torch.set_num_threads(args.threads)
        teacher, student = llama.load(args.teacher), llama.load(args.evaluate)
        eps = load_episodes(args.eval_file)[:args.val]
        out = {"episodes": len(eps), "answer_tokens": int(sum(k for _, sp in eps for _, k in sp))}
        for name, min_span in (("all", 0), ("quotations", 30)):
            preds = None
            for k in (4, 8):
                a1, run, preds = agreement(student, teacher, eps, k=k, teacher_preds=preds, min_span=min_span)
                out[f"{name}_greedy_agreement"] = round(a1, 4)
                out[f"{name}_accepted_of_{k}"] = round(run, 3)
        print(json.dumps(out), flush=True)
        return

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    os.makedirs(args.out, exist_ok=True)
    dev = Device("cpu")
    teacher = llama.load(args.teacher)
    for p in teacher.parameters():
        p.requires_grad_(False)
    stages = {s: load_episodes(os.path.join(args.data, f"stage{s}.bin")) for s in (1, 2)}
    val = load_episodes(os.path.join(args.data, "val.bin"))[:args.val]
    rng = random.Random(args.seed)

    t0 = time.time()
    if args.init_layers == "auto":
        layers, kl0 = pick_layers(teacher, val[:6], args.layers)
    else:
        layers, kl0 = [int(x) for x in args.init_layers.split(",")], None
    student = student_from(teacher, layers)
    print(f"student: {args.layers} layers from teacher layers {layers} (answer KL {kl0}), "
          f"{sum(p.numel() for p in student.parameters()) / 1e6:.2f}M parameters; {args.steps} steps on "
          f"{args.threads} thread(s), PyTorch {torch.__version__}", flush=True)
    decay = [p for p in student.parameters() if p.dim() >= 2]
    no_decay = [p for p in student.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.0}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95))
    log = open(os.path.join(args.out, "log.jsonl"), "w")
    ans_avg = ctx_avg = None
    teacher_preds = None

    def evaluate(step):
        nonlocal teacher_preds
        a1, run8, teacher_preds = agreement(student, teacher, val, teacher_preds=teacher_preds)
        rec = {"step": step, "minutes": round((time.time() - t0) / 60, 2), "answer_kl": ans_avg, "context_kl": ctx_avg,
               "lr": opt.param_groups[0]["lr"], "greedy_agreement": round(a1, 4), "accepted_of_8": round(run8, 3),
               "init_layers": layers}
        log.write(json.dumps(rec) + "\n")
        log.flush()
        print(f"step {step:5d}  {rec['minutes']:5.1f} min  answer KL {ans_avg if ans_avg is None else round(ans_avg, 3)}  "
              f"greedy agreement {a1 * 100:5.1f}%  accepted of 8 {run8:.2f}", flush=True)

    evaluate(0)
    student.train()
    mix = stage_mix(2)
    for step in range(1, args.steps + 1):
        lr = lr_at(step / args.steps, step - 1, args.lr, args.warmup)
        for g in opt.param_groups:
            g["lr"] = lr
        batch, toks = [], 0
        while toks < args.batch_tokens:
            s = rng.choices([m[0] for m in mix], weights=[m[1] for m in mix])[0]
            e = stages[s][rng.randrange(len(stages[s]))]
            batch.append(e)
            toks += len(e[0])
        ids, real, ans = batch_tensors(batch)
        with torch.no_grad():
            t_logits = teacher(ids)
        kl = kl_rows(t_logits, student(ids))
        ctx = real & ~ans
        a_loss = (kl * ans).sum() / ans.sum().clamp(min=1)
        c_loss = (kl * ctx).sum() / ctx.sum().clamp(min=1)
        loss = a_loss + args.ctx_weight * c_loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(student.parameters(), 1.0)
        opt.step()
        ans_avg = a_loss.item() if ans_avg is None else 0.95 * ans_avg + 0.05 * a_loss.item()
        ctx_avg = c_loss.item() if ctx_avg is None else 0.95 * ctx_avg + 0.05 * c_loss.item()
        if step % 10 == 0:
            print(f"step {step:5d}  lr {lr:.2e}  answer KL {ans_avg:.3f}  context KL {ctx_avg:.3f}  "
                  f"{(time.time() - t0) / 60:.1f} min", flush=True)
        if step % args.eval_every == 0 or step == args.steps:
            evaluate(step)
    llama.export(student, os.path.join(args.out, "final"))
    print(f"done: {args.steps} steps in {(time.time() - t0) / 60:.1f} min -> {args.out}/final", flush=True)


if __name__ == "__main__":
    main()
