"""Text2potential compiler R_hone: a validated diagnosis → a potential program (subgoals, completions, potentials,
learning tool), checked by the request's `checker` (in a run: the verifier server's `check_potential` on the
scene's rollouts and planner demonstration) and repaired from the check errors (≤ 3 attempts).

`OfflineCompiler` fills phase and cause templates (`sim.engine.potential_templates`, through the sim server's
`potential_template`): attempt 1 refines the diagnosed phase by the cause, attempt 2 drops the refinement, attempt 3
is one coarse subgoal per goal.
`LLMCompiler` asks a model for the program with `prompts/compiler.md`, the scene's symbol table, the helper
signatures and retrieved training programs, and feeds check errors back for repair.

Both reach the simulator only through the servers (`hub`, set by `Roles.connect`): the sim server's
`potential_template`, `potential_reference` and `scene_goals`.
"""

from __future__ import annotations

import ast
import io
import tokenize
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from pydantic import BaseModel, Field

from agent.llm import ROLE_COMPILER, LLMBackend, TokenLedger, ask_code
from agent.roles.critic import CriticDiagnosis
from agent.roles.engine import sim_call, spec_json
from memory_store.schema import Diagnosis, TrainingProgram
from prompts import render_prompt
from sim.constants import SUCCESS_BAND
from sim.potential_schema import PotentialReport
from sim.spec import SceneSpec

if TYPE_CHECKING:
    from agent.hub import Hub

MAX_ATTEMPTS = 3
BAND = SUCCESS_BAND
"""success band of a mode: inside it, shaped AWR; above, re-evaluation; near zero, BC or back to the engine"""


class CompileError(RuntimeError):
    """No program passed the checks within the attempt limit; `errors` holds each attempt's problems."""

    def __init__(self, message: str, errors: list[list[str]]):
        super().__init__(message)
        self.errors = errors


@dataclass
class CompileRequest:
    diagnosis: CriticDiagnosis | Diagnosis
    spec: SceneSpec
    checker: Callable[[str], PotentialReport]
    """checks a program on the scene's failed rollouts and successful demonstrations (Φ must rise along them), e.g.
    through the verifier server's `check_potential`"""
    examples: list[TrainingProgram] = field(default_factory=list)
    """retrieved training programs of the same mode"""
    success_rate: float | None = None
    """measured success of the policy on the mode, when known (routes the learning tool)"""
    has_demo: bool = False
    """a successful demonstration of the scene exists (routes the offline compiler's learning tool)"""


class CompiledProgram(BaseModel):
    source: str
    phase: str
    subgoals: list[str]
    learning_tool: str
    report: PotentialReport
    attempts: int
    attempt_errors: list[list[str]] = Field(default_factory=list)

    def completion_sources(self) -> list[str]:
        tree = ast.parse(self.source)
        funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        return [ast.get_source_segment(self.source, funcs[f"complete_{k}"]) or ""
                for k in range(1, len(self.subgoals) + 1) if f"complete_{k}" in funcs]

    def to_record(self, *, id: str, mode_id: str, run_id: str = "", round: int | None = None) -> TrainingProgram:  # noqa: A002
        return TrainingProgram(id=id, mode_id=mode_id, run_id=run_id, round=round, phase=self.phase,
                               subgoals=self.subgoals, completion_predicates=self.completion_sources(),
                               potential_code=self.source, learning_tool=self.learning_tool,
                               evidence={"checks": self.report.model_dump(exclude={"demo_phi"}),
                                         "attempts": self.attempts})


class Compiler(Protocol):
    def compile(self, request: CompileRequest) -> CompiledProgram: ...


def learning_tool_for(factor: str, success_rate: float | None, has_demo: bool) -> str:
    """Routing by measured success (SPEC §7); without a measurement: BC for new tasks with demos, else AWR."""
    if success_rate is None:
        return "bc" if factor == "task" and has_demo else "awr_shaped"
    if success_rate < BAND[0]:
        return "bc" if has_demo else "return_to_engine"
    return "awr_shaped" if success_rate <= BAND[1] else "reevaluate"


def run_checks(source: str, request: CompileRequest) -> PotentialReport:
    return request.checker(source)


def _result(source: str, request: CompileRequest, report: PotentialReport, attempts: int,
            errors: list[list[str]]) -> CompiledProgram:
    return CompiledProgram(source=source, phase=request.diagnosis.phase, subgoals=report.subgoals,
                           learning_tool=report.learning_tool or "awr_shaped", report=report, attempts=attempts,
                           attempt_errors=errors)


class OfflineCompiler:
    """Template compilation from the diagnosed phase and cause (the templates are the sim server's
    `potential_template`)."""

    def __init__(self, hub: Hub | None = None):
        self.hub = hub

    def connect(self, hub: Hub) -> None:
        self.hub = hub

    def compile(self, request: CompileRequest) -> CompiledProgram:
        d = request.diagnosis
        tool = learning_tool_for(d.factor, request.success_rate, request.has_demo)
        spec = request.spec.model_dump(mode="json")
        errors: list[list[str]] = []
        for attempt, level in enumerate((2, 1, 0)[:MAX_ATTEMPTS], start=1):
            source = sim_call(self.hub, "sim", "potential_template", spec=spec, factor=d.factor, phase=d.phase,
                              cause=d.cause, learning_tool=tool, level=level)
            report = run_checks(source, request)
            if report.ok:
                return _result(source, request, report, attempt, errors)
            errors.append(report.errors)
        raise CompileError(f"compiler: no template passed the checks in {MAX_ATTEMPTS} attempts; last errors: "
                           f"{'; '.join(errors[-1])}", errors)


def rebind_potential(source: str, compiled_on: SceneSpec, scene: SceneSpec) -> str | None:
    """A potential program compiled on one scene, with its object names bound to another scene's objects of the same
    roles (each role held by one object in both scenes): a mode's variants spread over parents whose objects differ,
    and a potential names objects. Only string literals equal to an object name change. None when an object the
    program names has no counterpart of its role in `scene`."""
    here = {o.name: o.role for o in compiled_on.task.objects}
    roles = list(here.values())
    mapping = {}
    for name, role in here.items():
        held = [o.name for o in scene.task.objects if o.role == role]
        if roles.count(role) == 1 and len(held) == 1:
            mapping[name] = held[0]
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    edits = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type != tokenize.STRING:
                continue
            try:
                value = ast.literal_eval(tok.string)
            except (ValueError, SyntaxError):
                continue
            if value in here:
                if value not in mapping:
                    return None
                a = starts[tok.start[0] - 1] + tok.start[1]
                edits.append((a, starts[tok.end[0] - 1] + tok.end[1], repr(mapping[value])))
    except (tokenize.TokenError, SyntaxError):
        return None
    for a, b, text in reversed(edits):
        source = source[:a] + text + source[b:]
    return source


# --- LLM backend --------------------------------------------------------------------------------------


def potential_reference(hub: Hub | None) -> dict[str, str]:
    """Placeholders of prompts/compiler.md: the helper signatures and first docstring lines as programs get them, and
    the learning tools (the sim server's `potential_reference`)."""
    return sim_call(hub, "sim", "potential_reference")


def symbol_table(spec: SceneSpec, goals: list[str]) -> str:
    """The scene for the prompt; `goals`: the success predicate's goals in execution order (sim: `scene_goals`)."""
    rows = [f"- {o.name}: {o.category} ({o.role})" for o in spec.task.objects]
    return (f"instruction: {spec.task.instruction!r}\nsuccess predicate ν: {spec.task.success}\n"
            f"goals in execution order: {', '.join(goals)}\nobjects:\n" + "\n".join(rows))


def compile_prompt(request: CompileRequest, goals: list[str]) -> str:
    d = request.diagnosis
    # routed as the offline compiler routes (the loop's scenes have a planner demonstration: has_demo)
    parts = [f"Diagnosis: factor {d.factor}, phase {d.phase}. Cause: {d.cause}",
             "Scene symbol table:\n" + symbol_table(request.spec, goals),
             f"Suggested learning tool: {learning_tool_for(d.factor, request.success_rate, request.has_demo)}."]
    for i, ex in enumerate(request.examples[:3], start=1):
        parts.append(f"Training program {i} of the same mode (phase {ex.phase}, improved={ex.improved}):\n"
                     f"```python\n{ex.potential_code}\n```")
    return "\n\n".join(parts)


class LLMCompiler:
    """Potential programs written by a language model, checked and repaired (at most `max_attempts` requests)."""

    def __init__(self, backend: LLMBackend, ledger: TokenLedger | None = None, *, max_attempts: int = MAX_ATTEMPTS,
                 temperature: float | None = None, hub: Hub | None = None):
        self.backend, self.ledger, self.max_attempts, self.temperature = backend, ledger, max_attempts, temperature
        self.hub = hub

    def connect(self, hub: Hub) -> None:
        self.hub = hub

    def compile(self, request: CompileRequest) -> CompiledProgram:
        reports: list[PotentialReport] = []

        def check(code: str) -> list[str]:
            reports.append(run_checks(code, request))
            return reports[-1].errors

        system = render_prompt("compiler", **potential_reference(self.hub))
        goals = sim_call(self.hub, "sim", "scene_goals", spec=spec_json(request.spec))
        source = ask_code(self.backend, system=system, prompt=compile_prompt(request, goals), role=ROLE_COMPILER,
                          ledger=self.ledger, check=check, max_attempts=self.max_attempts,
                          temperature=self.temperature)
        return _result(source, request, reports[-1], len(reports), [r.errors for r in reports[:-1]])
