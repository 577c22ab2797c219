"""Diagnosis potentials for the shaped chunk critic: Φ local to the phase where a failed rollout went wrong.

For each scene with a failed rollout, the failing point (goal, phase) is read from the trusted rollout evidence
by the offline critic's step rules (`policy.takeover.localize`: the first spatial event or failure event, else
where progress stalled), and the offline compiler's template writes the scene's potential program local to that
phase (`sim.engine.potential_templates.write_program(local=True)`: subgoals through the failing phase of the
failing goal, flat after it). Φ is evaluated in the sandbox at every state of the scene's recorded rollouts.
scope "task" is the control: the task's staged progress (all subgoals, no diagnosis) on every scene.

The critic is trained on r + γ^h βΦ(s') − βΦ(s) (`policy.awr.td_targets`) and the policy's advantages come from
that critic (`TrainConfig.advantage = "q"`: A = Q_Φ(s, a) − mean_j Q_Φ(s, a_j), equal to the unshaped advantage
for every policy), so any Φ leaves the optimal policy unchanged; the potential only decides where the value
signal is dense.
"""

from __future__ import annotations

from collections.abc import Sequence

from policy.rollout import Episode
from policy.takeover import localize
from sim.engine.potential_templates import write_program
from sim.evidence import build_evidence
from sim.potential import episode, phi_values
from sim.trace import Trace

SCOPES = ("phase", "task")


def failing_point(trace: Trace) -> tuple[int, str]:
    """(goal index in planner order, phase) where a failed rollout's failure starts."""
    ev = build_evidence(trace)
    step = localize(ev)
    goals = [g.goal for g in ev.goals]
    for span in ev.timeline:
        if span.start <= step <= span.end:
            return (goals.index(span.goal) if span.goal in goals else 0), span.phase
    return (goals.index(ev.stalled_goal) if ev.stalled_goal in goals else 0), ev.stalled_phase


def scene_program(trace: Trace, scope: str = "phase") -> str:
    """The potential program of the trace's scene: local to the trace's failing phase, or the task's staged one."""
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {', '.join(SCOPES)}, got {scope!r}")
    if scope == "task":
        return write_program(trace.spec, factor="task", phase="other", cause="", tool="awr_shaped", level=1)
    goal, phase = failing_point(trace)
    return write_program(trace.spec, factor="execution", phase=phase, cause="", tool="awr_shaped", level=2,
                         local=True, goal=goal)


def episode_potentials(episodes: Sequence[Episode], scope: str = "phase") -> tuple[dict[int, list[float]], dict]:
    """Φ at every observation of each episode (keyed by `id(episode)`), one program per scene: from the scene's
    first failed episode (scope "phase"; scenes without a failure get none, i.e. Φ = 0) or from the task (scope
    "task", every scene). Episodes need traces (`rollout(record=True)`). Returns (potentials, stats)."""
    by_scene: dict[str, list[Episode]] = {}
    for ep in episodes:
        if ep.trace is None:
            raise ValueError("diagnosis potentials need the episodes' traces: collect them with record=True")
        by_scene.setdefault(ep.spec_hash, []).append(ep)
    out: dict[int, list[float]] = {}
    phases: dict[str, int] = {}
    for eps in by_scene.values():
        failed = [ep for ep in eps if not ep.success]
        if scope == "phase" and not failed:
            continue
        source = scene_program((failed or eps)[0].trace, scope)
        if scope == "phase":
            phase = failing_point(failed[0].trace)[1]
            phases[phase] = phases.get(phase, 0) + 1
        values = phi_values(source, eps[0].trace.spec, [episode(ep.trace) for ep in eps])
        for ep, phi in zip(eps, values, strict=True):
            if len(phi) != ep.steps + 1:
                raise ValueError(f"potential gave {len(phi)} values for an episode of {ep.steps} steps")
            out[id(ep)] = phi
    return out, {"shaped_scenes": sum(1 for eps in by_scene.values() if id(eps[0]) in out),
                 "shaped_episodes": len(out), "failing_phases": phases}
