"""Evaluation sets: in-distribution and the four held-out OOD suites per family, fixed by seed.

Seeds are drawn from disjoint ranges, so no evaluation scene is ever a training scene:
training uses seeds below `EVAL_SEED_BASE` or from `EVAL_SEED_END` on; suite `s` of family `f` uses
`EVAL_SEED_BASE + 100_000 * (suite index + 1) + i`.
"""

from __future__ import annotations

from sim.constants import SUITES
from sim.families import sample_spec
from sim.scene import SceneSplit
from sim.spec import SceneSpec

EVAL_SEED_BASE = 1_000_000
SPLITS = {
    "in": SceneSplit(),
    "instances": SceneSplit(instances="heldout"),
    "layouts": SceneSplit(layouts="heldout"),
    "tasks": SceneSplit(tasks="heldout"),
    "categories": SceneSplit(categories="heldout", instances="heldout"),
}
SEED_SPLIT = SceneSplit(instances="seed", categories="seed", layouts="seed")
"""the base policy's narrow training distribution (sim.assets.SEED_*; tasks: the train templates)"""
EXTRA_SUITES = {"seed": SEED_SPLIT}
"""suites evaluated only on request (not in SUITES): "seed" = held-out scenes of the base's seed distribution"""
EVAL_SEED_END = EVAL_SEED_BASE + 100_000 * (len(SUITES) + len(EXTRA_SUITES) + 1)
"""the first seed above every suite's (training may use seeds from here on)"""
PRESET_SIZES = {"quick": 10, "paper": 100}


def suite_split(suite: str) -> SceneSplit:
    split = SPLITS.get(suite) or EXTRA_SUITES.get(suite)
    if split is None:
        raise ValueError(f"unknown suite {suite!r}; valid suites: {', '.join([*SUITES, *EXTRA_SUITES])}")
    return split


def suite_seed(suite: str, i: int) -> int:
    index = SUITES.index(suite) if suite in SUITES else len(SUITES) + list(EXTRA_SUITES).index(suite)
    return EVAL_SEED_BASE + 100_000 * index + i


def suite_specs(family: str, suite: str, n: int = 10, max_tries: int = 5) -> list[SceneSpec]:
    """The first `n` scenes of a suite (deterministic). Seeds whose scene cannot be built are skipped."""
    split = suite_split(suite)
    out, i = [], 0
    while len(out) < n and i < n * max_tries:
        try:
            out.append(sample_spec(family, suite_seed(suite, i), split))
        except ValueError:
            pass
        i += 1
    return out
