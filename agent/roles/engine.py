"""Data engine G: writes scene programs (Python source against the SDK) and their variants.

`OfflineEngine` is a programmatic writer: seed programs from the family samplers (`to_program(sample_spec(...))`),
variants along ONE scene factor through the operators of `agent.roles.variations`, targeted and control batches
for a difficulty mode, and stored generation programs applied to new scenes by role binding.
`LLMEngine` writes programs with a language model from the SDK reference (`prompts/engine.md`), the mode and
retrieved programs, and repairs them from the verifier's violations.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from pydantic import BaseModel

from agent.roles.variations import OPERATORS, VariationError, movable_distractors
from memory_store.programs import bind_roles
from memory_store.schema import GenerationProgram
from sim import assets
from sim.families import sample_spec
from sim.planner import order_subgoals
from sim.scene import SceneSplit, to_program
from sim.spec import SceneSpec

SCENE_FACTOR = {"task": "task", "spatial": "layout", "attribute": "attributes", "execution": "layout"}
"""diagnosis factor δ → the scene factor a targeted batch varies (execution faults recur under new poses)"""
CONTROL_FACTOR = {"task": "layout", "layout": "attributes", "attributes": "layout"}
"""scene factor → the different factor a control batch varies"""
TARGETED = {
    ("layout", "approach"): ("crowd_grasp_side", "rotate", "resample"),
    ("layout", "grasp"): ("crowd_grasp_side", "rotate", "resample"),
    ("layout", "transport"): ("block_path", "tighten", "resample"),
    ("layout", "place"): ("tighten", "resample"),
    ("attributes", "grasp"): ("rescale", "other_instance", "resample"),
    ("attributes", "lift"): ("heavier", "slippery", "resample"),
    ("attributes", "transport"): ("heavier", "slippery", "resample"),
    ("attributes", "open"): ("stiffer_joint", "resample"),
    ("attributes", "close"): ("stiffer_joint", "resample"),
}
"""(scene factor, phase) → operators to try, most specific first"""


class EngineProgram(BaseModel):
    """One scene program the engine wrote, with its provenance."""

    source: str
    seed: int
    family: str
    batch: str = "seed"
    factor: str | None = None
    operator: str | None = None
    parent: str | None = None
    """spec hash of the parent scene"""
    spec_hash: str | None = None
    binding: dict[str, str] | None = None


class Engine(Protocol):
    def seed_programs(self, family: str, n: int, start_seed: int = 0, split: SceneSplit | None = None
                      ) -> list[EngineProgram]: ...

    def variants(self, spec: SceneSpec, factor: str, n: int, seed: int = 0, phase: str | None = None,
                 cause: str = "", roles: dict[str, str] | None = None) -> list[EngineProgram]: ...


def default_roles(spec: SceneSpec) -> dict[str, str]:
    """target (the first goal's object), dest (its destination), obstacle (a movable distractor)."""
    goals = order_subgoals(spec.task.success)
    roles: dict[str, str] = {}
    if goals:
        roles["target"] = goals[0].args[0]
        if len(goals[0].args) > 1:
            roles["dest"] = goals[0].args[1]
    movers = movable_distractors(spec, exclude=tuple(roles.values()))
    if movers:
        roles["obstacle"] = movers[0]
    return roles


def apply_operator(name: str, factor: str, spec: SceneSpec, rng, roles: dict[str, str]) -> SceneSpec:
    fn = OPERATORS[factor][name]
    params = inspect.signature(fn).parameters
    kwargs = {k: v for k, v in roles.items() if k in params}
    missing = [p for p, v in params.items() if v.default is inspect.Parameter.empty and p not in ("spec", "rng")
               and p not in kwargs and v.kind is not inspect.Parameter.VAR_KEYWORD]
    if missing:
        raise VariationError(f"operator {name} needs {missing}, the scene has no such role")
    return fn(spec, rng, **kwargs)


def operators_for(factor: str, phase: str | None) -> tuple[str, ...]:
    if factor == "task":
        return ("resample", "fewer_goals", "reword")
    return TARGETED.get((factor, phase or ""), ("resample",))


def program_of(spec: SceneSpec, batch: str, parent: SceneSpec | None = None,
               binding: dict[str, str] | None = None) -> EngineProgram:
    return EngineProgram(source=to_program(spec), seed=spec.seed, family=spec.family, batch=batch,
                         factor=spec.meta.get("varied"), operator=spec.meta.get("operator"),
                         parent=parent.spec_hash() if parent else None, spec_hash=spec.spec_hash(), binding=binding)


@dataclass
class OfflineEngine:
    """Programmatic scene programs: family templates and one-factor variation operators."""

    max_tries: int = 4
    """draws per variant before an operator gives up on a scene"""
    verify: bool = False
    """pre-check each variant with `sim.verify.verify_spec` and redraw failures (a programmatic repair loop)"""
    log: list[str] = field(default_factory=list)

    def seed_programs(self, family: str, n: int, start_seed: int = 0, split: SceneSplit | None = None
                      ) -> list[EngineProgram]:
        return [program_of(sample_spec(family, s, split), "seed") for s in range(start_seed, start_seed + n)]

    def variants(self, spec: SceneSpec, factor: str, n: int, seed: int = 0, phase: str | None = None,
                 cause: str = "", roles: dict[str, str] | None = None, batch: str = "targeted",
                 operators: tuple[str, ...] | None = None) -> list[EngineProgram]:
        """`n` variants of `spec` that differ from it only in scene factor `factor`."""
        roles = {**default_roles(spec), **(roles or {})}
        ops = operators or operators_for(factor, phase)
        out = []
        for i in range(n):
            new = self._one(spec, factor, ops, roles, np.random.default_rng([seed, i]))
            if new is not None:
                out.append(program_of(new, batch, parent=spec, binding=roles))
        return out

    def _one(self, spec, factor, ops, roles, rng) -> SceneSpec | None:
        for name in ops:
            for _ in range(self.max_tries):
                try:
                    new = apply_operator(name, factor, spec, rng, roles)
                except VariationError as exc:  # this draw or this scene does not allow it: redraw, then next op
                    self.log.append(f"{name}: {exc}")
                    continue
                if not self.verify or _verified(new):
                    return new
        return None

    def batches(self, spec: SceneSpec, diagnosis_factor: str, phase: str, n: int, seed: int = 0
                ) -> tuple[list[EngineProgram], list[EngineProgram]]:
        """(targeted, control): vary the diagnosed factor, and for control a different one."""
        factor = SCENE_FACTOR[diagnosis_factor]
        ops = ("rotate", "resample") if diagnosis_factor == "execution" else None
        targeted = self.variants(spec, factor, n, seed, phase=phase, batch="targeted", operators=ops)
        control_factor = CONTROL_FACTOR[factor]
        control = self.variants(spec, control_factor, n, seed + 1, batch="control",
                                operators=operators_for(control_factor, None))
        return targeted, control

    def apply_generation_program(self, program: GenerationProgram, spec: SceneSpec, n: int, seed: int = 0,
                                 phase: str | None = None) -> list[EngineProgram]:
        """Recreate a stored difficulty in a new scene: bind the program's roles, vary its factor."""
        bindings = bind_roles(program.roles, program.required_relations, scene_objects(spec))
        out = []
        for j, binding in enumerate(bindings):
            other = binding.get("occluder") or binding.get("distractor")
            roles = {"target": binding.get("target") or binding.get("articulated"),
                     "dest": binding.get("receptacle") or binding.get("support"), "mover": other, "obstacle": other}
            roles = {k: v for k, v in roles.items() if v}
            made = self.variants(spec, program.factor, max(1, n // max(len(bindings), 1)), seed + 7919 * j,
                                 phase=phase, roles=roles, batch="targeted")
            out += [p.model_copy(update={"binding": binding}) for p in made]
        return out


def _verified(spec: SceneSpec) -> bool:
    from sim.verify import verify_spec

    return verify_spec(spec).passed


def scene_objects(spec: SceneSpec) -> list[dict]:
    """Objects as role-binding candidates: name, role, category and the category's tags and kinds."""
    out = []
    for o in spec.task.objects:
        c = assets.get_category(o.category)
        kinds = [k for k, on in (("container", c.container), ("surface", c.surface), ("graspable", c.graspable),
                                 ("articulated", c.articulated)) if on]
        out.append({"name": o.name, "role": o.role, "category": o.category, "tags": [*c.tags, *kinds]})
    return out


# --- LLM backend --------------------------------------------------------------------------------------


@dataclass
class WriteRequest:
    """What the LLM engine is asked to write."""

    family: str
    mode: str
    """the difficulty to recreate, in words (factor, phase, cause)"""
    factor: str | None = None
    """scene factor to vary relative to the parent (None: write a new scene)"""
    parent_program: str | None = None
    examples: list[str] = field(default_factory=list)
    """retrieved generation programs / scene programs of the same mode"""
    seed: int = 0
    batch: str = "targeted"


def sdk_reference() -> dict[str, str]:
    """Placeholders of prompts/engine.md: category listing and example programs."""
    from pathlib import Path

    cats = []
    for c in assets.categories().values():
        kinds = [k for k, on in (("graspable", c.graspable), ("container", c.container), ("surface", c.surface),
                                 ("articulated", c.articulated)) if on]
        cats.append(f"{c.name} ({', '.join(kinds) or 'static'}; {c.split}; mass {c.mass_range[0]:g}-"
                    f"{c.mass_range[1]:g} kg)")
    root = Path(__file__).resolve().parents[2] / "examples" / "scenes"
    examples = [f"# {p.name}\n{p.read_text()}" for p in sorted(root.glob("*.py")) if not p.name.startswith("fault")]
    return {"categories": "; ".join(cats), "examples": "\n\n".join(examples)}


def verifier_errors(source: str, seed: int) -> list[str]:
    """The verifier's violations of a program, as repair instructions."""
    from sim.verify import verify_program

    report = verify_program(source, seed)
    return [f"{c.name}: {c.message}" for c in report.violations()]


class LLMEngine:
    """Scene programs written by a language model and repaired from verifier errors."""

    def __init__(self, backend, ledger=None, *, max_attempts: int = 3, temperature: float | None = None):
        self.backend, self.ledger, self.max_attempts, self.temperature = backend, ledger, max_attempts, temperature
        self.offline = OfflineEngine()

    def seed_programs(self, family: str, n: int, start_seed: int = 0, split: SceneSplit | None = None
                      ) -> list[EngineProgram]:
        """Seed scenes come from the family samplers, as for the offline engine."""
        return self.offline.seed_programs(family, n, start_seed, split)

    def write(self, request: WriteRequest) -> EngineProgram:
        from agent.llm import ROLE_ENGINE, ask_code
        from agent.roles.prompt_files import render_prompt

        system = render_prompt("engine", **sdk_reference())
        source = ask_code(self.backend, system=system, prompt=_write_prompt(request), role=ROLE_ENGINE,
                          ledger=self.ledger, check=lambda code: verifier_errors(code, request.seed),
                          max_attempts=self.max_attempts, temperature=self.temperature)
        return EngineProgram(source=source, seed=request.seed, family=request.family, batch=request.batch,
                             factor=request.factor, operator="llm")

    def variants(self, spec: SceneSpec, factor: str, n: int, seed: int = 0, phase: str | None = None,
                 cause: str = "", roles: dict[str, str] | None = None, batch: str = "targeted"
                 ) -> list[EngineProgram]:
        mode = f"vary the {factor} factor" + (f" to recreate a {phase}-phase difficulty: {cause}" if phase else "")
        parent = to_program(spec)
        return [self.write(WriteRequest(family=spec.family, mode=mode, factor=factor, parent_program=parent,
                                        seed=spec.seed + i, batch=batch)).model_copy(
                    update={"parent": spec.spec_hash()}) for i in range(n)]

    def batches(self, spec: SceneSpec, diagnosis_factor: str, phase: str, n: int, seed: int = 0, cause: str = ""
                ) -> tuple[list[EngineProgram], list[EngineProgram]]:
        factor = SCENE_FACTOR[diagnosis_factor]
        targeted = self.variants(spec, factor, n, seed, phase=phase, cause=cause)
        control = self.variants(spec, CONTROL_FACTOR[factor], n, seed + 1, batch="control")
        return targeted, control


def _write_prompt(r: WriteRequest) -> str:
    parts = [f"Task family: {r.family}. Difficulty mode: {r.mode}."]
    if r.parent_program:
        what = f"Change ONLY the {r.factor} factor; keep the other two factors exactly as they are." if r.factor \
            else "Write a new scene in the same spirit."
        parts.append(f"Parent scene program:\n```python\n{r.parent_program}```\n{what}")
    for i, ex in enumerate(r.examples[:3], start=1):
        parts.append(f"Retrieved program {i} of this mode:\n```python\n{ex}\n```")
    parts.append(f"The runner supplies `seed` = {r.seed}.")
    return "\n\n".join(parts)
