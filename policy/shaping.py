"""Staged potentials (Text2potential) and potential-based shaping of chunk rewards.

Staged potential over K ordered subgoals, k of them completed (cumulatively):

    Φ(s) = (k + φ_{k+1}(s)) / K        φ_{k+1} ∈ [0, 1] the progress potential of the next subgoal
    Φ(s) = 1                           when k == K

Shaped chunk reward for a chunk of h control steps from s to s':

    r_Φ = r + γ^h β Φ(s') − β Φ(s),    with Φ(s') := 0 when s' is terminal

For any fixed policy the exact values shift by −βΦ(s): Q_Φ = Q − βΦ(s), V_Φ = V − βΦ(s), so advantages
are unchanged (A_Φ = A). Potentials are evaluated only at chunk endpoints.

The vectorized functions accept numpy arrays or torch tensors (broadcasting), and return the same kind.
"""

from __future__ import annotations

import math

import numpy as np
import torch


def staged_potential(k_done: int, phi_next: float, K: int) -> float:
    """Φ = (k + φ_{k+1}) / K; 1 when all K subgoals are done. φ is clipped to [0, 1], k to [0, K]."""
    if K < 1:
        raise ValueError(f"K (number of subgoals) must be >= 1, got {K}")
    k = min(max(int(k_done), 0), K)
    if k == K:
        return 1.0
    phi = float(phi_next)
    if not math.isfinite(phi):
        raise ValueError(f"phi_next must be finite, got {phi_next!r}")
    return (k + min(max(phi, 0.0), 1.0)) / K


def staged_potentials(k_done, phi_next, K: int):
    """Vectorized `staged_potential` over arrays / tensors of k and φ (same shape or broadcastable)."""
    if K < 1:
        raise ValueError(f"K (number of subgoals) must be >= 1, got {K}")
    if isinstance(k_done, torch.Tensor) or isinstance(phi_next, torch.Tensor):
        ref = k_done if isinstance(k_done, torch.Tensor) else phi_next
        k = torch.as_tensor(k_done, device=ref.device).clamp(0, K).to(torch.float64)
        phi = torch.as_tensor(phi_next, device=ref.device, dtype=torch.float64).clamp(0.0, 1.0)
        return torch.where(k >= K, torch.ones_like(k), (k + phi) / K)
    k = np.clip(np.asarray(k_done), 0, K).astype(np.float64)
    phi = np.clip(np.asarray(phi_next, dtype=np.float64), 0.0, 1.0)
    return np.where(k >= K, 1.0, (k + phi) / K)


def shaped_chunk_reward(r: float, phi_s: float, phi_next: float, gamma: float, h: int, beta: float,
                        terminal: bool) -> float:
    """r + γ^h β Φ(s') − β Φ(s), with Φ(s') = 0 when s' is terminal."""
    phi_end = 0.0 if terminal else float(phi_next)
    return float(r) + (gamma ** h) * beta * phi_end - beta * float(phi_s)


def shaped_chunk_rewards(r, phi_s, phi_next, gamma: float, h, beta: float, terminal):
    """Vectorized `shaped_chunk_reward`; h may be an array of per-transition chunk lengths."""
    if isinstance(r, torch.Tensor):
        not_term = 1.0 - torch.as_tensor(terminal, device=r.device).to(r.dtype)
        discount = torch.as_tensor(gamma, dtype=r.dtype, device=r.device) ** torch.as_tensor(h, device=r.device)
        return r + discount * beta * phi_next * not_term - beta * phi_s
    r = np.asarray(r, dtype=np.float64)
    not_term = 1.0 - np.asarray(terminal, dtype=np.float64)
    discount = float(gamma) ** np.asarray(h, dtype=np.float64)
    return r + discount * beta * np.asarray(phi_next, dtype=np.float64) * not_term - beta * np.asarray(phi_s)
