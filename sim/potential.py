"""Text2potential runtime: staged potentials Φ(s) from untrusted programs, evaluated in the sandbox, and checks.

A potential program is Python source (imports: `math`, `numpy`, `sim.helpers`) that defines

    SUBGOALS = ["reach the mug", "grasp the mug", ...]        # ordered, K of them
    def complete_1(state) -> bool: ...                        # one per subgoal
    def potential_1(state) -> float: ...                      # in [0, 1], one per subgoal
    LEARNING_TOOL = "awr_shaped"                              # bc | awr_shaped | reevaluate | return_to_engine

On a simulator state s the staged potential is Φ(s) = (k + φ_{k+1}(s)) / K, where k counts the leading
subgoals whose completion predicates hold (cumulative: subgoal k counts only if 1..k-1 do) and the task
predicate ν stays the final condition (k = K needs ν; then Φ = 1). The program's functions get data, not live
objects: `state` is an opaque `sim.program_helpers.SceneState` view that only the helpers facade (what
`from sim import helpers` gives a program, see `sim.program.PROGRAM_MODULES`) can read, and the helpers return
plain floats, bools, tuples and `Vec`s (`program_state`).

Programs never run in this process: `evaluate_in_sandbox` is the trusted sandbox finalizer that rebuilds the
env from the spec, restores each supplied state (qpos, qvel) and evaluates Φ twice per state, timing it.
`check_program` runs the checks every emitted program must pass: syntax and allowed names; on the supplied
rollout states Φ finite, in [0, 1], deterministic, under `MAX_MS_PER_STATE`; and Φ rising along successful
demonstrations (Spearman rank correlation with time ≥ `MIN_RANK_CORRELATION`).
"""

from __future__ import annotations

import ast
import inspect
import math
import time
from typing import Any

import numpy as np

from sim.potential_schema import LEARNING_TOOLS, PotentialReport  # noqa: F401 - re-exported

MAX_SUBGOALS = 12
MAX_SUBGOAL_CHARS = 200
"""characters of one subgoal description (printable, one line)"""
_FIXED_NAMES = ("SUBGOALS", "LEARNING_TOOL")
"""bound once, to a literal: the checker and the report use the literal, so the program may not re-bind them"""
MAX_MS_PER_STATE = 1.0
MAX_PROBLEMS = 20
"""static problems reported per program (the sandbox's own check stops at as many); the rest are counted"""
MIN_RANK_CORRELATION = 0.5
FINALIZER = "sim.potential:evaluate_in_sandbox"
SANDBOX_PRELOAD = ("sim.env", "sim.program", "sim.program_helpers", "sim.program_numpy")
"""imported in the sandbox's zygote with the finalizer (children cannot import): what `evaluate_in_sandbox` imports
lazily, and the facades programs get for `sim`, `sim.helpers` and `numpy` (`sim.program.PROGRAM_MODULES`)"""
ALLOWED_IMPORTS = ("math", "numpy", "sim.helpers")


class PotentialError(ValueError):
    """A potential program failed its checks; the message lists what to fix."""


def helper_names() -> frozenset[str]:
    """Public functions of `sim.helpers` a program may call."""
    from sim import helpers

    return frozenset(n for n, v in vars(helpers).items()
                     if inspect.isfunction(v) and v.__module__ == helpers.__name__ and not n.startswith("_"))


# --- static checks ----------------------------------------------------------------------------------------


def static_problems(source: str) -> list[str]:
    """Syntax, sandbox allow-list, the required names, and only `sim.helpers` from the SDK."""
    from sim.sandbox import check_source

    problems = [e.message for e in check_source(source)]
    if problems:
        return problems
    tree = ast.parse(source)
    helpers, sim_aliases, helper_aliases, unknown = helper_names(), set(), set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name not in ALLOWED_IMPORTS and a.name != "sim":
                    problems.append(f"line {node.lineno}: import {a.name} is not allowed; import only "
                                    f"{', '.join(ALLOWED_IMPORTS)} (e.g. `from sim import helpers as h`)")
                elif a.name == "sim.helpers":
                    (helper_aliases if a.asname else sim_aliases).add(a.asname or "sim")
                elif a.name == "sim":
                    sim_aliases.add(a.asname or "sim")
        elif isinstance(node, ast.ImportFrom):
            if node.module == "sim":
                for a in node.names:
                    if a.name != "helpers":
                        problems.append(f"line {node.lineno}: from sim import {a.name} is not allowed; "
                                        "use `from sim import helpers as h`")
                    helper_aliases.add(a.asname or a.name)
            elif node.module == "sim.helpers":
                for a in node.names:
                    if a.name not in helpers and a.name != "SceneState" and a.name not in unknown:
                        problems.append(f"line {node.lineno}: sim.helpers has no function {a.name!r}")
                        unknown.add(a.name)
            elif node.module not in ALLOWED_IMPORTS:
                problems.append(f"line {node.lineno}: from {node.module} import ... is not allowed; import only "
                                f"{', '.join(ALLOWED_IMPORTS)}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id in helper_aliases and node.attr not in helpers and node.attr != "SceneState":
                if node.attr not in unknown:  # each unknown name once, the helpers listed once below
                    problems.append(f"line {node.lineno}: sim.helpers has no function {node.attr!r}")
                unknown.add(node.attr)
            elif node.value.id in sim_aliases and node.attr != "helpers":
                problems.append(f"line {node.lineno}: only sim.helpers may be used from the SDK, not sim.{node.attr}")
    if unknown:  # the helpers listed once, right after the first unknown name
        first = next(i for i, p in enumerate(problems) if "sim.helpers has no function" in p)
        problems.insert(first + 1, f"sim.helpers provides: {', '.join(sorted(helpers))}")
    return _capped(list(dict.fromkeys(problems + _structure_problems(tree))))


def _capped(problems: list[str]) -> list[str]:
    """At most MAX_PROBLEMS problems, the rest counted in a last line."""
    if len(problems) <= MAX_PROBLEMS:
        return problems
    return problems[: MAX_PROBLEMS - 1] + [f"... and {len(problems) - MAX_PROBLEMS + 1} more problems"]


def _literal(tree: ast.Module, name: str) -> Any:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            try:
                return ast.literal_eval(node.value)
            except (ValueError, TypeError, RecursionError, MemoryError):  # e.g. {[]: 1}: a literal, not a value
                return ValueError
    return None


def _structure_problems(tree: ast.Module) -> list[str]:
    problems = []
    subgoals, tool = _literal(tree, "SUBGOALS"), _literal(tree, "LEARNING_TOOL")
    if not (isinstance(subgoals, list) and subgoals and all(isinstance(s, str) and s for s in subgoals)):
        return ["define SUBGOALS as a literal, non-empty list of subgoal descriptions (strings)"]
    if len(subgoals) > MAX_SUBGOALS:
        problems.append(f"SUBGOALS has {len(subgoals)} entries; use at most {MAX_SUBGOALS}")
        subgoals = subgoals[:MAX_SUBGOALS]
    for k, text in enumerate(subgoals, 1):
        if len(text) > MAX_SUBGOAL_CHARS or not text.isprintable():
            problems.append(f"SUBGOALS[{k - 1}] must be one printable line of at most {MAX_SUBGOAL_CHARS} characters "
                            f"(got {len(text)} characters)")
    if tool not in LEARNING_TOOLS:
        shown = repr(tool) if isinstance(tool, str) and len(tool) <= 40 else f"a {type(tool).__name__}"
        problems.append(f"define LEARNING_TOOL as one of {', '.join(LEARNING_TOOLS)} (got {shown})")
    problems += _rebinding_problems(tree)
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    for k in range(1, len(subgoals) + 1):
        for stem in ("complete", "potential"):
            f = funcs.get(f"{stem}_{k}")
            if f is None:
                problems.append(f"define {stem}_{k}(state) for subgoal {k} ({subgoals[k - 1]!r})")
            elif len(f.args.args) != 1 or f.args.vararg or f.args.kwarg:
                problems.append(f"{stem}_{k} must take exactly one argument: the state")
    return problems


def _rebinding_problems(tree: ast.Module) -> list[str]:
    """SUBGOALS and LEARNING_TOOL are bound exactly once, by their top-level literal assignment: any other binding
    (a second assignment, `+=`, `del`, a loop or `with` target, `global` in a function, an import alias) is refused.
    Changes the static check cannot see (e.g. `SUBGOALS.append(...)` at run time) are caught by `check_program`,
    which compares the values the program ran with against the literals."""
    problems = []
    allowed = set()  # the target of each name's literal assignment (the first top-level one, as `_literal` reads)
    for name in _FIXED_NAMES:
        allowed |= {id(t) for t in next((n.targets for n in tree.body if isinstance(n, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in n.targets)), []) if isinstance(t, ast.Name)}
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names = [] if id(node) in allowed else [node.id]
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)):
            names = [node.name] if node.name else []
        elif isinstance(node, ast.MatchMapping):
            names = [node.rest] if node.rest else []
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names = list(node.names)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.asname or a.name.partition(".")[0] for a in node.names]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, ast.arg):
            names = [node.arg]
        for name in names:
            if name in _FIXED_NAMES:
                problems.append(f"line {getattr(node, 'lineno', '?')}: {name} is bound again; define it once, as a "
                                "literal at the top level, and never re-assign or change it")
    return problems


# --- the runtime (runs inside the sandbox) ------------------------------------------------------------------


def staged(namespace: dict, state, success, task_state=None, K: int | None = None) -> tuple[float, int, float]:
    """(Φ, k, φ_{k+1}) of a loaded program's namespace on one state: the program's functions get `state` (the
    view, `program_state`), the task predicate ν is evaluated on `task_state` (the live state; default `state`).
    `K`: the number of subgoals, fixed before the program's functions first run (default: len(SUBGOALS) now)."""
    K = len(namespace["SUBGOALS"]) if K is None else K
    k = 0
    while k < K and bool(namespace[f"complete_{k + 1}"](state)):
        k += 1
    if k == K and not success.evaluate(state if task_state is None else task_state):
        k = K - 1  # the task predicate stays the final completion condition
    if k == K:
        return 1.0, K, 1.0
    phi = float(namespace[f"potential_{k + 1}"](state))
    return (k + phi) / K, k, phi


def _number(x: float) -> float | None:
    return x if math.isfinite(x) else None


def evaluate_in_sandbox(namespace: dict, inputs: dict) -> dict:
    """Trusted sandbox finalizer: Φ (twice), k, φ and milliseconds for every supplied state."""
    from sim.env import CodaEnv
    from sim.spec import SceneSpec

    env = CodaEnv(SceneSpec.model_validate(inputs["spec"]))
    env.reset()
    success = env.spec.task.success
    # what the program defined, read once before any of its functions runs; Φ uses this K throughout, and the
    # values after the run are reported too, so the trusted side refuses a program that changed them meanwhile
    subgoals = [str(s) for s in namespace["SUBGOALS"]][: MAX_SUBGOALS + 1]
    K = len(subgoals)
    out: dict[str, Any] = {"K": K, "subgoals": subgoals, "learning_tool": namespace.get("LEARNING_TOOL"),
                           "episodes": []}
    for ep in inputs["episodes"]:
        env.state.initial_bottom = dict(ep["initial_bottom"])
        state = program_state(namespace, env.state)
        rows = {"phi": [], "phi_again": [], "k": [], "phi_next": [], "ms": []}
        for qpos, qvel in zip(ep["qpos"], ep["qvel"], strict=True):
            env.data.qpos[:] = qpos
            env.data.qvel[:] = qvel
            _forward(env)
            t0 = time.perf_counter()
            phi, k, nxt = staged(namespace, state, success, env.state, K)
            again = staged(namespace, state, success, env.state, K)[0]
            rows["ms"].append((time.perf_counter() - t0) * 500.0)
            rows["phi"].append(_number(phi))
            rows["phi_again"].append(_number(again))
            rows["k"].append(k)
            rows["phi_next"].append(_number(nxt))
        out["episodes"].append(rows)
    after = namespace.get("SUBGOALS")
    out["unchanged"] = (isinstance(after, (list, tuple)) and [str(a) for a in after[: K + 1]] == subgoals
                        and namespace.get("LEARNING_TOOL") == out["learning_tool"])
    return out


def program_state(namespace: dict, state):
    """What a program's complete_k / potential_k are called with: the opaque `sim.program_helpers.SceneState`
    view of `state` (the facade helpers unwrap it) instead of the live state with its MuJoCo model, data and spec.
    Programs import the facades (`sim.program.PROGRAM_MODULES`), so the view is all they can use."""
    from sim import program_helpers

    return program_helpers._view(state)


def _forward(env) -> None:
    import mujoco

    mujoco.mj_forward(env.model, env.data)
    env.state._contact_key = None


# --- checks -----------------------------------------------------------------------------------------------


def episode(trace, every: int = 1) -> dict:
    """The states of a `sim.trace.Trace` as a sandbox input episode (JSON-able)."""
    idx = list(range(0, trace.steps + 1, every))
    if idx[-1] != trace.steps:
        idx.append(trace.steps)
    return {"initial_bottom": dict(trace.initial_bottom),
            "qpos": trace.qpos[idx].tolist(), "qvel": trace.qvel[idx].tolist()}


def spearman(values, times=None) -> float:
    """Spearman rank correlation of `values` with time (average ranks for ties); 0 for constant input."""
    v = np.asarray(values, dtype=np.float64)
    t = np.arange(len(v), dtype=np.float64) if times is None else np.asarray(times, dtype=np.float64)
    rv, rt = _ranks(v), _ranks(t)
    sv, st = rv.std(), rt.std()
    if len(v) < 2 or sv == 0 or st == 0:
        return 0.0
    return float(((rv - rv.mean()) * (rt - rt.mean())).mean() / (sv * st))


def _ranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x), dtype=np.float64)
    ranks[order] = np.arange(len(x), dtype=np.float64)
    for value in np.unique(x):
        tie = x == value
        if tie.sum() > 1:
            ranks[tie] = ranks[tie].mean()
    return ranks


def run_program(source: str, spec, episodes: list[dict], *, pool=None, limits=None):
    """Evaluate a program on episodes in the sandbox; returns the `SandboxResult`."""
    from sim.sandbox import run_untrusted

    inputs = {"spec": spec.model_dump(mode="json"), "episodes": episodes}
    kwargs = {"limits": limits} if limits is not None else {}
    return run_untrusted(source, finalizer=FINALIZER, inputs=inputs, pool=pool, **kwargs)


def check_program(source: str, spec, rollouts: list[dict], demos: list[dict], *, pool=None,
                  limits=None) -> PotentialReport:
    """All checks on one program: static, runtime on `rollouts` + `demos` episodes, rise along `demos`."""
    errors = static_problems(source)
    if errors:
        return PotentialReport(ok=False, errors=errors)
    result = run_program(source, spec, rollouts + demos, pool=pool, limits=limits)
    if not result.ok:
        e = result.error
        return PotentialReport(ok=False, errors=[f"{e.kind}: {e.message}" + (f"\n{e.detail}" if e.detail else "")])
    value = result.value
    tree = ast.parse(source)
    subgoals, tool = _literal(tree, "SUBGOALS"), _literal(tree, "LEARNING_TOOL")
    if not isinstance(value, dict) or value.get("unchanged") is not True or (
            value.get("subgoals"), value.get("learning_tool"), value.get("K")) != (subgoals, tool, len(subgoals)):
        # the report carries the literals, never what the program bound at run time
        return PotentialReport(ok=False, subgoals=subgoals, learning_tool=tool, errors=[
            "SUBGOALS or LEARNING_TOOL changed while the program ran (re-bound or mutated after the literal "
            "assignment); define both once, as literals, and never change them"])
    eps = value["episodes"]
    report = PotentialReport(ok=False, subgoals=subgoals, learning_tool=tool,
                             states_checked=sum(len(e["phi"]) for e in eps))
    report.errors = _value_problems(eps, value["subgoals"])
    ms = [m for e in eps for m in e["ms"]]
    report.ms_per_state, report.max_ms = (float(np.mean(ms)), float(np.max(ms))) if ms else (None, None)
    if report.ms_per_state is not None and report.ms_per_state > MAX_MS_PER_STATE:
        report.errors.append(f"Φ takes {report.ms_per_state:.2f} ms per state on average; keep it under "
                             f"{MAX_MS_PER_STATE:g} ms (fewer helper calls, no loops over many objects)")
    if not report.errors:
        for e in eps[len(rollouts):]:
            rho = spearman(e["phi"])
            report.rank_correlation.append(round(rho, 4))
            report.demo_phi.append([round(x, 4) for x in e["phi"]])
            if rho < MIN_RANK_CORRELATION:
                report.errors.append(_rise_problem(rho, e, value["subgoals"]))
    report.ok = not report.errors
    return report


def _value_problems(eps: list[dict], subgoals: list[str]) -> list[str]:
    problems = []
    for e in eps:
        for i, (phi, again, k, nxt) in enumerate(zip(e["phi"], e["phi_again"], e["k"], e["phi_next"], strict=True)):
            name = f"potential_{k + 1}" if k < len(subgoals) else "Φ"
            if phi is None or nxt is None:
                problems.append(f"{name} returned a non-finite value (NaN or inf) on state {i}")
            elif not 0.0 <= nxt <= 1.0:
                problems.append(f"{name} returned {nxt:.4g} on state {i}; potentials must lie in [0, 1] "
                                "(clip them, e.g. min(1.0, max(0.0, x)))")
            elif again != phi:
                problems.append(f"Φ is not deterministic: state {i} gave {phi!r} then {again!r}")
            if problems:
                return problems
    return problems


def _rise_problem(rho: float, e: dict, subgoals: list[str]) -> str:
    phi, ks = e["phi"], e["k"]
    drops = [i for i in range(1, len(phi)) if phi[i] < phi[i - 1] - 0.05]
    where = f"; Φ falls at states {drops[:5]} (subgoals completed there: {[ks[i] for i in drops[:5]]})" if drops else ""
    return (f"Φ does not rise along a successful demonstration (Spearman rank correlation with time {rho:.2f} < "
            f"{MIN_RANK_CORRELATION}){where}. Make completions stay true once reached (cumulative) and each "
            f"potential increase as its subgoal ({', '.join(subgoals)}) progresses.")


def potentials(source: str, spec, trace, every: int = 1, *, pool=None) -> list[float]:
    """Φ at every `every`-th state of a trace (raises PotentialError when the program fails to run)."""
    return phi_values(source, spec, [episode(trace, every)], pool=pool)[0]


def phi_values(source: str, spec, episodes: list[dict], *, pool=None) -> list[list[float]]:
    """Φ, clipped to [0, 1], at the states of each sandbox input episode (`episode`, or any dict with
    initial_bottom / qpos / qvel); raises PotentialError when the program fails or returns a non-finite value."""
    result = run_program(source, spec, episodes, pool=pool)
    if not result.ok:
        raise PotentialError(f"{result.error.kind}: {result.error.message}")
    if result.value.get("unchanged") is not True:
        raise PotentialError("SUBGOALS or LEARNING_TOOL changed while the program ran; define both once, as "
                             "literals, and never change them")
    out = []
    for ep in result.value["episodes"]:
        if any(p is None for p in ep["phi"]):
            raise PotentialError("the program returned non-finite potentials")
        out.append([min(1.0, max(0.0, p)) for p in ep["phi"]])
    return out


def state_potential(source: str, spec, *, pool=None):
    """Φ of one scene as a function of simulator states: f(initial_bottom, [(qpos, qvel), ...]) -> [Φ, ...], one
    sandbox run per call (`policy.branch` values the states where shaped branch rollouts are cut with it)."""

    def phi(initial_bottom: dict, states) -> list[float]:
        if not states:
            return []
        ep = {"initial_bottom": dict(initial_bottom), "qpos": [np.asarray(q).tolist() for q, _ in states],
              "qvel": [np.asarray(v).tolist() for _, v in states]}
        return phi_values(source, spec, [ep], pool=pool)[0]

    return phi
