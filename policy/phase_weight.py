"""Phase-weighted demonstrations: a failed scene's planner demonstration, with its windows in the phase where the
policy's failure started cloned more often.

A diagnosing method knows more about a failed scene than that it failed: the offline critic's evidence says at
which step the failure starts (`policy.takeover.localize`) and so in which phase of which goal (the evidence
timeline's `PhaseSpan`, e.g. approach of `inside(apple, bowl)`). Takeover windows (the planner's demonstration from
that state on) lost to whole demonstrations; here the whole demonstration stays and the windows whose chunk overlaps
the same (goal, phase) of the demonstration's own timeline are added `extra` more times, so a uniform BC batch
draws them 1 + `extra` times as often. The demonstration's phases are read by the same phase machine as the
failure's (`sim.evidence.build_evidence` on the planner's recorded trace).

Rules (`RULES`):
- `diagnosed`: the (goal, phase) where the failed rollout's failure starts; when the demonstration has no span of
  that goal and phase, the spans of that phase under any goal; when none, nothing is weighted.
- `random`: one span of the demonstration's timeline drawn uniformly (seeded) — the control for `diagnosed`.

An arm of `coda bench round` (`dt_failed_phase_mix`, `dt_failed_randphase_mix`), not a default: in round decision
v10 the diagnosed phase taught no more than a random one (+0.6 ± 1.4 pick_place, −0.2 ± 1.6 stack;
experiments/round_decision_v10).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from policy.demos import WINDOWS
from policy.rollout import Episode
from policy.takeover import localize
from sim.constants import CHUNK
from sim.evidence import build_evidence
from sim.evidence.models import Evidence, PhaseSpan

RULES = ("diagnosed", "random")
ARM_RULE = {"dt_failed_phase_mix": "diagnosed", "dt_failed_randphase_mix": "random"}
"""`coda bench round` arms → phase rule"""


def failure_phase(ev: Evidence) -> tuple[str, str]:
    """(goal, phase) of the span holding the step where a failed rollout's failure starts."""
    t = localize(ev)
    for span in ev.timeline:
        if span.start <= t <= span.end:
            return span.goal, span.phase
    last = ev.timeline[-1] if ev.timeline else None
    return (last.goal, last.phase) if last else ("", ev.stalled_phase)


def span_windows(spans: Sequence[PhaseSpan], steps: int, chunk: int = CHUNK) -> np.ndarray:
    """(steps,) true where the window of `chunk` steps starting there overlaps one of `spans`."""
    starts = np.arange(steps)
    keep = np.zeros(steps, dtype=bool)
    for s in spans:
        keep |= (starts <= s.end) & (starts + chunk - 1 >= s.start)
    return keep


def target_spans(demo: Evidence, rule: str, failure: tuple[str, str] | None = None,
                 rng: np.random.Generator | None = None) -> list[PhaseSpan]:
    """The spans of the demonstration's timeline to weight under `rule` (see the module doc)."""
    if rule == "diagnosed":
        if failure is None:
            raise ValueError("the diagnosed rule needs the failure's (goal, phase)")
        goal, phase = failure
        return ([s for s in demo.timeline if (s.goal, s.phase) == (goal, phase)]
                or [s for s in demo.timeline if s.phase == phase])
    if rule == "random":
        if not demo.timeline:
            return []
        return [demo.timeline[int((rng or np.random.default_rng()).integers(len(demo.timeline)))]]
    raise ValueError(f"unknown phase rule {rule!r}; use {' or '.join(RULES)}")


def weighted_copies(demo: Episode, spans: Sequence[PhaseSpan], extra: int) -> list[Episode]:
    """The demonstration (without its trace) and `extra` copies keeping only the windows over `spans`."""
    plain = dataclasses.replace(demo, trace=None)
    keep = span_windows(spans, demo.steps)
    if not keep.any() or extra <= 0:
        return [plain]
    return [plain, *(dataclasses.replace(plain, meta={**plain.meta, WINDOWS: keep}) for _ in range(extra))]


def phase_weighted_demos(failed: Sequence[Episode], demos: Sequence[Episode], rule: str, extra: int = 2,
                         seed: int = 0) -> tuple[list[Episode], dict]:
    """The planner demonstrations (`demos`, recorded) of failed scenes, each phase-weighted after the first failed
    rollout of its scene (`failed`, recorded) under `rule`. Returns the episodes and counts: demonstrations,
    weighted ones, weighted windows, and the phases weighted."""
    if rule not in RULES:
        raise ValueError(f"unknown phase rule {rule!r}; use {' or '.join(RULES)}")
    first: dict[str, Episode] = {}
    for ep in failed:
        if not ep.success and ep.trace is not None:
            first.setdefault(ep.spec_hash, ep)
    rng = np.random.default_rng([11, seed])
    out: list[Episode] = []
    phases: dict[str, int] = {}
    weighted = windows = 0
    for demo in demos:
        if demo.trace is None:
            raise ValueError("phase weighting needs recorded planner demonstrations (record=True)")
        ep = first.get(demo.spec_hash)
        if ep is None:
            out.append(dataclasses.replace(demo, trace=None))
            continue
        target = failure_phase(build_evidence(ep.trace)) if rule == "diagnosed" else None
        spans = target_spans(build_evidence(demo.trace), rule, target, rng)
        copies = weighted_copies(demo, spans, extra)
        out += copies
        if len(copies) > 1:
            weighted += 1
            windows += int(copies[1].meta[WINDOWS].sum())
            for phase in {s.phase for s in spans}:
                phases[phase] = phases.get(phase, 0) + 1
    return out, {"demos": len(demos), "weighted": weighted, "weighted_windows": windows, "extra": extra,
                 "phases": dict(sorted(phases.items()))}
