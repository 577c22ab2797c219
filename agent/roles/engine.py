"""Data engine G: writes scene programs (Python source against the SDK) and their variants.

`OfflineEngine` is a programmatic writer: seed programs from the family samplers, variants along ONE scene factor
through the variation operators (`sim.engine.variations`), targeted and control batches for a difficulty mode, and
stored generation programs applied to new scenes by role binding.
`LLMEngine` writes programs with a language model from the SDK reference (`prompts/engine.md`), the mode and
retrieved programs, and repairs them from the verifier's violations.

Both reach the simulator and the memory only through the servers (`hub`, set by `Roles.connect`): the sim
server's `sample_programs`, `vary_scene`, `scene_program`, `scene_objects` and `program_reference`, the verifier's
`verify_program`, and the memory's `bind_roles`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel

from memory_store.schema import GenerationProgram
from sim.constants import SCENE_FACTOR_OF
from sim.spec import SceneSpec

if TYPE_CHECKING:
    from agent.hub import Hub

SCENE_FACTOR = SCENE_FACTOR_OF
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
    def seed_programs(self, family: str, n: int, start_seed: int = 0, split: str = "train") -> list[EngineProgram]: ...

    def variants(self, spec: SceneSpec, factor: str, n: int, seed: int = 0, phase: str | None = None,
                 cause: str = "", roles: dict[str, str] | None = None, batch: str = "targeted",
                 operators: tuple[str, ...] | None = None) -> list[EngineProgram]: ...

    def domain_randomized(self, spec: SceneSpec, rng, ranges: dict, batch: str = "domain_rand") -> EngineProgram: ...


def sim_call(hub: Hub | None, server: str, tool: str, **args) -> Any:
    """A tool of the sim, verifier or memory server; the roles reach the simulator and the memory only this way."""
    if hub is None:
        raise RuntimeError(f"a role calls {server}.{tool}: connect the roles to the servers first "
                           "(Roles.connect(hub))")
    return hub.call(server, tool, args).data


def spec_json(spec: SceneSpec) -> dict:
    return spec.model_dump(mode="json")


def operators_for(factor: str, phase: str | None) -> tuple[str, ...]:
    if factor == "task":
        return ("resample", "fewer_goals", "reword")
    return TARGETED.get((factor, phase or ""), ("resample",))


def recreating_operators(factor: str, phase: str | None) -> tuple[str, ...]:
    """The operators of a targeted batch that recreate a diagnosed difficulty instead of taking it away: the
    phase's own operators without `resample` (a layout or attributes redrawn loses the difficulty) and without
    `fewer_goals` (an easier task); where the phase has none, those of the factor's other phases. A task
    difficulty is reworded or redrawn among the family's tasks. `Preset.targeted_operators = "recreate"`."""
    if factor == "task":
        return ("reword", "resample")
    own = [op for op in TARGETED.get((factor, phase or ""), ()) if op != "resample"]
    if own:
        return tuple(own)
    return tuple(dict.fromkeys(op for (f, _), ops in TARGETED.items() if f == factor for op in ops
                               if op != "resample"))


def program_of(made: dict, batch: str, parent: str | None = None,
               binding: dict[str, str] | None = None) -> EngineProgram:
    """An `EngineProgram` from a sim tool's scene program (`sim.engine.programs.SceneProgram` as JSON); `parent` is
    the parent scene's spec hash."""
    return EngineProgram(source=made["source"], seed=made["seed"], family=made["family"], batch=batch,
                         factor=made.get("factor"), operator=made.get("operator"), parent=parent,
                         spec_hash=made["spec_hash"], binding=binding)


@dataclass
class OfflineEngine:
    """Programmatic scene programs: family templates and one-factor variation operators (through the sim server)."""

    max_tries: int = 4
    """draws per variant before an operator gives up on a scene"""
    verify: bool = False
    """pre-check each variant with the verifier and redraw failures (a programmatic repair loop)"""
    log: list[str] = field(default_factory=list)
    hub: Hub | None = None
    """the MCP hub of the sim and verifier servers (`Roles.connect`)"""
    _operators: dict[str, list[str]] | None = field(default=None, init=False, repr=False)

    def seed_programs(self, family: str, n: int, start_seed: int = 0, split: str = "train") -> list[EngineProgram]:
        made = sim_call(self.hub, "sim", "sample_programs", family=family, n=n, start_seed=start_seed, split=split)
        return [program_of(m, "seed") for m in made]

    def variants(self, spec: SceneSpec, factor: str, n: int, seed: int = 0, phase: str | None = None,
                 cause: str = "", roles: dict[str, str] | None = None, batch: str = "targeted",
                 operators: tuple[str, ...] | None = None) -> list[EngineProgram]:
        """`n` variants of `spec` that differ from it only in scene factor `factor`."""
        ops = operators or operators_for(factor, phase)
        made = sim_call(self.hub, "sim", "vary_scene", spec=spec_json(spec), factor=factor, n=n, seed=seed,
                        operators=list(ops), roles=dict(roles or {}), max_tries=self.max_tries, verify=self.verify)
        self.log += made["log"]
        parent = spec.spec_hash()
        return [program_of(m, batch, parent=parent, binding=made["roles"]) for m in made["programs"]]

    def batches(self, spec: SceneSpec, diagnosis_factor: str, phase: str, n: int, seed: int = 0,
                operators: tuple[str, ...] | None = None, keep: bool = False,
                ) -> tuple[list[EngineProgram], list[EngineProgram]]:
        """(targeted, control): vary the diagnosed factor (with `operators` where given), and for control a
        different one; `keep` (`Preset.targeted_batches`): vary the other factor in the targeted batch, keeping the
        diagnosed factor's value, and redraw the diagnosed factor in the control batch."""
        factor = SCENE_FACTOR[diagnosis_factor]
        other = CONTROL_FACTOR[factor]
        if keep:
            targeted = self.variants(spec, other, n, seed, batch="targeted", operators=operators_for(other, None))
            control = self.variants(spec, factor, n, seed + 1, batch="control", operators=("resample",))
            return targeted, control
        ops = operators or (("rotate", "resample") if diagnosis_factor == "execution" else None)
        targeted = self.variants(spec, factor, n, seed, phase=phase, batch="targeted", operators=ops)
        control = self.variants(spec, other, n, seed + 1, batch="control", operators=operators_for(other, None))
        return targeted, control

    def apply_generation_program(self, program: GenerationProgram, spec: SceneSpec, n: int, seed: int = 0,
                                 phase: str | None = None) -> list[EngineProgram]:
        """Recreate a stored difficulty in a new scene: bind the program's roles, vary its factor."""
        bindings = sim_call(self.hub, "memory", "bind_roles", roles=list(program.roles),
                            relations=[r.model_dump(mode="json") for r in program.required_relations],
                            objects=self.scene_objects(spec))
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

    def domain_randomized(self, spec: SceneSpec, rng, ranges: dict, batch: str = "domain_rand") -> EngineProgram:
        """`spec` with a resampled layout and every object's attributes drawn from `ranges` (the sim server's
        `domain_randomize_scene`). `rng` (a numpy Generator) advances exactly as if the draws were made here."""
        made = sim_call(self.hub, "sim", "domain_randomize_scene", spec=spec_json(spec), ranges=ranges,
                        rng_state=rng.bit_generator.state)
        rng.bit_generator.state = made["rng_state"]
        return program_of(made["program"], batch, parent=spec.spec_hash())

    def operators(self, factor: str) -> list[str]:
        """Names of the variation operators of a scene factor, in their fixed order."""
        if self._operators is None:
            self._operators = sim_call(self.hub, "sim", "variation_operators")
        return list(self._operators[factor])

    def scene_objects(self, spec: SceneSpec) -> list[dict]:
        """Objects as role-binding candidates: name, role, category and the category's tags and kinds."""
        return sim_call(self.hub, "sim", "scene_objects", spec=spec_json(spec))

    def connect(self, hub: Hub) -> None:
        self.hub = hub


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


def sdk_reference(hub: Hub | None) -> dict[str, str]:
    """Placeholders of prompts/engine.md: category listing and example programs (the sim server's
    `program_reference`)."""
    return sim_call(hub, "sim", "program_reference")


def verifier_errors(hub: Hub | None, source: str, seed: int) -> list[str]:
    """The verifier's violations of a program, as repair instructions (as an environment to train on: no item
    the OOD suites hold out)."""
    report = sim_call(hub, "verifier", "verify_program", source=source, seed=seed, train_side=True)
    return [f"{c['name']}: {c['message']}" for c in report["checks"] if not c["passed"]]


class LLMEngine:
    """Scene programs written by a language model and repaired from verifier errors."""

    def __init__(self, backend, ledger=None, *, max_attempts: int = 3, temperature: float | None = None):
        self.backend, self.ledger, self.max_attempts, self.temperature = backend, ledger, max_attempts, temperature
        self.offline = OfflineEngine()

    @property
    def hub(self) -> Hub | None:
        return self.offline.hub

    def connect(self, hub: Hub) -> None:
        self.offline.connect(hub)

    def seed_programs(self, family: str, n: int, start_seed: int = 0, split: str = "train") -> list[EngineProgram]:
        """Seed scenes come from the family samplers, as for the offline engine."""
        return self.offline.seed_programs(family, n, start_seed, split)

    def domain_randomized(self, spec: SceneSpec, rng, ranges: dict, batch: str = "domain_rand") -> EngineProgram:
        """Domain randomization draws from hand-specified ranges, as for the offline engine: nothing to write."""
        return self.offline.domain_randomized(spec, rng, ranges, batch)

    def write(self, request: WriteRequest) -> EngineProgram:
        from agent.llm import ROLE_ENGINE, ask_code
        from prompts import render_prompt

        system = render_prompt("engine", **sdk_reference(self.hub))
        source = ask_code(self.backend, system=system, prompt=_write_prompt(request), role=ROLE_ENGINE,
                          ledger=self.ledger, check=lambda code: verifier_errors(self.hub, code, request.seed),
                          max_attempts=self.max_attempts, temperature=self.temperature)
        return EngineProgram(source=source, seed=request.seed, family=request.family, batch=request.batch,
                             factor=request.factor, operator="llm")

    def variants(self, spec: SceneSpec, factor: str, n: int, seed: int = 0, phase: str | None = None,
                 cause: str = "", roles: dict[str, str] | None = None, batch: str = "targeted",
                 operators: tuple[str, ...] | None = None) -> list[EngineProgram]:
        mode = f"vary the {factor} factor" + (f" to recreate a {phase}-phase difficulty: {cause}" if phase else "")
        if operators:
            mode += f" (variation wanted: {', '.join(operators)})"
        parent = sim_call(self.hub, "sim", "scene_program", spec=spec_json(spec))["source"]
        return [self.write(WriteRequest(family=spec.family, mode=mode, factor=factor, parent_program=parent,
                                        seed=spec.seed + i, batch=batch)).model_copy(
                    update={"parent": spec.spec_hash()}) for i in range(n)]

    def batches(self, spec: SceneSpec, diagnosis_factor: str, phase: str, n: int, seed: int = 0, cause: str = "",
                operators: tuple[str, ...] | None = None, keep: bool = False,
                ) -> tuple[list[EngineProgram], list[EngineProgram]]:
        """As the offline engine's; the model writes its own variation (`operators` only name the wanted kind)."""
        factor = SCENE_FACTOR[diagnosis_factor]
        other = CONTROL_FACTOR[factor]
        if keep:
            targeted = self.variants(spec, other, n, seed, phase=phase, cause=cause)
            control = self.variants(spec, factor, n, seed + 1, batch="control")
            return targeted, control
        targeted = self.variants(spec, factor, n, seed, phase=phase, cause=cause, operators=operators)
        control = self.variants(spec, other, n, seed + 1, batch="control")
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
