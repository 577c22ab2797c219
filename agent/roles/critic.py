"""Failure critic C: explains a failed rollout as ψ = (δ factor, phase, cause, evidence).

`OfflineCritic` is rule-based over the rollout evidence and the scene's factors (no network, no key):

1. task: the instruction's template or its predicate relations were not seen in training → the phase of the
   relation left unmet at the end;
2. attribute: the object the rollout stalled on has an attribute outside the training range (mass, friction,
   scale, joint damping), or is wider than the open gripper → grasp / lift / open / close by what happened;
3. spatial: the gripper or the carried object hit another object (or pushed one over) before the failure, or
   the stalled object has a neighbour right on its grasp side, or a handle faces away from the robot;
4. execution otherwise: the phase of the first failure event (drop, missed grasp...), else where progress stalled.

With an `Intervention` (the orchestrator re-ran the same policy, deterministically, in the failed scene and in
variants that change one scene factor each), the factor is attributed by intervention instead: the factor whose
change turned the failure into success more often than the other two did; when the policy fails in every variant
alike, or succeeds in the unchanged scene too, the failure is *execution*. The rules above then only localize the
phase (the attributed factor's rule where it applies, else the execution rule).

`LLMCritic` asks a (vision-)language model for the same `CriticDiagnosis`, given the evidence text and keyframes.
Both read only the rollout's evidence (`sim.evidence.models.Evidence`, e.g. from the trainer server's
`get_rollout_evidence`), never how the scene was made.
"""

from __future__ import annotations

from typing import Literal, Protocol

from pydantic import BaseModel, Field, field_validator

from agent.llm import ROLE_CRITIC, ImageBlock, LLMBackend, TokenLedger, ask_structured
from memory_store.schema import Diagnosis
from memory_store.schema import Evidence as RecordEvidence
from prompts import render_prompt
from sim.constants import DIAGNOSIS_FACTORS, PHASES, SCENE_FACTOR_OF
from sim.evidence.models import SPATIAL_EVENTS, Event, Evidence

FactorName = Literal["task", "spatial", "attribute", "execution"]
PhaseName = Literal["approach", "grasp", "lift", "transport", "place", "release", "open", "close", "other"]
assert set(FactorName.__args__) == set(DIAGNOSIS_FACTORS) and set(PhaseName.__args__) == set(PHASES)  # noqa: S101

NEIGHBOUR_GAP = 0.02
"""a grasp-side neighbour closer than this (metres) blocks a finger"""
EVENT_PHASE = {"released_off_target": "place"}
RELATION_PHASE = {"on": "place", "inside": "place", "stacked": "place", "near": "place", "upright": "place",
                  "lifted": "lift", "grasped": "release"}


class CriticDiagnosis(BaseModel):
    """ψ as the critic states it; `to_record` turns it into a memory `Diagnosis`."""

    factor: FactorName = Field(description="δ: task, spatial, attribute or execution")
    phase: PhaseName = Field(description="trajectory phase where the failure arose")
    cause: str = Field(min_length=12, max_length=800, description="one or two sentences naming objects and numbers")
    evidence_steps: list[int] = Field(default_factory=list, description="control steps that show the failure")
    state_facts: list[str] = Field(default_factory=list, description="short facts read from the evidence")

    def to_record(self, *, id: str, scene_id: str, rollout_ids: list[str] | None = None, run_id: str = "",
                  round: int | None = None, keyframe_paths: list[str] | None = None) -> Diagnosis:  # noqa: A002
        evidence = RecordEvidence(step_indices=self.evidence_steps, state_facts=self.state_facts,
                                  keyframe_paths=list(keyframe_paths or []))
        return Diagnosis(id=id, scene_id=scene_id, rollout_ids=list(rollout_ids or []), run_id=run_id, round=round,
                         factor=self.factor, phase=self.phase, cause=self.cause, evidence=evidence)


class Intervention(BaseModel):
    """Counterfactual rollouts of the failed rollout's policy (mean action, same seed): in the unchanged scene and in
    variants that each change one scene factor (the data engine's own resampling operators)."""

    original_success: bool = Field(description="the deterministic policy succeeded in the unchanged scene")
    variants: dict[Literal["task", "layout", "attributes"], list[bool]] = Field(
        default_factory=dict, description="scene factor -> success in each verified variant that changed it")
    absent: list[Literal["task", "layout", "attributes"]] = Field(
        default_factory=list, description="scene factors with no suspect to take away (a counterfactual that did "
        "not apply: nothing crowds the task's objects, they have their own attributes): cannot be the cause")

    def rates(self) -> dict[str, float]:
        """Success rate per tested factor; a factor with nothing to take away counts as 0 (it cannot be the
        cause)."""
        out = {f: sum(v) / len(v) for f, v in self.variants.items() if v}
        return {**{f: 0.0 for f in self.absent if f not in out}, **out}

    def attributed(self) -> str | None:
        """The diagnosis factor the intervention points at, or None (execution): the scene factor whose variants
        succeeded strictly more often than every other tested factor's (and at all); none when the unchanged scene
        succeeds deterministically (the failure came from sampling noise)."""
        if self.original_success:
            return None
        rates = self.rates()
        if not rates:
            return None
        best = max(rates.values())
        top = [f for f, r in rates.items() if r == best]
        if best <= 0.0 or len(top) != 1 or len(rates) < 2:
            return None
        return DIAGNOSIS_FACTOR_OF[top[0]]

    def summary(self) -> str:
        rates = ", ".join(f"{f} {sum(v)}/{len(v)}" for f, v in self.variants.items() if v)
        nothing = f"; nothing to take away in the {' or '.join(self.absent)}" if self.absent else ""
        return (f"counterfactual rollouts (deterministic policy): unchanged scene "
                f"{'succeeded' if self.original_success else 'failed'}; successes in one-factor variants: "
                f"{rates or 'none verified'}{nothing}")


DIAGNOSIS_FACTOR_OF = {scene: diag for diag, scene in SCENE_FACTOR_OF.items() if diag != "execution"}
"""scene factor changed by an intervention -> the diagnosis factor it stands for"""


class Critic(Protocol):
    def diagnose(self, evidence: Evidence, intervention: Intervention | None = None) -> CriticDiagnosis: ...


def _failed(ev: Evidence) -> Evidence:
    if ev.success:
        raise ValueError("the rollout succeeded; the critic diagnoses failed rollouts only")
    return ev


# --- offline rules ---------------------------------------------------------------------------------


class OfflineCritic:
    """Rule-based diagnosis from rollout evidence and scene factors."""

    def diagnose(self, evidence: Evidence, intervention: Intervention | None = None) -> CriticDiagnosis:
        ev = _failed(evidence)
        if intervention is not None:
            return by_intervention(ev, intervention)
        for rule in (task_rule, attribute_rule, spatial_rule):
            found = rule(ev)
            if found is not None:
                return found
        return execution_rule(ev)


def _stalled_object(ev: Evidence) -> tuple[str, str | None, str]:
    for g in ev.goals:
        if g.goal == ev.stalled_goal:
            return g.obj, g.dest, g.kind
    g = ev.goals[0] if ev.goals else None
    return (g.obj, g.dest, g.kind) if g else ("", None, "move")


def _direction(ev: Evidence, fixture: str, atom_text: str) -> str:
    for g in ev.goals:
        if g.obj == fixture and g.open:
            lo = _param(atom_text, "min")
            return "open" if lo is not None and lo > g.open[0] else "close"
    return "close" if "max=" in atom_text and "min=" not in atom_text else "open"


def _param(atom_text: str, key: str) -> float | None:
    if f"{key}=" not in atom_text:
        return None
    return float(atom_text.split(f"{key}=")[1].split(",")[0].rstrip(")"))


def _cutoff(ev: Evidence) -> int:
    first = ev.first_failure()
    return first.step if first else ev.steps


def _fact(e: Event) -> str:
    return f"step {e.step}: {e.detail}"


def task_rule(ev: Evidence) -> CriticDiagnosis | None:
    t = ev.task
    novel = t.template_seen is False or (t.template_seen is None and not t.relations_seen)
    if not novel:
        return None
    unmet = [a for a in ev.atoms if a.final == a.negated]
    atom = unmet[0] if unmet else None
    if atom is None:
        phase = ev.stalled_phase
    elif atom.atom.startswith("open_fraction"):
        phase = _direction(ev, atom.atom.split("(")[1].split(",")[0].rstrip(")"), atom.atom)
    else:
        op = atom.atom.split("(")[0]
        phase = "release" if op == "grasped" else RELATION_PHASE.get(op, ev.stalled_phase)
    what = f"{'~' if atom and atom.negated else ''}{atom.atom}" if atom else "the goal"
    novelty = f"template {t.template} was not seen in training" if t.template_seen is False else \
        f"its relations ({', '.join(t.relations)}) were not seen in training"
    cause = (f"The instruction '{t.instruction}' asks for something new: {novelty}. The rollout ended with "
             f"{what} unmet after {ev.steps} steps, so the policy did a familiar task instead of this one.")
    return CriticDiagnosis(factor="task", phase=phase, cause=cause, evidence_steps=[ev.steps],
                           state_facts=[f"{a.atom} final {a.final}" for a in ev.atoms])


def attribute_rule(ev: Evidence) -> CriticDiagnosis | None:
    obj, _, kind = _stalled_object(ev)
    if not obj:
        return None
    facts = ev.object(obj)
    problems = list(facts.out_of_range)
    too_wide = facts.grasp_width is not None and facts.grasp_width > ev.gripper_opening - 0.005
    if too_wide:
        problems.append(f"{facts.grasp_width * 100:.1f} cm wide across the fingers, wider than the "
                        f"{ev.gripper_opening * 100:.0f} cm open gripper")
    if not problems:
        return None
    failure = ev.first_failure()
    steps = [e.step for e in ev.events if e.kind != "goal_done"][:4]
    grasped = any(e.objects[:1] == [obj] for e in ev.events_of("first_grasp"))
    if kind == "articulate":
        phase = _direction(ev, obj, ev.stalled_goal)
        track = next((g for g in ev.goals if g.obj == obj and g.open), None)
        outcome = f"its opening only went from {track.open[0]:.2f} to {max(track.open):.2f}" if track else \
            "it barely moved"
    elif too_wide or not grasped:
        phase = "grasp"
        outcome = failure.detail if failure else "the fingers never closed around it"
    else:
        phase = failure.phase if failure and failure.kind in ("lift_failed", "drop") else "lift"
        phase = "lift" if phase in ("grasp", "approach") else phase
        outcome = failure.detail if failure else "it was grasped but never lifted clear"
    cause = f"The {obj} ({facts.category}) has {'; '.join(problems)}; {outcome}."
    return CriticDiagnosis(factor="attribute", phase=phase, cause=cause, evidence_steps=steps,
                           state_facts=problems)


def spatial_rule(ev: Evidence) -> CriticDiagnosis | None:
    cutoff = _cutoff(ev)
    hits = [e for e in ev.events_of(*SPATIAL_EVENTS) if e.step <= cutoff + 1 and e.phase != "release"]
    obj, dest, kind = _stalled_object(ev)
    if hits:
        e = hits[0]
        phase = "approach" if e.phase in ("open", "close") and not ev.events_of("first_grasp") else e.phase
        tail = f" before the {ev.first_failure().kind.replace('_', ' ')}" if ev.first_failure() else ""
        cause = (f"{e.detail[0].upper()}{e.detail[1:]} at step {e.step}{tail}: the way to the {obj}"
                 f"{' and the ' + dest if dest and phase in ('transport', 'place') else ''} is obstructed.")
        return CriticDiagnosis(factor="spatial", phase=phase, cause=cause, evidence_steps=[x.step for x in hits[:4]],
                               state_facts=[_fact(x) for x in hits[:4]])
    if not obj or ev.stalled_phase not in ("approach", "grasp") or ev.events_of("first_grasp"):
        return None
    facts = ev.object(obj)
    if kind == "articulate" and facts.facing_deg is not None and facts.facing_deg > 100.0:
        cause = (f"The handle of the {obj} faces {facts.facing_deg:.0f} degrees away from the robot, so the "
                 f"gripper could not get in front of it; progress stalled in the approach at step {ev.stalled_step}.")
        return CriticDiagnosis(factor="spatial", phase="approach", cause=cause, evidence_steps=[ev.stalled_step],
                               state_facts=[f"{obj} facing {facts.facing_deg:.0f} deg"])
    tight = [n for n in facts.neighbours if n.grasp_side and n.gap < NEIGHBOUR_GAP]
    if tight:
        n = tight[0]
        cause = (f"The {n.name} stands {n.gap * 100:.1f} cm from the {obj} on the side where a finger must come "
                 f"down, so the gripper could not close around the {obj}.")
        return CriticDiagnosis(factor="spatial", phase="approach", cause=cause, evidence_steps=[ev.stalled_step],
                               state_facts=[f"{n.name} gap {n.gap:.3f} m on the grasp side of {obj}"])
    return None


def execution_rule(ev: Evidence) -> CriticDiagnosis:
    obj, _, _ = _stalled_object(ev)
    failure = ev.first_failure()
    if failure is not None:
        phase = EVENT_PHASE.get(failure.kind, failure.phase)
        if failure.kind == "lift_failed" and failure.values.get("lift_m", 1.0) < 0.005:
            phase = "grasp"  # a sound grasp on an ordinary object lifts it at least a little
        cause = (f"At step {failure.step} {failure.detail}, with no unusual attribute, obstacle or new task "
                 f"involved: the {phase} was executed poorly.")
        steps = [failure.step]
    else:
        phase = ev.stalled_phase
        cause = (f"Progress on {ev.stalled_goal or 'the task'} stalled in the {phase} at step {ev.stalled_step} "
                 f"of {ev.steps} with nothing blocking the {obj or 'gripper'}: the motion was not completed.")
        steps = [ev.stalled_step]
    return CriticDiagnosis(factor="execution", phase=phase, cause=cause, evidence_steps=steps,
                           state_facts=[_fact(e) for e in ev.events if e.kind != "goal_done"][:4])


FACTOR_RULE = {"task": task_rule, "attribute": attribute_rule, "spatial": spatial_rule}


def by_intervention(ev: Evidence, intervention: Intervention) -> CriticDiagnosis:
    """The factor from the intervention; the phase, cause and steps from the attributed factor's rule where it
    applies to the evidence, else from the execution rule (where the failure shows)."""
    factor = intervention.attributed()
    found = FACTOR_RULE[factor](ev) if factor else None
    local = found or execution_rule(ev)
    what = intervention.summary()
    if factor is None:
        cause = f"{local.cause} Changing the task, layout or attributes did not help ({what})."
    elif found is None:
        cause = (f"Changing the {SCENE_FACTOR_OF[factor]} turned the failure into success ({what}); it showed in "
                 f"the {local.phase}: {local.cause}")
    else:
        cause = f"{local.cause} Changing the {SCENE_FACTOR_OF[factor]} turned it into success ({what})."
    return CriticDiagnosis(factor=factor or "execution", phase=local.phase, cause=cause[:800],
                           evidence_steps=local.evidence_steps, state_facts=[*local.state_facts[:3], what])


# --- LLM backend -------------------------------------------------------------------------------------


def _schema_for(names: list[str]) -> type[CriticDiagnosis]:
    class SceneDiagnosis(CriticDiagnosis):
        @field_validator("cause")
        @classmethod
        def _names_an_object(cls, v: str) -> str:
            if names and not any(n.replace("_", " ") in v.replace("_", " ") for n in names):
                raise ValueError(f"the cause must name the objects involved (scene objects: {', '.join(names)})")
            return v

    SceneDiagnosis.__name__ = "CriticDiagnosis"
    return SceneDiagnosis


class LLMCritic:
    """Diagnosis by a (vision-)language model from the evidence text and keyframes, validated and repaired."""

    def __init__(self, backend: LLMBackend, ledger: TokenLedger | None = None, *, max_attempts: int = 3,
                 images: bool = True, temperature: float | None = None):
        self.backend, self.ledger = backend, ledger
        self.max_attempts, self.images, self.temperature = max_attempts, images, temperature

    def diagnose(self, evidence: Evidence, intervention: Intervention | None = None) -> CriticDiagnosis:
        """Keyframes go to the model when `images` is set and the evidence has them (`build_evidence(render=True)`);
        an intervention's outcome is stated in the text."""
        ev = _failed(evidence)
        text = ev.to_prompt_text()
        if intervention is not None:
            text += ("\n\nIntervention: " + intervention.summary() + ". A factor whose change turns the failure into "
                     "success explains it; when no change helps, the failure is one of execution.")
        prompt: list = [text]
        if self.images:
            prompt += [ImageBlock.from_bytes(k.png) for k in ev.keyframes if k.png]
        system = render_prompt("critic", factors=", ".join(DIAGNOSIS_FACTORS), phases=", ".join(PHASES))
        schema = _schema_for([o.name for o in ev.objects])
        answer = ask_structured(self.backend, system=system, prompt=prompt, schema=schema, role=ROLE_CRITIC,
                                ledger=self.ledger, max_attempts=self.max_attempts, temperature=self.temperature)
        return CriticDiagnosis.model_validate(answer.model_dump())
