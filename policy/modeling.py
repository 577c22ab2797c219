"""Chunk policy π(chunk | obs, instruction) and chunk value critic Q(obs, instruction, chunk).

Actions leave and enter these modules in env units (metres, radians, gripper command), shape
(..., CHUNK, ACTION_DIM). Internally they are normalized by the action limits (MAX_DPOS, MAX_DROT, 1),
so the policy's Gaussian lives in [-1, 1]-scaled units.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from sim.constants import MAX_DPOS, MAX_DROT

from .backbones import ObsTokenizer, make_backbone
from .config import PolicyConfig
from .data import ACTION, WEIGHT

_LOG_2PI = math.log(2 * math.pi)


def action_scale(action_dim: int = 7) -> torch.Tensor:
    """Per-dimension limits (action_dim,): MAX_DPOS for dpos, MAX_DROT for drot, 1 for the gripper."""
    if action_dim != 7:
        raise ValueError(f"the action layout is dpos(3), drot(3), gripper(1); action_dim must be 7, got {action_dim}")
    return torch.tensor([MAX_DPOS] * 3 + [MAX_DROT] * 3 + [1.0])


def clip_actions(actions: torch.Tensor) -> torch.Tensor:
    """Clip env-unit actions (..., 7) to the limits: |dpos_i| ≤ MAX_DPOS, ‖drot‖ ≤ MAX_DROT, |grip| ≤ 1."""
    dpos = actions[..., 0:3].clamp(-MAX_DPOS, MAX_DPOS)
    drot = actions[..., 3:6]
    norm = drot.norm(dim=-1, keepdim=True)
    drot = drot * torch.clamp(MAX_DROT / norm.clamp_min(1e-12), max=1.0)
    grip = actions[..., 6:7].clamp(-1.0, 1.0)
    return torch.cat([dpos, drot, grip], dim=-1)


class _ActionNormalizer(nn.Module):
    def __init__(self, action_dim: int) -> None:
        super().__init__()
        self.register_buffer("action_scale", action_scale(action_dim), persistent=False)

    def normalize(self, actions: torch.Tensor) -> torch.Tensor:
        return actions / self.action_scale

    def denormalize(self, actions: torch.Tensor) -> torch.Tensor:
        return actions * self.action_scale


class GaussianHead(nn.Module):
    """Feature (B, d) → mean and log-std of a diagonal Gaussian over the normalized chunk (B, h, A)."""

    def __init__(self, cfg: PolicyConfig) -> None:
        super().__init__()
        self.shape = (cfg.chunk, cfg.action_dim)
        self.log_std_min, self.log_std_max = cfg.log_std_min, cfg.log_std_max
        size = cfg.chunk * cfg.action_dim
        self.hidden = nn.Linear(cfg.d_model, cfg.d_model)
        self.out = nn.Linear(cfg.d_model, 2 * size)
        nn.init.normal_(self.out.weight, std=1e-3)
        nn.init.zeros_(self.out.bias)

    def forward(self, feat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, raw = self.out(F.gelu(self.hidden(feat))).chunk(2, dim=-1)
        # soft clamp: log_std in (min, max), smooth gradients everywhere
        log_std = self.log_std_min + (self.log_std_max - self.log_std_min) * torch.sigmoid(raw)
        return mean.view(-1, *self.shape), log_std.view(-1, *self.shape)


class ChunkPolicy(nn.Module):
    """Diagonal Gaussian over 8x7 action chunks given object tokens, proprio and the instruction."""

    def __init__(self, cfg: PolicyConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tokenizer = ObsTokenizer(cfg)
        self.backbone = make_backbone(cfg)
        self.action_head = GaussianHead(cfg)
        self.actions = _ActionNormalizer(cfg.action_dim)

    def set_obs_stats(self, stats: dict) -> None:
        self.tokenizer.set_obs_stats(stats)

    def distribution(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and log-std (B, h, A) in normalized action units."""
        return self.action_head(self.backbone(*self.tokenizer(batch)))

    def forward(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Weighted Gaussian NLL of batch[ACTION] (B, h, A), per-sample weights batch[WEIGHT] (B,).

        Missing weights mean 1 (behaviour cloning). loss = mean_b(w_b * l_b), l_b the per-dimension NLL
        times the detached σ^(2·nll_beta) (β-NLL), averaged over the h*A dimensions. loss_dict holds
        detached scalars: loss, nll (plain Gaussian NLL per dimension), mse (normalized units), log_std.
        """
        mean, log_std = self.distribution(batch)
        target = self.actions.normalize(batch[ACTION])
        nll_dims = 0.5 * ((target - mean) * torch.exp(-log_std)) ** 2 + log_std + 0.5 * _LOG_2PI  # (B, h, A)
        per_sample = nll_dims
        if self.cfg.nll_beta > 0:  # β-NLL: keeps mean gradients alive on dimensions with a large std
            per_sample = nll_dims * torch.exp(2 * self.cfg.nll_beta * log_std).detach()
        per_sample = per_sample.mean(dim=(1, 2))  # (B,)
        weight = batch.get(WEIGHT)
        weight = torch.ones_like(per_sample) if weight is None else weight.to(per_sample.dtype)
        loss = (weight * per_sample).mean()
        mse = ((target - mean) ** 2).mean()
        return loss, {"loss": loss.detach(), "nll": nll_dims.mean().detach(), "mse": mse.detach(),
                      "log_std": log_std.mean().detach()}

    def sample(self, batch: dict[str, torch.Tensor], n: int = 1,
               generator: torch.Generator | None = None) -> torch.Tensor:
        """n chunks per observation, (B, n, h, A) in env units, clipped to the action limits."""
        mean, log_std = self.distribution(batch)
        eps = torch.randn((mean.shape[0], n, *mean.shape[1:]), generator=generator,
                          device=mean.device, dtype=mean.dtype)
        normalized = (mean.unsqueeze(1) + torch.exp(log_std).unsqueeze(1) * eps).clamp(-1.0, 1.0)
        return clip_actions(self.actions.denormalize(normalized))

    def mean_action(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """The Gaussian mean chunk (B, h, A) in env units, clipped."""
        mean, _ = self.distribution(batch)
        return clip_actions(self.actions.denormalize(mean.clamp(-1.0, 1.0)))


class QHead(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2 * d, d), nn.LayerNorm(d), nn.GELU(), nn.Linear(d, d), nn.GELU(),
                                 nn.Linear(d, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).squeeze(-1)


class ChunkCritic(nn.Module):
    """Q(obs, instruction, chunk) with `critic_heads` heads on one state encoder.

    The state is encoded once per observation and combined with each candidate chunk's embedding in
    small MLP heads, so scoring j candidates costs one backbone pass, not j.
    """

    def __init__(self, cfg: PolicyConfig) -> None:
        super().__init__()
        self.cfg = cfg
        d = cfg.d_model
        self.tokenizer = ObsTokenizer(cfg)
        self.backbone = make_backbone(cfg)
        self.chunk_enc = nn.Sequential(nn.Linear(cfg.chunk * cfg.action_dim, d), nn.GELU(), nn.Linear(d, d))
        self.q_heads = nn.ModuleList(QHead(d) for _ in range(cfg.critic_heads))
        self.actions = _ActionNormalizer(cfg.action_dim)

    def set_obs_stats(self, stats: dict) -> None:
        self.tokenizer.set_obs_stats(stats)

    def encode(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """State feature (B, d)."""
        return self.backbone(*self.tokenizer(batch))

    def heads_from_features(self, feat: torch.Tensor, chunks: torch.Tensor) -> torch.Tensor:
        """feat (B, d), chunks (B, n, h, A) env units → Q per head (B, n, heads)."""
        b, n = chunks.shape[:2]
        c = self.chunk_enc(self.actions.normalize(chunks).reshape(b, n, -1))  # (B, n, d)
        x = torch.cat([feat.unsqueeze(1).expand(-1, n, -1), c], dim=-1)  # (B, n, 2d)
        return torch.stack([head(x) for head in self.q_heads], dim=-1)

    def forward(self, batch: dict[str, torch.Tensor], chunks: torch.Tensor) -> torch.Tensor:
        """Q of every head: chunks (B, h, A) → (B, heads); chunks (B, n, h, A) → (B, n, heads)."""
        single = chunks.dim() == 3
        q = self.heads_from_features(self.encode(batch), chunks.unsqueeze(1) if single else chunks)
        return q.squeeze(1) if single else q

    def q(self, batch: dict[str, torch.Tensor], chunks: torch.Tensor, reduce: str = "mean") -> torch.Tensor:
        """Q reduced over heads ("mean" or "min"): (B,) for (B, h, A) chunks, (B, n) for (B, n, h, A)."""
        return reduce_heads(self(batch, chunks), reduce)


def reduce_heads(q: torch.Tensor, reduce: str) -> torch.Tensor:
    if reduce == "mean":
        return q.mean(dim=-1)
    if reduce == "min":
        return q.min(dim=-1).values
    raise ValueError(f"reduce must be 'mean' or 'min', got {reduce!r}")
