"""The data engine's operators as scene programs: seed programs of the family samplers, one-factor variants,
domain-randomized scenes, and the prompt material of an LLM engine. The sim server's tools `sample_programs`,
`vary_scene`, `domain_randomize_scene`, `scene_program`, `variation_operators`, `scene_objects`, `scene_goals`,
`program_reference`, `potential_reference` and `potential_template` are adapters over these functions; nothing here
is stored.

    sample_programs("stack", 2, start_seed=10)                   # [SceneProgram, SceneProgram]
    vary_scene(spec, "layout", 4, seed=0, operators=("rotate", "resample"))  # Variants
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from sim.engine import variations as V
from sim.spec import SceneSpec

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples" / "scenes"


class SceneProgram(BaseModel):
    """A scene program the engine wrote (run it with create_scene and its seed)."""

    source: str = Field(description="scene program (Python against the SDK)")
    seed: int = Field(description="the program's `seed`")
    family: str
    spec_hash: str = Field(description="id of the scene the program builds")
    factor: str | None = Field(None, description="scene factor varied from the parent, for a variant")
    operator: str | None = Field(None, description="variation operator that made it, for a variant")


class Variants(BaseModel):
    """One-factor variants of a scene."""

    programs: list[SceneProgram]
    roles: dict[str, str] = Field(description="objects the operators acted on, by role (defaults and given roles)")
    log: list[str] = Field(description="why draws did not apply (operator: reason)")


DRFactor = Annotated[float, Field(gt=0.0, le=100.0, allow_inf_nan=False)]
"""a domain-randomization factor or value: finite, in (0, 100] (the spec's attribute bounds)"""


class DRRanges(BaseModel):
    """Draw ranges of domain randomization, each (low, high) with low ≤ high (`sim.engine.variations.domain_randomize`;
    the `domain_rand` baseline's are `agent.methods.DR_RANGES`)."""

    model_config = ConfigDict(extra="forbid")
    mass: tuple[DRFactor, DRFactor] = Field(description="factors of the category's mass range (low end × low … "
                                                        "high end × high), drawn log-uniformly")
    friction: tuple[DRFactor, DRFactor] = Field(description="absolute sliding friction")
    scale: tuple[DRFactor, DRFactor] = Field(description="factors of the instance's size")
    damping: tuple[DRFactor, DRFactor] = Field(description="factors of an articulated joint's damping")

    @model_validator(mode="after")
    def _ordered(self) -> DRRanges:
        for name in ("mass", "friction", "scale", "damping"):
            low, high = getattr(self, name)
            if low > high:
                raise ValueError(f"{name}: low {low:g} is above high {high:g}")
        return self


class Randomized(BaseModel):
    """A domain-randomized scene and the generator state after its draws."""

    program: SceneProgram
    rng_state: dict[str, Any] = Field(description="numpy bit-generator state after the draws (pass it on)")


class SceneObject(BaseModel):
    name: str
    role: str
    category: str
    tags: list[str] = Field(description="the category's tags and kinds (container, surface, graspable, articulated)")


def program_of(spec: SceneSpec) -> SceneProgram:
    from sim.scene import program_spec, to_program

    return SceneProgram(source=to_program(spec), seed=spec.seed, family=spec.family,
                        spec_hash=program_spec(spec).spec_hash(),
                        factor=spec.meta.get("varied"), operator=spec.meta.get("operator"))


def sample_programs(family: str, n: int, start_seed: int = 0, split: str = "train") -> list[SceneProgram]:
    """Programs of the family's seed scenes for seeds start_seed .. start_seed + n - 1."""
    from sim.families import sample_spec
    from sim.scene_store import scene_split

    sp = None if split == "train" else scene_split(split)
    return [program_of(sample_spec(family, s, sp)) for s in range(start_seed, start_seed + n)]


def vary_scene(spec: SceneSpec, factor: str, n: int, seed: int = 0, operators: tuple[str, ...] = ("resample",),
               roles: dict[str, str] | None = None, max_tries: int = 4, verify: bool = False,
               max_verifications: int | None = None) -> Variants:
    """`sim.engine.variations.vary` with the scene's default roles overridden by `roles` (with `verify`, at most
    `max_verifications` verifier runs in all)."""
    valid = list(V.operator_table(factor))
    unknown = [o for o in operators if o not in valid]
    if unknown:
        raise ValueError(f"unknown {factor} operators {unknown}; valid: {', '.join(valid)}")
    repeated = sorted({o for o in operators if operators.count(o) > 1})
    if repeated:
        raise ValueError(f"operators: {repeated} listed more than once; give each once (max_tries sets its draws)")
    role_names = V.role_names()
    bad_roles = sorted(set(roles or {}) - set(role_names))
    if bad_roles:
        raise ValueError(f"roles: unknown role(s) {bad_roles}; valid roles: {', '.join(role_names)}")
    names = spec.object_names()
    bad_objects = {k: v for k, v in (roles or {}).items() if v not in names}
    if bad_objects:
        raise ValueError(f"roles: {bad_objects} name(s) no object of the scene; its objects: {', '.join(names)}")
    bound = {**V.default_roles(spec), **(roles or {})}
    log: list[str] = []
    made = V.vary(spec, factor, n, seed, tuple(operators), bound, max_tries, verify, log, max_verifications)
    return Variants(programs=[program_of(s) for s in made], roles=bound, log=log)


def domain_randomize_scene(spec: SceneSpec, ranges: dict, rng_state: dict[str, Any]) -> Randomized:
    """`spec` domain-randomized (`sim.engine.variations.domain_randomize`) with the numpy generator whose
    bit-generator state is `rng_state`; returns the program and the state after the draws."""
    rng = np.random.default_rng()
    try:
        rng.bit_generator.state = rng_state
    except (TypeError, ValueError, KeyError, OverflowError) as exc:
        raise ValueError(f"rng_state is not a numpy PCG64 bit-generator state ({type(exc).__name__}: {exc}); pass "
                         "np.random.default_rng(seed).bit_generator.state or the previous call's rng_state") from None
    if rng.bit_generator.state["state"]["inc"] % 2 == 0:  # numpy takes it, but an even increment can make a stream
        # that never changes (inc 0, state 0: every draw 0), and bounded draws then retry forever inside numpy
        raise ValueError("rng_state.state.inc must be odd, as every PCG64 increment numpy makes is; pass "
                         "np.random.default_rng(seed).bit_generator.state or the previous call's rng_state")
    ranges = DRRanges.model_validate(ranges).model_dump()
    new = V.domain_randomize(spec, rng, ranges)
    return Randomized(program=program_of(new), rng_state=rng.bit_generator.state)


def variation_operators() -> dict[str, list[str]]:
    """Operator names per scene factor, in their fixed order."""
    return {factor: list(ops) for factor, ops in V.OPERATORS.items()}


def scene_objects(spec: SceneSpec) -> list[SceneObject]:
    return [SceneObject(**o) for o in V.scene_objects(spec)]


def scene_goals(spec: SceneSpec) -> list[str]:
    """The goal atoms of the scene's success predicate in the order the scripted planner achieves them
    (`sim.planner.order_subgoals`), e.g. ["inside(mug, bowl)"]."""
    from sim.planner import order_subgoals

    return [str(a) for a in order_subgoals(spec.task.success)]


def potential_template(spec: SceneSpec, factor: str, phase: str, cause: str, learning_tool: str, level: int) -> str:
    """The offline compiler's potential program for a diagnosis (`sim.engine.potential_templates.write_program`,
    refined by the scene objects the cause names)."""
    from sim.engine.potential_templates import cause_objects, write_program

    named = cause_objects(cause, spec.object_names())
    return write_program(spec, factor=factor, phase=phase, cause=cause, tool=learning_tool, level=level,
                         cause_objects=named)


def program_reference() -> dict[str, str]:
    """An LLM engine's prompt material: every asset category in one line, and the example scene programs."""
    from sim import assets

    cats = []
    for c in assets.categories().values():
        kinds = [k for k, on in (("graspable", c.graspable), ("container", c.container), ("surface", c.surface),
                                 ("articulated", c.articulated)) if on]
        cats.append(f"{c.name} ({', '.join(kinds) or 'static'}; {c.split}; mass {c.mass_range[0]:g}-"
                    f"{c.mass_range[1]:g} kg)")
    examples = [f"# {p.name}\n{p.read_text()}" for p in sorted(EXAMPLES_DIR.glob("*.py"))
                if not p.name.startswith("fault")]
    return {"categories": "; ".join(cats), "examples": "\n\n".join(examples)}


def potential_reference() -> dict[str, str]:
    """An LLM compiler's prompt material: the helpers potential programs may call, one line each with its signature
    and first docstring line as programs get them (`sim.program_helpers`: plain floats, bools, tuples and Vec / Mat
    instead of numpy arrays), and the learning tools a program may route to."""
    import inspect

    from sim import program_helpers
    from sim.potential import helper_names
    from sim.potential_schema import LEARNING_TOOLS

    lines = []
    for name in sorted(helper_names()):
        fn = getattr(program_helpers, name)
        doc = (inspect.getdoc(fn) or "").splitlines()
        lines.append(f"- h.{name}{inspect.signature(fn)}" + (f": {doc[0]}" if doc else ""))
    return {"helpers": "\n".join(lines), "tools": ", ".join(LEARNING_TOOLS)}
