"""The checks a client asks for before any rollout: verdicts on scene programs and specs (`sim.verify`),
success-predicate checks and Text2potential program checks (`sim.potential`). `Verifier` applies them to the scenes
and traces of a run directory; it is the service the verifier MCP server wraps.

    verifier = Verifier(SceneStore(run_dir))
    verifier.verify_program(source, seed=0)            # VerifyResult (sandboxed run + every verifier check)
    verifier.check_predicate("inside(mug, bowl) & ~grasped(mug)", scene_id)   # PredicateCheck
    parse_predicate("inside(mug, bowl) & ~grasped(mug)")   # or the JSON form
    check_predicate(text, spec)                        # PredicateCheck: parses? known objects? false at start?
"""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from sim.constants import MAX_PREDICATE_ATOMS, MAX_PREDICATE_DEPTH, MAX_PREDICATE_NODES
from sim.predicates import ATOMS, Predicate
from sim.satisfy import contradiction
from sim.scene_store import SceneStore
from sim.spec import SceneSpec, check_predicate_size
from sim.verify import CheckResult, VerifyReport, scene_facts


class VerifyResult(BaseModel):
    """The verifier's verdict: every check in order, with what to fix for the failed ones."""

    passed: bool
    summary: str = Field(description="'all checks passed' or the failed checks and their messages")
    checks: list[CheckResult]
    spec_hash: str | None = Field(None, description="hash of the spec that was verified (its scene_id)")
    seconds: float


def result_of(report: VerifyReport) -> VerifyResult:
    return VerifyResult(passed=report.passed, summary=report.summary(), checks=report.checks,
                        spec_hash=report.spec_hash, seconds=round(report.seconds, 4))




# --- predicates -------------------------------------------------------------------------------------------

_PREDICATE = TypeAdapter(Predicate)


def parse_predicate(text: str) -> Predicate:
    """A predicate from its JSON form or from SDK syntax such as `inside(mug, bowl) & ~grasped(mug)`.
    Raises `ValueError` (a one-line reason) for anything else, including predicates over the size limits of a
    scene's success predicate (`sim.spec.check_predicate_size`) and non-finite parameters."""
    text = text.strip()
    try:
        if text.startswith("{"):
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValueError(f"predicate is not valid JSON: {exc}") from None
            check_predicate_size(data)
            return _PREDICATE.validate_python(data)
        try:
            tree = ast.parse(text, mode="eval")
        except SyntaxError as exc:
            where = f"at column {exc.offset}" if exc.offset else "at the end (the expression stops too early)"
            raise ValueError(f"predicate is neither JSON nor SDK syntax: {exc.msg} {where}") from None
        calls = sum(isinstance(n, ast.Call) for n in ast.walk(tree))  # ast.walk is iterative
        if calls > MAX_PREDICATE_ATOMS:
            raise ValueError(f"success predicate has more than the limit of {MAX_PREDICATE_ATOMS} atoms")
        pred = _predicate_node(tree.body, 1)
        check_predicate_size(pred)
        return pred
    except ValidationError as exc:
        raise ValueError(_one_line(exc)) from None
    except (RecursionError, MemoryError):
        raise ValueError(f"predicate is nested too deeply to parse; a success predicate has at most "
                         f"{MAX_PREDICATE_DEPTH} levels and {MAX_PREDICATE_ATOMS} atoms") from None


def _one_line(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg'].removeprefix('Value error, ')}"
                     for e in exc.errors()[:3])


_MAX_PARSE_DEPTH = MAX_PREDICATE_NODES
"""nesting of `&`, `|` and `~` in SDK syntax (a chain `a & b & c` nests one level per operator)"""


def _predicate_node(node: ast.AST, depth: int) -> Predicate:
    import sim.predicates as preds

    if depth > _MAX_PARSE_DEPTH:
        raise ValueError(f"predicate has more than {_MAX_PARSE_DEPTH} nested operators; a success predicate has at "
                         f"most {MAX_PREDICATE_ATOMS} atoms, {MAX_PREDICATE_NODES} nodes and {MAX_PREDICATE_DEPTH} levels")
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitAnd, ast.BitOr)):
        left, right = _predicate_node(node.left, depth + 1), _predicate_node(node.right, depth + 1)
        return left & right if isinstance(node.op, ast.BitAnd) else left | right
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert):
        return ~_predicate_node(node.operand, depth + 1)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ATOMS:
        args = [_symbol(a) for a in node.args]
        if any(k.arg is None for k in node.keywords):
            raise ValueError("predicate atoms take no **kwargs")
        kwargs = {k.arg: _number(node.func.id, k.arg, k.value) for k in node.keywords}
        try:
            return getattr(preds, node.func.id)(*args, **kwargs)
        except TypeError as exc:
            raise ValueError(f"{node.func.id}(...): {exc}") from None
    raise ValueError(
        f"unsupported predicate syntax at column {getattr(node, 'col_offset', 0)}: use atoms "
        f"({', '.join(ATOMS)}) over object names, combined with &, | and ~"
    )


def _shown(node: ast.AST) -> str:
    """A short rendering of a syntax node for an error message (bounded, whatever its depth)."""
    try:
        text = ast.unparse(node)
    except (RecursionError, ValueError):
        text = f"<{type(node).__name__} expression>"
    return repr(text if len(text) <= 60 else text[:57] + "...")


def _symbol(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    raise ValueError(f"predicate arguments must be object names, got {_shown(node)}")


def _number(atom: str, key: str, node: ast.AST) -> float:
    try:
        value = ast.literal_eval(node) if isinstance(node, (ast.Constant, ast.UnaryOp)) else None
    except (ValueError, TypeError, SyntaxError, RecursionError):
        value = None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{atom}(...): parameter {key} must be a number, got {_shown(node)}")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise ValueError(f"{atom}(...): parameter {key} must be a finite number, got {_shown(node)}")
    return number


class PredicateCheck(BaseModel):
    """Whether a success predicate parses, names the scene's objects, evaluates, can hold, and is false at the
    start."""

    parses: bool
    text: str | None = Field(None, description="the predicate in SDK syntax")
    predicate: dict[str, Any] | None = Field(None, description="the predicate as JSON")
    unknown_objects: list[str] = Field(default_factory=list)
    evaluable: bool = False
    value_at_start: bool | None = None
    false_at_start: bool = Field(False, description="true when the task still needs doing at the start (required)")
    terms: dict[str, bool] = Field(default_factory=dict, description="truth of every atom at the start")
    satisfiable: bool = Field(False, description="some state could make it hold (no contradiction among its atoms)")
    ok: bool = Field(False, description="parses, known objects, evaluable, satisfiable and false at start")
    message: str = ""


def check_predicate(text: str, spec: SceneSpec) -> PredicateCheck:
    """Check a predicate against a scene (never raises for a bad predicate: the report says what is wrong)."""
    from sim.env import CodaEnv
    from sim.predicates import terms

    try:
        pred = parse_predicate(text)
    except ValueError as exc:
        return PredicateCheck(parses=False, message=f"does not parse: {exc}")
    out = PredicateCheck(parses=True, text=str(pred), predicate=_PREDICATE.dump_python(pred, mode="json"))
    names = set(spec.object_names())
    out.unknown_objects = sorted(pred.objects() - names - {"table"})
    if out.unknown_objects:
        out.message = f"unknown object(s) {out.unknown_objects}; the scene's objects: {sorted(names)}"
        return out
    env = CodaEnv(spec)
    env.reset()
    try:
        value = bool(pred.evaluate(env.state))
        out.terms = terms(pred, env.state)
    except Exception as exc:  # noqa: BLE001 - evaluation failures are the report's subject
        out.message = f"does not evaluate: {type(exc).__name__}: {exc}"
        return out
    out.evaluable, out.value_at_start, out.false_at_start = True, value, not value
    never, same = scene_facts(spec, pred)
    why = contradiction(pred, never=never, same=same)
    out.satisfiable = why is None
    out.ok = out.false_at_start and out.satisfiable
    out.message = ("ok" if out.ok else "the predicate is already true at the start; the task would need no action"
                   if value else f"the predicate can never hold ({why})")
    return out


# --- Text2potential programs ------------------------------------------------------------------------------


class PotentialCheck(BaseModel):
    """The potential checker's report on a Text2potential program (`sim.potential.check_program`)."""

    ok: bool = Field(description="every check passed")
    errors: list[str] = Field(default_factory=list, description="what to fix, one item per failed check")
    report: dict[str, Any] = Field(description="the checker's full report (subgoals, timing, Φ along demos)")
    rollouts: list[str] = Field(description="rollout traces whose states were checked")
    demos: list[str] = Field(description="successful demonstrations Φ must rise along")


def check_potential(source: str, spec: SceneSpec, rollouts: dict[str, Any], demos: dict[str, Any],
                    every: int = 1) -> PotentialCheck:
    """Run the potential checks on the states of `rollouts` and `demos` ({trace name: Trace})."""
    from sim.potential import check_program, episode

    report = check_program(source, spec, [episode(t, every) for t in rollouts.values()],
                           [episode(t, every) for t in demos.values()])
    data = report.model_dump(mode="json")
    return PotentialCheck(ok=bool(data.get("ok")), errors=list(data.get("errors", [])), report=data,
                          rollouts=list(rollouts), demos=list(demos))


# --- the service ------------------------------------------------------------------------------------------


class Verifier:
    """The checks over the scenes and traces of one run directory (shared with the scene store's other users)."""

    def __init__(self, store: SceneStore):
        self.store = store

    def verify_program(self, source: str, seed: int = 0, planner: bool = False,
                       train_side: bool = False) -> VerifyResult:
        """Run a scene program in the sandbox and verify the spec it builds (`train_side`: as an environment to
        train on, no held-out items)."""
        from sim.verify import verify_program

        return result_of(verify_program(source, seed=seed, planner=planner, robot=self.store.robot,
                                        train_side=train_side))

    def verify_spec(self, spec: SceneSpec | dict, planner: bool = False, train_side: bool = False) -> VerifyResult:
        """Verify a spec (a SceneSpec or its JSON form; its validity is the first check)."""
        from sim.verify import verify_spec

        return result_of(verify_spec(spec, planner=planner, robot=self.store.robot, train_side=train_side))

    def verify_scene(self, scene_id: str, planner: bool = False, train_side: bool = False) -> VerifyResult:
        """Verify a stored scene."""
        return self.verify_spec(self.store.spec(scene_id), planner, train_side)

    def check_predicate(self, text: str, scene_id: str) -> PredicateCheck:
        """Check a predicate against a stored scene."""
        return check_predicate(text, self.store.spec(scene_id))

    def check_potential(self, source: str, scene_id: str, trace_ids: Sequence[str] = (), planner_demo: bool = True,
                        every: int = 1) -> PotentialCheck:
        """Check a Text2potential program on the states of stored traces (trainer rollouts or saved traces) and,
        with planner_demo, of the scripted planner's demonstration of the scene when it succeeds."""
        spec = self.store.spec(scene_id)
        rollouts = {t: self.store.trace(t) for t in trace_ids}
        demos = {}
        if planner_demo:
            demo = self.store.planner_trace(scene_id)
            if demo.success:
                demos[f"planner-{scene_id}"] = demo
        if not rollouts and not demos:
            raise ValueError("no states to check: pass trace_ids, or keep planner_demo (the planner did not solve "
                             "this scene)")
        return check_potential(source, spec, rollouts, demos, every)
