"""Chunk-level value learning, advantage-weighted regression and critic-guided chunk selection.

Critic (shaped chunk TD, target network):

    y = r_Φ + γ^h (1 − done) V_target(s'),   r_Φ = r + γ^h β Φ(s')(1 − done) − β Φ(s)
    V_target(s') = mean_j Q_target(s', a_j)  or  Σ_j softmax(Q_target/T)_j Q_target(s', a_j),  a_j ~ π(·|s')

(Q_target reduced over its heads with min). Policy (AWR):

    A(s, a) = Q(s, a) − mean_j Q(s, a_j),  w = min(exp(A / β_awr), clip)   (or, with awr_weighting "filter",
                                            w = 1[A > 0] / mean_b 1[A > 0]: the critic only selects)
    loss = mean_b(w_b · NLL_b) + bc_weight · mean(NLL on demonstrations)

Weights are detached; with `normalize_advantages` the advantages are standardized per batch first,
which makes β_awr independent of the reward scale (set it near 1 then).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .config import SELECT_MODES, TrainConfig
from .data import ACTION, DONE, N_STEPS, PHI_NEXT, PHI_S, RETURN, REWARD, WEIGHT, next_obs
from .modeling import clip_actions, reduce_heads
from .shaping import shaped_chunk_rewards


def chunk_discount(gamma: float, n_steps: torch.Tensor | int) -> torch.Tensor | float:
    """γ^h per transition (h = control steps the chunk actually ran)."""
    if isinstance(n_steps, torch.Tensor):
        return torch.pow(torch.as_tensor(gamma, dtype=torch.float32, device=n_steps.device), n_steps.float())
    return gamma ** n_steps


@torch.no_grad()
def soft_update(target: nn.Module, source: nn.Module, tau: float) -> None:
    """target ← (1 − τ) target + τ source for parameters; buffers are copied."""
    for t, s in zip(target.parameters(), source.parameters(), strict=True):
        t.lerp_(s, tau)
    for t, s in zip(target.buffers(), source.buffers(), strict=True):
        t.copy_(s)


def candidate_weights(q: torch.Tensor, temperature: float) -> torch.Tensor:
    """softmax(Q / T) over the last dimension (candidates)."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    return torch.softmax(q / temperature, dim=-1)


@torch.no_grad()
def state_value(critic, policy, obs: dict[str, torch.Tensor], j: int, mode: str = "mean",
                temperature: float = 0.5, reduce: str = "min") -> torch.Tensor:
    """V(s) (B,) estimated from j chunks sampled from the policy: mean or softmax-weighted Q."""
    chunks = policy.sample(obs, j)  # (B, j, h, A)
    q = reduce_heads(critic(obs, chunks), reduce)  # (B, j)
    if mode == "mean":
        return q.mean(dim=-1)
    if mode == "softmax":
        return (candidate_weights(q, temperature) * q).sum(dim=-1)
    raise ValueError(f"next-value mode must be 'mean' or 'softmax', got {mode!r}")


@torch.no_grad()
def td_targets(critic_target, policy, batch: dict[str, torch.Tensor], discount: torch.Tensor | float, *,
               beta: float = 0.0, j: int = 8, next_value: str = "mean", temperature: float = 0.5,
               reduce: str = "min") -> torch.Tensor:
    """Shaped chunk TD targets (B,). `discount` is γ^h (float or (B,)); beta = 0 gives sparse targets.

    batch needs REWARD, DONE, PHI_S, PHI_NEXT and the next observation (keys prefixed `next_`).
    """
    reward = batch[REWARD].float()
    not_done = 1.0 - batch[DONE].float()
    discount = torch.as_tensor(discount, dtype=reward.dtype, device=reward.device)
    shaped = shaped_chunk_rewards(reward, batch[PHI_S].float(), batch[PHI_NEXT].float(), discount, 1, beta,
                                  batch[DONE])
    v_next = state_value(critic_target, policy, next_obs(batch), j, next_value, temperature, reduce)
    return shaped + discount * not_done * v_next


def _step(optimizer: torch.optim.Optimizer, loss: torch.Tensor, params, grad_clip: float) -> float:
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    norm = nn.utils.clip_grad_norm_(params, grad_clip if grad_clip > 0 else math.inf)
    optimizer.step()
    return float(norm)


def critic_update(critic, critic_target, policy, optimizer: torch.optim.Optimizer,
                  batch: dict[str, torch.Tensor], cfg: TrainConfig) -> dict[str, float]:
    """One TD step on all Q heads (MSE to the shared target), then Polyak-update the target critic."""
    discount = chunk_discount(cfg.gamma, batch[N_STEPS])
    target = td_targets(critic_target, policy, batch, discount, beta=cfg.shaping_beta, j=cfg.td_candidates,
                        next_value=cfg.next_value, temperature=critic.cfg.q_temperature)
    q = critic(batch, batch[ACTION])  # (B, heads)
    td = q - target.unsqueeze(-1)
    loss = (td ** 2).mean()
    grad_norm = _step(optimizer, loss, critic.parameters(), cfg.grad_clip)
    soft_update(critic_target, critic, cfg.target_tau)
    return {"critic_loss": float(loss.detach()), "td_abs": float(td.detach().abs().mean()),
            "q_mean": float(q.detach().mean()), "target_mean": float(target.mean()), "critic_grad_norm": grad_norm}


@torch.no_grad()
def advantages(critic, policy, batch: dict[str, torch.Tensor], j: int = 8, mode: str = "q",
               shaping_beta: float = 0.0) -> torch.Tensor:
    """Advantage of the batch's chunks (B,), heads averaged; one critic encoder pass.

    q:   A = Q(s, a) − V(s), V(s) = mean_j Q(s, a_j ~ π)   (bootstrapped; shaping-invariant)
    mc:  A = G − (V(s) + β Φ(s))                            (Monte-Carlo return; +βΦ undoes the shaped critic's
                                                             offset, since Q_Φ = Q − βΦ for Φ(terminal) = 0)
    mix: the mean of both — low variance from the critic, no bias from an unfit critic early on.
    """
    feat = critic.encode(batch)
    samples = policy.sample(batch, j)  # (B, j, h, A)
    v = critic.heads_from_features(feat, samples).mean(-1).mean(dim=-1)  # (B,)
    if mode == "q":
        q_data = critic.heads_from_features(feat, batch[ACTION].unsqueeze(1)).mean(-1).squeeze(1)
        return q_data - v
    if mode not in ("mc", "mix"):
        raise ValueError(f"unknown advantage mode {mode!r}; use q, mc or mix")
    a_mc = batch[RETURN] - (v + shaping_beta * batch.get(PHI_S, torch.zeros_like(v)))
    if mode == "mc":
        return a_mc
    q_data = critic.heads_from_features(feat, batch[ACTION].unsqueeze(1)).mean(-1).squeeze(1)
    return 0.5 * (q_data - v) + 0.5 * a_mc


def awr_weights(adv: torch.Tensor, beta: float, clip: float, normalize: bool = False) -> torch.Tensor:
    """min(exp(A / β), clip); with normalize, A is standardized over the batch first (needs B ≥ 2)."""
    if beta <= 0 or clip <= 0:
        raise ValueError(f"beta and clip must be > 0, got beta={beta}, clip={clip}")
    adv = adv.detach() if adv.is_floating_point() else adv.detach().float()
    if normalize:
        adv = (adv - adv.mean()) / (adv.std(unbiased=False) + 1e-8)
    # clamp the exponent first so huge advantages give `clip`, never inf
    return torch.exp(torch.clamp(adv / beta, max=math.log(clip)))


def filter_weights(adv: torch.Tensor) -> torch.Tensor:
    """The critic only selects: 1 on chunks with A > 0, 0 elsewhere, scaled so the kept chunks have weight
    len(batch) / kept — the weighted mean NLL is then the mean NLL of the kept chunks (all zeros when none is)."""
    keep = (adv.detach() > 0).float()
    kept = keep.sum()
    return keep * (keep.numel() / kept) if kept > 0 else keep


def bc_update(policy, optimizer: torch.optim.Optimizer, batch: dict[str, torch.Tensor],
              cfg: TrainConfig) -> dict[str, float]:
    """Behaviour cloning (SFT) step: unweighted NLL of the batch's chunks."""
    loss, info = policy({k: v for k, v in batch.items() if k != WEIGHT})
    grad_norm = _step(optimizer, loss, [p for p in policy.parameters() if p.requires_grad], cfg.grad_clip)
    return {**{f"bc_{k}": float(v) for k, v in info.items()}, "policy_grad_norm": grad_norm}


def policy_update(policy, optimizer: torch.optim.Optimizer, batch: dict[str, torch.Tensor], critic,
                  cfg: TrainConfig, demo_batch: dict[str, torch.Tensor] | None = None) -> dict[str, float]:
    """AWR step on `batch` (own rollouts) plus `cfg.bc_weight` × BC NLL on `demo_batch` when given."""
    adv = advantages(critic, policy, batch, cfg.td_candidates, cfg.advantage, cfg.shaping_beta)
    weights = (filter_weights(adv) if cfg.awr_weighting == "filter"
               else awr_weights(adv, cfg.awr_beta, cfg.awr_weight_clip, cfg.normalize_advantages))
    loss, info = policy({**batch, WEIGHT: weights})
    out = {"awr_loss": float(info["loss"]), "nll": float(info["nll"]), "adv_mean": float(adv.mean()),
           "adv_std": float(adv.std(unbiased=False)), "positive_share": float((adv > 0).float().mean()),
           "weight_mean": float(weights.mean()),
           "weight_max": float(weights.max())}
    if demo_batch is not None and cfg.bc_weight > 0:
        bc_loss, bc_info = policy({k: v for k, v in demo_batch.items() if k != WEIGHT})
        loss = loss + cfg.bc_weight * bc_loss
        out["bc_nll"] = float(bc_info["nll"])
    out["policy_loss"] = float(loss.detach())
    out["policy_grad_norm"] = _step(optimizer, loss, [p for p in policy.parameters() if p.requires_grad],
                                    cfg.grad_clip)
    return out


@torch.no_grad()
def score_candidates(policy, critic, batch: dict[str, torch.Tensor], j: int = 8, temperature: float = 0.5,
                     generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Sample j chunks per observation and score them: chunks (B, j, h, A), Q (B, j), softmax weights (B, j)."""
    chunks = policy.sample(batch, j, generator=generator)
    q = critic.q(batch, chunks, reduce="mean")
    return chunks, q, candidate_weights(q, temperature)


@torch.no_grad()
def select_chunk(policy, critic, batch: dict[str, torch.Tensor], j: int = 8, temperature: float = 0.5,
                 mode: str = "softmax_combine", generator: torch.Generator | None = None) -> torch.Tensor:
    """One chunk per observation (B, h, A) in env units from j candidates weighted by softmax(Q / T).

    softmax_combine: weighted mean of the candidates; argmax: the best-Q candidate; sample: one candidate
    drawn with the softmax probabilities. One policy pass and one critic encoder pass for the whole batch.
    """
    if mode not in SELECT_MODES:
        raise ValueError(f"mode must be one of {', '.join(SELECT_MODES)}, got {mode!r}")
    chunks, q, weights = score_candidates(policy, critic, batch, j, temperature, generator)
    rows = torch.arange(chunks.shape[0], device=chunks.device)
    if mode == "softmax_combine":
        return clip_actions(torch.einsum("bj,bjha->bha", weights, chunks))  # clip float round-off
    if mode == "argmax":
        return chunks[rows, q.argmax(dim=-1)]
    return chunks[rows, torch.multinomial(weights, 1, generator=generator).squeeze(-1)]
