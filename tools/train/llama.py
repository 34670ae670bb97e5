"""A Llama-family decoder in PyTorch (RMSNorm, rotate-half RoPE, grouped-query attention, SwiGLU,
tied or untied output head), with Hugging Face tensor names and a safetensors writer/reader.

It shares no code with ragd's C++ engine, so it doubles as an independent reference for it.
"""
import json
import math
import struct

import torch
import torch.nn as nn
import torch.nn.functional as F


class Config:
    def __init__(self, vocab_size, hidden_size=256, num_hidden_layers=6, num_attention_heads=8,
                 num_key_value_heads=2, intermediate_size=768, rope_theta=10000.0, rms_norm_eps=1e-5,
                 max_position_embeddings=4096, tie_word_embeddings=True, bos_token_id=0, eos_token_id=None):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.num_key_value_heads = num_key_value_heads
        self.intermediate_size = intermediate_size
        self.rope_theta = rope_theta
        self.rms_norm_eps = rms_norm_eps
        self.max_position_embeddings = max_position_embeddings
        self.tie_word_embeddings = tie_word_embeddings
        self.bos_token_id = bos_token_id
        self.eos_token_id = eos_token_id or []

    @property
    def head_dim(self):
        return self.hidden_size // self.num_attention_heads

    def to_hf(self):
        return {
            "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size, "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads, "num_key_value_heads": self.num_key_value_heads,
            "intermediate_size": self.intermediate_size, "rope_theta": self.rope_theta,
            "rms_norm_eps": self.rms_norm_eps, "max_position_embeddings": self.max_position_embeddings,
            "tie_word_embeddings": self.tie_word_embeddings, "hidden_act": "silu", "torch_dtype": "bfloat16",
            "bos_token_id": self.bos_token_id, "eos_token_id": self.eos_token_id,
        }

    @staticmethod
    def from_hf(d):
        keys = ["vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                "intermediate_size", "rope_theta", "rms_norm_eps", "max_position_embeddings", "tie_word_embeddings",
                "bos_token_id", "eos_token_id"]
        return Config(**{k: d[k] for k in keys if k in d})


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        var = x.pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(var + self.eps) * self.weight


def rope_tables(head_dim, positions, theta):
    """cos, sin: [T, head_dim] for rotate-half RoPE at the given integer positions."""
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    ang = positions.to(torch.float64)[:, None] * inv[None, :]
    ang = torch.cat([ang, ang], dim=-1)
    return ang.cos().float(), ang.sin().float()


def apply_rope(x, cos, sin):
    # x: [B, H, T, D]; rotate_half pairs dimension i with i + D/2.
    d = x.shape[-1] // 2
    rot = torch.cat([-x[..., d:], x[..., :d]], dim=-1)
    return x * cos + rot * sin


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        hd = c.head_dim
        self.q_proj = nn.Linear(c.hidden_size, c.num_attention_heads * hd, bias=False)
        self.k_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * hd, bias=False)
        self.v_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * hd, bias=False)
        self.o_proj = nn.Linear(c.num_attention_heads * hd, c.hidden_size, bias=False)

    def forward(self, x, cos, sin, mask):
        b, t, _ = x.shape
        c, hd = self.c, self.c.head_dim
        q = self.q_proj(x).view(b, t, c.num_attention_heads, hd).transpose(1, 2)
        k = self.k_proj(x).view(b, t, c.num_key_value_heads, hd).transpose(1, 2)
        v = self.v_proj(x).view(b, t, c.num_key_value_heads, hd).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        g = c.num_attention_heads // c.num_key_value_heads
        k = k.repeat_interleave(g, dim=1)
        v = v.repeat_interleave(g, dim=1)
        if mask is None:  # causal, through PyTorch's fused attention (2.x; flash kernels on a GPU)
            o = F.scaled_dot_product_attention(q.to(v.dtype), k.to(v.dtype), v, is_causal=True)
        else:
            s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hd) + mask
            o = torch.matmul(torch.softmax(s, dim=-1), v)
        return self.o_proj(o.transpose(1, 2).reshape(b, t, -1))


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gate_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.up_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.down_proj = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self_attn = Attention(c)
        self.mlp = MLP(c)
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Inner(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList([Layer(c) for _ in range(c.num_hidden_layers)])
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)


class Llama(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.model = Inner(c)
        self.lm_head = None if c.tie_word_embeddings else nn.Linear(c.hidden_size, c.vocab_size, bias=False)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, std=0.02)
            elif isinstance(m, nn.Embedding):
                nn.init.normal_(m.weight, std=0.02)
        for layer in self.model.layers:  # scaled residual projections (GPT-2 style)
            nn.init.normal_(layer.self_attn.o_proj.weight, std=0.02 / math.sqrt(2 * c.num_hidden_layers))
            nn.init.normal_(layer.mlp.down_proj.weight, std=0.02 / math.sqrt(2 * c.num_hidden_layers))

    def forward(self, ids, pad_mask=None):
        """ids: [B, T] int64 -> logits [B, T, V]. pad_mask: [B, T] bool, True = real token (left-aligned)."""
        b, t = ids.shape
        x = self.model.embed_tokens(ids)
        cos, sin = rope_tables(self.c.head_dim, torch.arange(t), self.c.rope_theta)
        cos, sin = cos.to(ids.device), sin.to(ids.device)
        # The explicit mask keeps PyTorch 1.13 (no fused attention) and the parity references exact.
        fused = hasattr(F, "scaled_dot_product_attention") and ids.is_cuda
        mask = None if fused else torch.full((t, t), float("-inf"), device=ids.device).triu(1)[None, None]
        for layer in self.model.layers:
            x = layer(x, cos, sin, mask)
        x = self.model.norm(x)
        w = self.model.embed_tokens.weight if self.lm_head is None else self.lm_head.weight
        return x @ w.t()


# ---- safetensors (written and read by hand: the format is a JSON header and raw little-endian data) ----

_DT = {torch.bfloat16: "BF16", torch.float32: "F32", torch.float16: "F16"}
_TD = {v: k for k, v in _DT.items()}


def save_safetensors(path, tensors, dtype=torch.bfloat16):
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().cpu().to(dtype).contiguous()
        raw = t.view(torch.int16 if t.element_size() == 2 else torch.int32).numpy().tobytes()
        header[name] = {"dtype": _DT[dtype], "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for raw in blobs:
            f.write(raw)


def load_safetensors(path):
    import numpy as np
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        dt = _TD[info["dtype"]]
        np_dt = np.int16 if dt in (torch.bfloat16, torch.float16) else np.float32
        arr = torch.from_numpy(np.frombuffer(data[b:e], dtype=np_dt).copy())
        out[name] = arr.view(dt).reshape(info["shape"]).float() if np_dt == np.int16 else arr.reshape(info["shape"])
    return out


def export(model, out_dir):
    import os
    os.makedirs(out_dir, exist_ok=True)
    sd = {k: v for k, v in model.state_dict().items()}
    save_safetensors(f"{out_dir}/model.safetensors", sd)
    with open(f"{out_dir}/config.json", "w") as f:
        json.dump(model.c.to_hf(), f, indent=2)
        f.write("\n")


def load(model_dir):
    with open(f"{model_dir}/config.json") as f:
        c = Config.from_hf(json.load(f))
    m = Llama(c)
    m.load_state_dict(load_safetensors(f"{model_dir}/model.safetensors"), strict=True)
    return m.eval()
