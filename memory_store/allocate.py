"""Allocation of a round's generation budget over difficulty modes, and success-band membership.

Budget split (B units): novel = ⌊ε_novel·B + ½⌋, replay = ⌊ε_replay·B + ½⌋ (round half up, so the split
does not depend on banker's rounding), targeted = B − novel − replay. On B = 64 with ε = 0.15 / 0.10:
10 novel, 6 replay, 48 targeted. A share with nobody to receive it (no eligible modes, no modes to replay)
is added to the novel share.

Mode score (UCB on learning progress and hardness), for a targeted-eligible mode j:

    score_j = max(0, w_j + (1 − p̂_j) + c · sqrt(ln(1 + N) / (1 + n_j)))

with w_j the importance (learning progress), p̂_j the hardness (success rate; 0.5 while unmeasured), n_j
the visits and N = Σ n_j over eligible modes. The targeted share is split proportionally to the scores with
largest-remainder rounding: every mode gets ⌊share⌋, the leftover units go to the largest fractional parts,
ties broken by mode id (ascending). All-zero scores split evenly.

Eligibility. Targeted: status ≠ refuted and inside the success band (p̂_j ∈ [lo, hi] when measured, the
`in_band` flag otherwise). Replay (regression detection): status ≠ refuted, visited before (n_j > 0) and not
targeted-eligible (e.g. mastered); replay units are spread evenly, least-visited first (ties by id; a given
`rng` shuffles the order instead).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from memory_store.schema import GenerationProgram, HistoryEvent, Mode
from sim.constants import EPS_NOVEL, EPS_REPLAY
from sim.constants import SUCCESS_BAND as DEFAULT_BAND

UCB_C = 0.5
"""exploration weight of the UCB bonus"""
UNMEASURED_HARDNESS = 0.5


def round_half_up(x: float) -> int:
    return math.floor(x + 0.5 + 1e-9)


def split_budget(
    budget: int, eps_novel: float = EPS_NOVEL, eps_replay: float = EPS_REPLAY
) -> tuple[int, int, int]:
    """(novel, replay, targeted) units of a budget."""
    if budget < 0:
        raise ValueError(f"budget must be ≥ 0, got {budget}")
    if eps_novel < 0 or eps_replay < 0 or eps_novel + eps_replay > 1:
        raise ValueError(f"need eps_novel, eps_replay ≥ 0 and their sum ≤ 1, got {eps_novel}, {eps_replay}")
    novel = round_half_up(eps_novel * budget)
    replay = min(round_half_up(eps_replay * budget), budget - novel)
    return novel, replay, budget - novel - replay


def in_band(success: float, band: tuple[float, float] = DEFAULT_BAND) -> bool:
    lo, hi = band
    return lo <= success <= hi


def update_band(
    obj: Mode | GenerationProgram,
    success: float,
    band: tuple[float, float] = DEFAULT_BAND,
    round_: int | None = None,
) -> bool:
    """Enter the band when `success` ∈ [lo, hi], leave when outside; returns whether membership changed.

    Modes use `in_band` (and log band_enter / band_exit in their history); generation programs use
    `in_pool` and record `success_on_variants`."""
    inside = in_band(success, band)
    if isinstance(obj, GenerationProgram):
        obj.success_on_variants = success
        changed = obj.in_pool != inside
        obj.in_pool = inside
        return changed
    changed = obj.in_band != inside
    obj.in_band = inside
    if changed:
        event = "band_enter" if inside else "band_exit"
        obj.history.append(
            HistoryEvent(round=round_, event=event, values={"success": success, "band": list(band)})
        )
    return changed


def targeted_eligible(mode: Mode, band: tuple[float, float] = DEFAULT_BAND) -> bool:
    if mode.status == "refuted":
        return False
    return in_band(mode.hardness, band) if mode.hardness is not None else mode.in_band


def replay_eligible(mode: Mode, band: tuple[float, float] = DEFAULT_BAND) -> bool:
    return mode.status != "refuted" and mode.visits > 0 and not targeted_eligible(mode, band)


def mode_score(mode: Mode, total_visits: int, c: float = UCB_C) -> float:
    """score_j = max(0, w_j + (1 − p̂_j) + c·sqrt(ln(1 + N) / (1 + n_j)))."""
    hardness = mode.hardness if mode.hardness is not None else UNMEASURED_HARDNESS
    bonus = c * math.sqrt(math.log(1 + total_visits) / (1 + mode.visits))
    return max(0.0, mode.importance + (1.0 - hardness) + bonus)


def largest_remainder(total: int, weights: dict[str, float]) -> dict[str, int]:
    """Integer shares of `total` proportional to weights; leftovers to the largest remainders, ties by key."""
    if not weights:
        return {}
    keys = sorted(weights)
    w = np.array([max(0.0, weights[k]) for k in keys], dtype=np.float64)
    w = np.ones_like(w) if w.sum() <= 0 else w
    quotas = total * w / w.sum()
    shares = np.floor(quotas + 1e-9).astype(int)
    leftover = total - int(shares.sum())
    order = sorted(range(len(keys)), key=lambda i: (-(quotas[i] - shares[i]), keys[i]))
    for i in order[:leftover]:
        shares[i] += 1
    return {k: int(s) for k, s in zip(keys, shares, strict=True)}


@dataclass(frozen=True)
class Allocation:
    budget: int
    novel: int
    replay: int
    targeted: int
    per_mode: dict[str, int] = field(default_factory=dict)
    """targeted units per mode id"""
    replay_per_mode: dict[str, int] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "budget": self.budget,
            "novel": self.novel,
            "replay": self.replay,
            "targeted": self.targeted,
            "per_mode": dict(self.per_mode),
            "replay_per_mode": dict(self.replay_per_mode),
            "scores": dict(self.scores),
        }


def allocate(
    modes: Sequence[Mode],
    budget: int,
    *,
    eps_novel: float = EPS_NOVEL,
    eps_replay: float = EPS_REPLAY,
    c: float = UCB_C,
    band: tuple[float, float] = DEFAULT_BAND,
    rng: np.random.Generator | None = None,
) -> Allocation:
    """Split `budget` into novel, replay and per-mode targeted units (see the module docstring)."""
    novel, replay, targeted = split_budget(budget, eps_novel, eps_replay)
    eligible = [m for m in modes if targeted_eligible(m, band)]
    total_visits = sum(m.visits for m in eligible)
    scores = {m.id: mode_score(m, total_visits, c) for m in eligible}
    if eligible:
        per_mode = largest_remainder(targeted, scores)
    else:
        per_mode, novel, targeted = {}, novel + targeted, 0

    replayable = sorted((m for m in modes if replay_eligible(m, band)), key=lambda m: (m.visits, m.id))
    if rng is not None:
        replayable = [replayable[i] for i in rng.permutation(len(replayable))]
    replay_per_mode: dict[str, int] = {}
    if replayable:
        base, extra = divmod(replay, len(replayable))
        for i, m in enumerate(replayable):
            units = base + (1 if i < extra else 0)
            if units:
                replay_per_mode[m.id] = units
    else:
        novel, replay = novel + replay, 0
    return Allocation(budget, novel, replay, targeted, per_mode, replay_per_mode, scores)


def allocate_evenly(mode_ids: Sequence[str], budget: int, *, eps_novel: float = EPS_NOVEL) -> Allocation:
    """Allocation without generation memory: the novel share of `allocate` (no replay) and the targeted units
    split evenly over the given modes (the first ones in id order get the leftover units; modes that get no unit
    are left out). No modes: the whole budget is novel."""
    modes = sorted(set(mode_ids))
    novel, _, targeted = split_budget(budget, eps_novel, 0.0) if modes else (budget, 0, 0)
    shares = largest_remainder(targeted, dict.fromkeys(modes, 1.0))
    return Allocation(budget, novel, 0, targeted, {m: k for m, k in shares.items() if k})
