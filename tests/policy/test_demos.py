"""Perturbed (DART-style) planner demonstrations and the windows behaviour cloning keeps from them."""

from __future__ import annotations

import numpy as np

from policy.demos import PERTURBED, clean_windows, perturbed_planner_episode
from policy.rollout import planner_episode
from policy.train import demo_buffer
from sim.families import sample_spec


def test_clean_windows():
    flags = np.zeros(20, dtype=bool)
    flags[[9, 10]] = True
    keep = clean_windows(flags, chunk=4)
    np.testing.assert_array_equal(np.flatnonzero(~keep), [6, 7, 8, 9, 10])  # windows covering step 9 or 10
    assert clean_windows(np.zeros(3, dtype=bool)).all() and clean_windows(np.zeros(0, dtype=bool)).shape == (0,)


def test_perturbed_episode_records_the_planners_actions_and_flags_perturbed_steps(embedder):
    spec = sample_spec("pick_place", 3)
    plain, same = planner_episode(spec), perturbed_planner_episode(spec, sigma=0.015, prob=0.0)
    np.testing.assert_array_equal(plain.actions, same.actions)  # no perturbation: the planner's episode
    assert not same.meta[PERTURBED].any() and same.meta[PERTURBED].shape == (same.steps,)

    noisy = perturbed_planner_episode(spec, sigma=0.015, prob=0.3, seed=1)
    flags = noisy.meta[PERTURBED]
    assert flags.shape == (noisy.steps,) and 0 < flags.sum() < noisy.steps
    first = int(np.argmax(flags))  # the first perturbed step moves the gripper off the planner's path
    np.testing.assert_array_equal(noisy.observations[first]["proprio"], plain.observations[first]["proprio"])
    assert not np.allclose(noisy.observations[first + 1]["proprio"][:3], plain.observations[first + 1]["proprio"][:3])

    buf = demo_buffer([noisy], embedder)
    assert len(buf) == int(clean_windows(flags).sum()) < noisy.steps
    assert len(demo_buffer([plain], embedder)) == plain.steps  # clean demos keep every window (stride 1)
