"""Planner demonstrations with perturbations (DART-style): off-trajectory states with the planner's corrections.

Behaviour cloning only sees states on the planner's own trajectories, so a policy that drifts a few millimetres
meets states no demonstration covers (measured on prep: its closed-loop grasp errors grow from step 2 on, and
most failed episodes lose the first object right after closing on it). Here the planner runs as usual, but with
probability `prob` per control step a burst of 1–2 steps has Gaussian noise (σ = `sigma` metres per axis) added
to the position delta that is *executed*; the recorded action stays the planner's. The planner steers along
its waypoints from the actual pose, so the following steps correct the drift.

A chunk window whose actions include a perturbed step would teach a reaction to noise that its first observation
cannot show, so `perturbed` marks those steps and `policy.train.demo_buffer` keeps only windows free of them:
their starting states may be off the clean trajectory (the point), their actions are the planner's answer.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from policy.rollout import Episode
from sim.constants import CHUNK, MAX_DPOS
from sim.env import CodaEnv
from sim.planner import run_planner
from sim.spec import SceneSpec

PERTURBED = "perturbed"
"""Episode.meta key: bool array (T,), true for control steps executed with a perturbation"""
WINDOWS = "windows"
"""Episode.meta key: bool array (T,), the chunk windows (by start step) `policy.train.demo_buffer` keeps
(`policy.phase_weight`'s weighted copies)"""


def perturbed_planner_episode(spec: SceneSpec, sigma: float = 0.015, prob: float = 0.05, seed: int = 0) -> Episode:
    """One planner episode with perturbation bursts (see module doc); meta[PERTURBED] flags the steps."""
    if sigma < 0 or not 0.0 <= prob <= 1.0:
        raise ValueError(f"sigma must be >= 0 and prob in [0, 1], got sigma={sigma}, prob={prob}")
    env = CodaEnv(spec)
    rng = np.random.default_rng(seed)
    clean_step, flags, left = env.step, [], [0]

    def step(action):
        a = np.array(action, dtype=np.float64)
        if left[0] == 0 and rng.random() < prob:
            left[0] = int(rng.integers(1, 3))
        flags.append(left[0] > 0)
        if left[0] > 0:
            a[:3] = np.clip(a[:3] + rng.normal(0.0, sigma, 3), -MAX_DPOS, MAX_DPOS)
            left[0] -= 1
        return clean_step(a)

    env.step = step  # the planner's Runner steps through this; it records the action it asked for
    demo = run_planner(env)
    obs = [*demo.observations, env.observe()]
    return Episode(spec.spec_hash(), spec.family, obs, demo.action_array(), demo.success, demo.steps,
                   meta={"subgoals": demo.subgoals, "failure": demo.failure,
                         PERTURBED: np.asarray(flags[: demo.steps], dtype=bool)})


def perturbed_planner_demos(specs: Sequence[SceneSpec], sigma: float = 0.015, prob: float = 0.05,
                            seed: int = 0) -> list[Episode]:
    """Successful perturbed planner episodes (scene k uses RNG seed `seed` + k)."""
    out = []
    for k, spec in enumerate(specs):
        ep = perturbed_planner_episode(spec, sigma, prob, seed + k)
        if ep.success:
            out.append(ep)
    return out


def clean_windows(perturbed: np.ndarray, chunk: int = CHUNK) -> np.ndarray:
    """(T,) flags of perturbed steps → (T,) true where the window of `chunk` steps starting there has none."""
    perturbed = np.asarray(perturbed, dtype=bool)
    hits = np.concatenate([[0], np.cumsum(perturbed)])
    starts = np.arange(len(perturbed))
    return hits[np.minimum(starts + chunk, len(perturbed))] - hits[starts] == 0
