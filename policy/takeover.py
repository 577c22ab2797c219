"""Planner takeover: corrective demonstrations from the states where the policy's failed episodes went wrong.

For a failed policy episode with a trace (`policy.rollout.rollout(record=True)`), the scripted planner takes over
at step t: the env is restored exactly at t (`sim.trace.Trace.env_at`) and the planner runs from there with its
own step budget, skipping the subgoals already satisfied (`sim.trace.run_planner_from`). The training sample is
the planner's corrective window only — observations and actions from the takeover state on — never the policy's
prefix; only windows that end in success (planner-certified) are kept, as `policy.rollout.Episode`s that
`policy.train.demo_buffer` takes like any demonstration.

The takeover step t is chosen by a rule:
- `diagnosed`: where the failure starts, localized on the trusted rollout evidence the offline critic reads
  (`sim.evidence.build_evidence`) by the critic's own step rules (`localize`): the first collision,
  displacement or knock-over before the first failure event (spatial), else the first failure event (premature
  contact, missed grasp, drop, ...; execution), else the step where progress stalled.
- `random`: uniform over the episode's steps (seeded), the control for `diagnosed`.
Both are clamped to the policy's last acting step (T - 1); `align` floors t to a multiple (e.g. `CHUNK`, the
boundary where the policy chose the chunk that failed).

Measured outside the project's code (issue 19): takeover at the diagnosed step did not beat from-reset planner
demos on the failed scenes (D_t); it is an arm of `coda bench round` (`takeover_diag_mix`,
`takeover_random_mix`), not a default.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from policy.rollout import Episode
from sim.evidence import build_evidence
from sim.evidence.models import SPATIAL_EVENTS, Evidence
from sim.trace import Trace, run_planner_from

RULES = ("diagnosed", "random")
ARM_RULE = {"takeover_diag_mix": "diagnosed", "takeover_random_mix": "random"}
"""`coda bench round` arms → takeover rule"""


def localize(ev: Evidence) -> int:
    """The step where a failed rollout's failure starts, by the offline critic's evidence-step rules (spatial:
    the first collision / displacement / knock-over outside the release up to one step after the first failure
    event; execution: the first failure event; else where progress stalled)."""
    first = ev.first_failure()
    cutoff = first.step if first else ev.steps
    hits = [e for e in ev.events_of(*SPATIAL_EVENTS) if e.step <= cutoff + 1 and e.phase != "release"]
    if hits:
        return hits[0].step
    return first.step if first else ev.stalled_step


def diagnosed_step(trace: Trace) -> int:
    """`localize` on the trace's evidence."""
    return localize(build_evidence(trace))


def takeover_step(trace: Trace, rule: str, rng: np.random.Generator | None = None, align: int = 1) -> int:
    """The takeover step of a trace under `rule` (see the module doc), in 0..T-1."""
    last = max(0, trace.steps - 1)
    if rule == "diagnosed":
        t = diagnosed_step(trace)
    elif rule == "random":
        t = int((rng or np.random.default_rng()).integers(0, last + 1))
    else:
        raise ValueError(f"unknown takeover rule {rule!r}; use {' or '.join(RULES)}")
    t = min(max(int(t), 0), last)
    return t - t % max(1, int(align))


def takeover_episode(trace: Trace, t: int, budget: int | None = None, seed: int = 0) -> Episode:
    """The planner's window from step t of `trace` (restored exactly), with `budget` steps (default: the env's
    episode length) counted from t. meta: takeover_step, subgoals planned, failure, base_steps."""
    env = trace.env_at(t)
    demo = run_planner_from(env, budget)
    spec = trace.spec
    return Episode(spec.spec_hash(), spec.family, [*demo.observations, env.observe()], demo.action_array(),
                   demo.success, demo.steps, seed=seed,
                   meta={"takeover_step": t, "subgoals": demo.subgoals, "failure": demo.failure,
                         "base_steps": trace.steps, "exact": trace.exact})


def takeover_demos(episodes: Iterable[Episode], rule: str, *, solved: Iterable[str] = (), seed: int = 0,
                   budget: int | None = None, align: int = 1) -> tuple[list[Episode], dict]:
    """Takeover windows on the failed scenes: for every scene (spec hash) not in `solved` with a failed episode,
    its first failed episode's trace is taken over at the rule's step (one planner call per scene; `random`
    draws from one generator seeded by `seed`, in episode order). Returns the certified (successful) windows and
    stats: planner_calls, certified, takeover_steps, window_steps (of the certified windows)."""
    if rule not in RULES:
        raise ValueError(f"unknown takeover rule {rule!r}; use {' or '.join(RULES)}")
    rng = np.random.default_rng(seed)
    solved, seen = set(solved), set()
    out: list[Episode] = []
    steps: list[int] = []
    for ep in episodes:
        if ep.success or ep.spec_hash in solved or ep.spec_hash in seen:
            continue
        if ep.trace is None:
            raise ValueError("takeover needs the failed episodes' traces: collect them with record=True")
        seen.add(ep.spec_hash)
        t = takeover_step(ep.trace, rule, rng, align)
        steps.append(t)
        window = takeover_episode(ep.trace, t, budget, seed=ep.seed)
        if window.success:
            out.append(window)
    stats = {"planner_calls": len(seen), "certified": len(out), "takeover_steps": steps,
             "window_steps": [w.steps for w in out]}
    return out, stats


def arm_demos(arms: Sequence[str], episodes: Sequence[Episode], solved: Iterable[str], seed: int = 0
              ) -> tuple[dict[str, list[Episode]], dict[str, dict]]:
    """For the takeover arms among `arms` (`ARM_RULE`): their certified windows and stats (empty otherwise)."""
    demos, stats = {}, {}
    solved = set(solved)
    for arm in arms:
        if arm in ARM_RULE:
            demos[arm], stats[arm] = takeover_demos(episodes, ARM_RULE[arm], solved=solved, seed=seed)
    return demos, stats
