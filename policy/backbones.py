"""Observation tokenizer and the two token encoders (backbones) shared by the policy and the critic.

Tokens: [instruction, proprio, object_1 .. object_M]; padded objects are masked. A backbone maps
tokens (B, T, d) and a mask (B, T) to one feature vector (B, d).

- `TransformerBackbone`: pre-LN self-attention blocks over all tokens, read out from a learned [CLS]
  token. Attention is written with plain `nn.Linear` q/k/v/out projections and
  `F.scaled_dot_product_attention`, so LoRA adapters on them act in train and eval mode alike (no
  `nn.MultiheadAttention` fast path that would skip unmerged adapters).
- `DeepSetsBackbone`: a set encoder with no token-token attention: every token goes through the same
  residual MLP blocks, FiLM-modulated by a context vector (instruction + proprio), then multi-head
  attention pooling with context-dependent queries.

`LORA_TARGETS` lists the Linear layer names each backbone exposes to LoRA.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from sim.constants import OBS_OBJECT_MASK, OBS_OBJECTS, OBS_PROPRIO

from .config import PolicyConfig
from .data import INSTRUCTION_EMB

LORA_TARGETS = {
    "transformer": ("q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"),
    "deepsets": ("fc1", "fc2", "film", "ctx_fc", "out_fc"),
}
"""module names (suffixes) of backbone Linear layers that LoRA adapts; no tokenizer or head layer uses them"""


def trim_padding(objects: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Drop object slots that are padding in every row of the batch: (B, M, D), (B, M) → (B, k, D), (B, k).

    Exact (padded tokens are masked out of attention and pooling, and per-token layers never mix them in) and
    it roughly halves the cost of an update when scenes have 3–5 of the MAX_OBJECTS slots filled.
    """
    used = mask.any(dim=0).nonzero()
    k = int(used.max()) + 1 if len(used) else 0
    return (objects[:, :k], mask[:, :k]) if k < mask.shape[1] else (objects, mask)


class ObsTokenizer(nn.Module):
    """Normalizes features and projects instruction, proprio and object features to d_model tokens."""

    def __init__(self, cfg: PolicyConfig) -> None:
        super().__init__()
        self.register_buffer("obj_mean", torch.zeros(cfg.obj_dim))
        self.register_buffer("obj_std", torch.ones(cfg.obj_dim))
        self.register_buffer("proprio_mean", torch.zeros(cfg.proprio_dim))
        self.register_buffer("proprio_std", torch.ones(cfg.proprio_dim))
        self.text_proj = nn.Linear(cfg.text_dim, cfg.d_model)
        self.proprio_proj = nn.Linear(cfg.proprio_dim, cfg.d_model)
        self.obj_proj = nn.Linear(cfg.obj_dim, cfg.d_model)
        self.type_emb = nn.Parameter(0.02 * torch.randn(3, cfg.d_model))  # instruction, proprio, object

    @torch.no_grad()
    def set_obs_stats(self, stats: dict) -> None:
        """Load feature statistics from `policy.data.compute_obs_stats` (kept in the state dict)."""
        for name in ("obj_mean", "obj_std", "proprio_mean", "proprio_std"):
            buf = getattr(self, name)
            value = torch.as_tensor(stats[name], dtype=buf.dtype, device=buf.device)
            if value.shape != buf.shape:
                raise ValueError(f"obs stat {name} must have shape {tuple(buf.shape)}, got {tuple(value.shape)}")
            buf.copy_(value)

    def forward(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        objects = batch[OBS_OBJECTS]  # (B, M, obj_dim)
        mask = batch[OBS_OBJECT_MASK].bool()  # (B, M)
        objects, mask = trim_padding(objects, mask)
        objects = ((objects - self.obj_mean) / self.obj_std) * mask.unsqueeze(-1)
        proprio = (batch[OBS_PROPRIO] - self.proprio_mean) / self.proprio_std  # (B, P)
        text = self.text_proj(batch[INSTRUCTION_EMB]) + self.type_emb[0]  # (B, d)
        prop = self.proprio_proj(proprio) + self.type_emb[1]  # (B, d)
        objs = self.obj_proj(objects) + self.type_emb[2]  # (B, M, d)
        tokens = torch.cat([text.unsqueeze(1), prop.unsqueeze(1), objs], dim=1)  # (B, 2 + M, d)
        always = torch.ones(mask.shape[0], 2, dtype=torch.bool, device=mask.device)
        return tokens, torch.cat([always, mask], dim=1)  # (B, T, d), (B, T)


class FeedForward(nn.Module):
    def __init__(self, d: int, hidden: int, dropout: float) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d, hidden)
        self.fc2 = nn.Linear(hidden, d)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.fc2(self.drop(F.gelu(self.fc1(x)))))


class SelfAttention(nn.Module):
    def __init__(self, d: int, n_heads: int, dropout: float) -> None:
        super().__init__()
        self.n_heads, self.dropout = n_heads, dropout
        self.q_proj = nn.Linear(d, d)
        self.k_proj = nn.Linear(d, d)
        self.v_proj = nn.Linear(d, d)
        self.out_proj = nn.Linear(d, d)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = (proj(x).view(b, t, self.n_heads, d // self.n_heads).transpose(1, 2)
                   for proj in (self.q_proj, self.k_proj, self.v_proj))  # (B, H, T, dh)
        attn_mask = mask[:, None, None, :]  # (B, 1, 1, T) true = attend
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask,
                                           dropout_p=self.dropout if self.training else 0.0)
        return self.out_proj(y.transpose(1, 2).reshape(b, t, d))


class TransformerBlock(nn.Module):
    def __init__(self, cfg: PolicyConfig) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(cfg.d_model)
        self.attn = SelfAttention(cfg.d_model, cfg.n_heads, cfg.dropout)
        self.norm2 = nn.LayerNorm(cfg.d_model)
        self.ff = FeedForward(cfg.d_model, cfg.ff_mult * cfg.d_model, cfg.dropout)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = x + self.drop(self.attn(self.norm1(x), mask))
        return x + self.ff(self.norm2(x))


class TransformerBackbone(nn.Module):
    def __init__(self, cfg: PolicyConfig) -> None:
        super().__init__()
        self.cls = nn.Parameter(0.02 * torch.randn(1, 1, cfg.d_model))
        self.blocks = nn.ModuleList(TransformerBlock(cfg) for _ in range(cfg.n_layers))
        self.norm = nn.LayerNorm(cfg.d_model)

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b = tokens.shape[0]
        x = torch.cat([self.cls.expand(b, -1, -1), tokens], dim=1)  # (B, 1 + T, d)
        mask = torch.cat([torch.ones(b, 1, dtype=torch.bool, device=mask.device), mask], dim=1)
        for block in self.blocks:
            x = block(x, mask)
        return self.norm(x[:, 0])  # (B, d)


class FiLMBlock(nn.Module):
    """x + MLP(LN(x) * (1 + scale(ctx)) + shift(ctx)), applied to each token independently."""

    def __init__(self, cfg: PolicyConfig) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(cfg.d_model)
        self.film = nn.Linear(cfg.d_model, 2 * cfg.d_model)
        nn.init.zeros_(self.film.weight)
        nn.init.zeros_(self.film.bias)
        self.ff = FeedForward(cfg.d_model, cfg.ff_mult * cfg.d_model, cfg.dropout)

    def forward(self, x: torch.Tensor, ctx: torch.Tensor) -> torch.Tensor:
        scale, shift = self.film(ctx).unsqueeze(1).chunk(2, dim=-1)  # (B, 1, d) each
        return x + self.ff(self.norm(x) * (1 + scale) + shift)


class AttentionPool(nn.Module):
    """Multi-head attention pooling over tokens with queries computed from the context vector."""

    def __init__(self, cfg: PolicyConfig) -> None:
        super().__init__()
        self.n_heads = cfg.n_heads
        self.query = nn.Linear(cfg.d_model, cfg.d_model)
        self.key = nn.Linear(cfg.d_model, cfg.d_model)
        self.value = nn.Linear(cfg.d_model, cfg.d_model)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, ctx: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        dh = d // self.n_heads
        q = self.query(ctx).view(b, self.n_heads, dh)  # (B, H, dh)
        k = self.key(x).view(b, t, self.n_heads, dh)  # (B, T, H, dh)
        v = self.value(x).view(b, t, self.n_heads, dh)
        logits = torch.einsum("bhd,bthd->bht", q, k) / math.sqrt(dh)  # (B, H, T)
        logits = logits.masked_fill(~mask[:, None, :], float("-inf"))
        weights = torch.softmax(logits, dim=-1)
        return torch.einsum("bht,bthd->bhd", weights, v).reshape(b, d)


class DeepSetsBackbone(nn.Module):
    def __init__(self, cfg: PolicyConfig) -> None:
        super().__init__()
        d = cfg.d_model
        self.ctx_fc = nn.Linear(2 * d, d)
        self.blocks = nn.ModuleList(FiLMBlock(cfg) for _ in range(cfg.n_layers))
        self.pool = AttentionPool(cfg)
        self.norm = nn.LayerNorm(2 * d)
        self.out_fc = nn.Linear(2 * d, d)

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        ctx = F.gelu(self.ctx_fc(torch.cat([tokens[:, 0], tokens[:, 1]], dim=-1)))  # (B, d)
        x = tokens
        for block in self.blocks:
            x = block(x, ctx)
        pooled = self.pool(x, mask, ctx)  # (B, d); instruction/proprio tokens keep the set non-empty
        return self.out_fc(self.norm(torch.cat([ctx, pooled], dim=-1)))  # (B, d)


def make_backbone(cfg: PolicyConfig) -> nn.Module:
    if cfg.backbone == "transformer":
        return TransformerBackbone(cfg)
    if cfg.backbone == "deepsets":
        return DeepSetsBackbone(cfg)
    raise ValueError(f"unknown backbone {cfg.backbone!r}; valid: {', '.join(LORA_TARGETS)}")
