"""The program-facing SDK (`sim.program`, `sim.program_helpers`, `sim.program_numpy`): programs get data, not live
objects, and get the same specs and potential values as through the trusted API.

Programs here run in-process with an `__import__` that maps module names through `PROGRAM_MODULES`, as the
sandbox's guarded import does once it is wired to the mapping; the specs they give are compared with
`tests/sim/fixtures/program_specs.json`, captured through the trusted `sim.scene` API before the facade existed.
"""

from __future__ import annotations

import builtins
import dataclasses
import importlib
import json
import math
import types

import numpy as np
import pydantic
import pytest

from sim import helpers as real_helpers
from sim import program, program_helpers, program_numpy
from sim.families import sample_spec
from sim.program import PROGRAM_MODULES, Mat, Random, SceneError, Vec
from sim.scene import finalize_program, to_program
from tests.sim import program_cases

FACADES = (program, program_helpers, program_numpy)


def facade_import(name, globals=None, locals=None, fromlist=(), level=0):  # noqa: A002
    """What a program's `import` gives once the sandbox maps names through PROGRAM_MODULES."""
    if level:
        raise ImportError("relative imports are not allowed")
    if name in PROGRAM_MODULES:
        if fromlist or "." not in name:
            return importlib.import_module(PROGRAM_MODULES[name])
        return importlib.import_module(PROGRAM_MODULES[name.partition(".")[0]])  # `import sim.helpers` binds sim
    if name == "math":
        return math
    raise ImportError(f"import of {name!r} is not allowed")


def program_namespace(source: str, seed: int = 0) -> dict:
    table = dict(vars(builtins), __import__=facade_import)
    namespace = {"__name__": "__program__", "__builtins__": table, "seed": seed}
    exec(compile(source, "<program>", "exec"), namespace)  # trusted test programs; the facade is what is tested
    return namespace


def run_facade(source: str, seed: int) -> dict:
    program_cases.seed_rngs(seed)
    try:
        namespace = program_namespace(source, seed)
        return {"spec": finalize_program(namespace, {"globals": {"seed": seed}})}
    except Exception as exc:  # noqa: BLE001
        return {"error": f"{type(exc).__name__}: {exc}"}


FIXTURE = json.loads(program_cases.FIXTURE.read_text())
SOURCES = {key: (source, seed) for key, source, seed in program_cases.cases()}


def _case(key: str) -> tuple[str, int, dict]:
    expected = FIXTURE[key]
    source, seed = SOURCES[key] if key in SOURCES else (expected["source"], expected["seed"])
    return source, seed, {k: v for k, v in expected.items() if k in ("spec", "error")}


def test_fixture_covers_every_case():
    assert set(SOURCES) <= set(FIXTURE)
    assert any(k.startswith("to_program:") for k in FIXTURE)


# --- same program and seed, same spec ----------------------------------------------------------------------


@pytest.mark.parametrize("key", sorted(FIXTURE))
def test_facade_gives_the_spec_the_trusted_api_gave(key):
    source, seed, expected = _case(key)
    assert run_facade(source, seed) == expected


@pytest.mark.parametrize("key", ["example:pick_place.py:0", "rng:1", "numpy:4", "features:3", "to_program:stack:3",
                                 "corpus:scene_nan_mass.py"])
def test_trusted_api_is_unchanged(key):
    source, seed, expected = _case(key)
    assert program_cases.run_trusted(source, seed) == expected


@pytest.mark.parametrize(("family", "seed"), [("pick_place", 11), ("articulated", 5), ("prep", 8)])
def test_to_program_output_runs_on_the_facade(family, seed):
    spec = sample_spec(family, seed)
    source = to_program(spec)
    assert run_facade(source, seed) == program_cases.run_trusted(source, seed)
    rebuilt = run_facade(source, seed)["spec"]
    assert rebuilt["task"] == spec.model_dump(mode="json")["task"]


def test_finalizer_takes_the_facade_scene_and_refuses_anything_else():
    namespace = program_namespace((program_cases.EXAMPLES / "pick_place.py").read_text(), 3)
    assert type(namespace["scene"]) is program.Scene
    spec = finalize_program(namespace, {})
    assert spec["family"] == "pick_place" and spec["seed"] == 3
    with pytest.raises(SceneError, match="must be a sim.Scene, got dict"):
        finalize_program({"scene": {"family": "pick_place"}}, {})
    with pytest.raises(SceneError, match="did not define `scene`"):
        finalize_program({}, {})


# --- the mapping ------------------------------------------------------------------------------------------


def test_program_modules_mapping():
    assert dict(PROGRAM_MODULES) == {"sim": "sim.program", "sim.helpers": "sim.program_helpers",
                                     "numpy": "sim.program_numpy"}
    with pytest.raises(TypeError):
        PROGRAM_MODULES["numpy"] = "numpy"  # programs can read sim.PROGRAM_MODULES; they cannot change it
    for target in PROGRAM_MODULES.values():
        assert importlib.import_module(target) in FACADES
    assert program.helpers is program_helpers
    from sim import potential, scene

    for finalizer_module in (scene, potential):  # the sandbox's children cannot import: the zygote must have them
        assert set(PROGRAM_MODULES.values()) <= set(finalizer_module.SANDBOX_PRELOAD)
    namespace = program_namespace("import sim.helpers\nimport sim\nfrom sim import helpers as h\nimport numpy as np\n")
    assert namespace["sim"] is program and namespace["h"] is program_helpers and namespace["np"] is program_numpy


# --- no live objects ---------------------------------------------------------------------------------------

_MODEL_METHODS = ("parse_raw", "parse_obj", "parse_file", "model_validate", "model_validate_json", "model_construct")


def _problem(value) -> str | None:
    """Why a program must not hold `value`, or None."""
    if isinstance(value, types.ModuleType):
        return None if value in FACADES else f"module {value.__name__}"
    if isinstance(value, pydantic.BaseModel) or (isinstance(value, type) and issubclass(value, pydantic.BaseModel)):
        return "pydantic model"
    for name in _MODEL_METHODS:
        try:
            getattr(value, name)
        except Exception:  # noqa: BLE001, S112
            continue
        return f"has {name}"
    if isinstance(value, (np.ndarray, np.generic, np.dtype)) or (
            isinstance(value, type) and issubclass(value, (np.ndarray, np.generic))):
        return "numpy array, scalar or dtype"
    top = getattr(type(value), "__module__", "").partition(".")[0]
    if top in ("numpy", "mujoco", "pydantic", "pydantic_core"):
        return f"{type(value).__module__}.{type(value).__name__} object"
    if isinstance(value, type) and value.__module__.partition(".")[0] in ("numpy", "mujoco", "pydantic"):
        return f"class {value.__module__}.{value.__name__}"
    if dataclasses.is_dataclass(value):
        return "dataclass"
    if isinstance(value, (types.FrameType, types.CodeType, types.TracebackType)):
        return "interpreter internals"
    return None


_LEAVES = (str, bytes, int, float, bool, type(None))


def assert_plain(root, label: str = "root", depth: int = 5) -> int:
    """Walk the public attributes (and container items, and the classes `type()` gives) reachable from `root`;
    fail on any live object. Returns how many values were checked."""
    seen: set[int] = set()
    stack = [(root, label, 0)]
    while stack:
        value, path, level = stack.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        problem = _problem(value)
        assert problem is None, f"{path}: {problem} ({value!r:.80})"
        if level >= depth or isinstance(value, _LEAVES):
            continue
        children = []
        if isinstance(value, dict):
            children += [(f"{path}[{k!r}]", v) for k, v in value.items()] + [(f"{path}.key", k) for k in value]
        elif isinstance(value, (list, tuple, set, frozenset)):
            children += [(f"{path}[{i}]", v) for i, v in enumerate(value)]
        for name in dir(value):
            if name.startswith("_"):
                continue
            try:
                child = getattr(value, name)
            except Exception:  # noqa: BLE001, S112
                continue
            children.append((f"{path}.{name}", child))
        if not isinstance(value, type) and type(value).__module__.startswith("sim."):
            children.append((f"type({path})", type(value)))
        stack += [(child, p, level + 1) for p, child in children]
    return len(seen)


def test_the_walk_finds_what_the_trusted_api_hands_out():
    from sim import predicates
    from sim import scene as trusted
    from sim.env import CodaEnv

    env = CodaEnv(sample_spec("pick_place", 0))
    for value in (trusted.Scene("pick_place"), sample_spec("prep", 0), predicates.inside("a", "b"),
                  trusted.SceneSplit(), np.zeros(2), env.state, real_helpers):
        with pytest.raises(AssertionError):
            assert_plain(value)


def test_the_facade_modules_hold_no_live_objects():
    for module in FACADES:
        assert assert_plain(module, module.__name__) > 20


def _built_scene():
    return program_namespace(program_cases.FEATURES_PROGRAM, 0)["scene"]


def test_scene_handles_predicates_and_rng_are_plain_data():
    scene = _built_scene()
    rng = scene.rng
    values = {
        "scene": scene, "objects": scene.objects(), "split": scene.split, "meta": scene.meta, "rng": rng,
        "place": program.place("mug", xy=(0.4, 0.1), near="bowl", yaw=0.2),
        "predicate": (program.on("a", "b") & ~program.grasped("a")) | program.lifted("a", height=0.1),
        "atoms": [f("a", "b") for f in (program.on, program.inside, program.near, program.stacked)]
        + [f("a") for f in (program.grasped, program.lifted, program.open_fraction, program.upright)],
        "draws": [rng.integers(5), rng.integers(0, 9, size=3), rng.random(), rng.random(size=(2, 2)),
                  rng.uniform(0.0, 1.0), rng.uniform(size=2), rng.normal(), rng.normal(size=2),
                  rng.standard_normal(), rng.choice(["a", "b"]), rng.choice(4, size=2, replace=False),
                  rng.choice([(1, 2), (3, 4)]), rng.permutation(3), rng.permutation(["x", "y"])],
        "random": Random(3), "vec": Vec([1.0, 2.0]) * 2, "mat": Mat([[1.0, 0.0], [0.0, 1.0]]).T,
    }
    assert assert_plain(values) > 50
    assert type(rng.integers(5)) is int and type(rng.uniform()) is float
    assert type(rng.choice(["a", "b"])) is str and isinstance(rng.uniform(size=2), Vec)


def test_predicates_convert_to_the_trusted_predicate():
    from pydantic import TypeAdapter

    from sim import predicates
    from sim.predicates import Predicate

    node = (program.inside("mug", "bowl") & ~program.grasped("mug")) | program.near("mug", "plate", dist=0.2)
    trusted = (predicates.inside("mug", "bowl") & ~predicates.grasped("mug")) | predicates.near("mug", "plate", dist=0.2)
    assert str(node) == str(trusted) == "(inside(mug, bowl) & ~grasped(mug)) | near(mug, plate, dist=0.2)"
    assert TypeAdapter(Predicate).validate_python(program._predicate_data(node)) == trusted
    assert node == (program.inside("mug", "bowl") & ~program.grasped("mug")) | program.near("mug", "plate", dist=0.2)
    assert node.objects() == {"mug", "bowl", "plate"}
    with pytest.raises(AttributeError):
        node.op = "and"
    lifted = program.lifted("mug", height=0.2)
    lifted.params["height"] = 9.0  # a copy
    assert lifted.params == {"height": 0.2}


def test_programs_cannot_subclass_or_rewrite_sdk_objects():
    for base in ("Scene", "ObjectHandle", "SceneSplit", "PlaceRequest", "Random", "Vec", "Mat"):
        with pytest.raises(TypeError, match="cannot be subclassed"):
            program_namespace(f"from sim import {base}\n\nclass Mine({base}):\n    pass\n")
    with pytest.raises(TypeError, match="cannot be subclassed"):
        program_namespace("from sim import on\n\nclass Mine(type(on('a', 'b'))):\n    x: 'int' = 1\n")
    with pytest.raises(TypeError, match="cannot be subclassed"):
        program_namespace("from sim import helpers as h\n\nclass Mine(h.SceneState):\n    pass\n")
    scene = _built_scene()
    with pytest.raises(AttributeError):
        scene.family = "stack"
    with pytest.raises(AttributeError):
        scene.objects()[0].name = "other"
    with pytest.raises(AttributeError):
        scene.rng.seed = 3
    scene.meta = {"replaced": True}  # meta stays assignable, as before
    assert scene.meta == {"replaced": True}


def test_scene_errors_stay_scene_errors():
    namespace = program_namespace("from sim import Scene\nscene = Scene(family='pick_place', seed=0)\n")
    scene = namespace["scene"]
    mug = scene.add_object("mug", role="target")
    with pytest.raises(SceneError, match="add_object"):  # a pydantic ValidationError before, with its methods
        scene.add_object("bowl", name="Bowl!")
    with pytest.raises(SceneError, match="success must be a predicate"):
        scene.set_task("lift the mug", success="lifted(mug)")
    with pytest.raises(SceneError, match="set_layout takes place"):
        scene.set_layout(("mug", 0.4, 0.1))
    with pytest.raises(SceneError, match="named colours"):
        scene.set_attributes(mug, rgba="ultraviolet")
    with pytest.raises(SceneError, match="mass=-1.0: Input should be greater than 0"):
        scene.set_attributes(mug, mass=-1.0)
    with pytest.raises(SceneError, match="must be 'train' or 'heldout'"):
        program.SceneSplit(instances="test")


def test_shared_sub_predicates_are_refused_before_they_are_copied():
    source = ("from sim import Scene, grasped, inside\n"
              "scene = Scene(family='pick_place', seed=0)\n"
              "mug, bowl = scene.add_object('mug', role='target'), scene.add_object('bowl', role='receptacle')\n"
              "p = inside(mug, bowl)\n"
              "for _ in range(200):\n"
              "    p = (p & ~grasped(mug)) | (p & ~grasped(mug))\n"  # 2**200 nodes as a tree, 600 objects
              "scene.set_task('put the mug in the bowl', success=p)\n")
    with pytest.raises(SceneError, match="limit of"):
        program_namespace(source)
    many = source.replace("for _ in range(200):\n    p = (p & ~grasped(mug)) | (p & ~grasped(mug))\n",
                          "for _ in range(64):\n    p = p & inside(mug, bowl)\n")
    with pytest.raises(SceneError, match="more than the limit of 64 atoms"):
        program_namespace(many)


# --- random numbers ----------------------------------------------------------------------------------------


def test_random_draws_are_numpys_draws_as_python_values():
    ours, theirs = Random(7), np.random.default_rng(7)
    assert ours.integers(10) == int(theirs.integers(10))
    assert ours.integers(2, 9, size=4) == tuple(theirs.integers(2, 9, size=4).tolist())
    assert ours.uniform(-1.0, 2.0) == float(theirs.uniform(-1.0, 2.0))
    assert ours.normal(0.0, 0.5, size=3) == tuple(theirs.normal(0.0, 0.5, size=3).tolist())
    assert ours.random() == float(theirs.random())
    assert ours.standard_normal() == float(theirs.standard_normal())
    names = ["a", "b", "c", "d"]
    assert ours.choice(names) == str(theirs.choice(names))
    assert ours.choice(names, size=3, replace=False) == theirs.choice(names, size=3, replace=False).tolist()
    assert ours.permutation(names) == theirs.permutation(names).tolist()
    mine, other = list(names), list(names)
    ours.shuffle(mine)
    theirs.shuffle(other)
    assert mine == other
    with pytest.raises(TypeError, match="takes a list"):
        ours.shuffle((1, 2))
    with pytest.raises(AttributeError, match="it offers integers, random"):
        ours.bit_generator  # noqa: B018


def test_numpy_global_random_functions_follow_the_sandbox_seed():
    np.random.seed(4)
    expected = [float(np.random.uniform(0, 1)), np.random.choice(["a", "b", "c"], size=2).tolist(),
                int(np.random.randint(0, 10))]
    np.random.seed(4)
    r = program_numpy.random
    assert [r.uniform(0, 1), r.choice(["a", "b", "c"], size=2), r.randint(0, 10)] == expected


# --- numpy facade ------------------------------------------------------------------------------------------

V, W = [0.3, -0.4, 1.2], (1.0, 2.0, 0.5)
M = [[1.0, 2.0], [3.0, 4.0]]
NUMPY_CALLS = {
    **{name: (V,) for name in ("abs", "absolute", "fabs", "sign", "square", "exp", "sin", "cos", "tan", "arctan",
                               "sinh", "cosh", "tanh", "deg2rad", "rad2deg", "radians", "degrees", "floor", "ceil",
                               "rint", "trunc", "isfinite", "isnan", "isinf", "sum", "prod", "mean", "median",
                               "std", "var", "min", "max", "amin", "amax", "argmin", "argmax", "all", "any",
                               "cumsum", "array", "asarray")},
    **{name: ([0.1, 0.4, 0.9],) for name in ("sqrt", "log", "log2", "log10", "arcsin", "arccos")},
    **{name: (V, W) for name in ("arctan2", "hypot", "minimum", "maximum", "power", "mod", "isclose", "allclose",
                                 "dot", "cross")},
    "clip": (V, 0.0, 1.0), "round": (V, 1), "around": (V,), "interp": (0.5, [0.0, 1.0], [10.0, 20.0]),
    "zeros": (3,), "ones": ((2, 2),), "full": (2, 0.5), "linspace": (0.0, 1.0, 5), "arange": (0.0, 1.0, 0.25),
}


def test_every_numpy_facade_function_returns_plain_values():
    callables = {n for n in program_numpy.__all__ if callable(getattr(program_numpy, n)) and n not in (
        "float64", "int64")}
    assert callables - {"linalg", "random"} == set(NUMPY_CALLS), "add new facade functions to NUMPY_CALLS"
    results = {name: getattr(program_numpy, name)(*args) for name, args in NUMPY_CALLS.items()}
    results["norm"] = program_numpy.linalg.norm(V)
    results["norm_axis"] = program_numpy.linalg.norm(M, axis=1)
    results["mean_axis"] = program_numpy.mean(M, axis=0)
    results["matrix"] = program_numpy.array(M)
    random = program_numpy.random
    results["random"] = [random.default_rng(1), random.random(), random.rand(2), random.randn(2, 2),
                         random.uniform(size=2), random.normal(), random.standard_normal(3), random.randint(4),
                         random.choice([1.5, 2.5]), random.permutation(3)]
    assert assert_plain(results) > 100
    for name, args in NUMPY_CALLS.items():  # the same numbers numpy gives
        got, want = results[name], getattr(np, name)(*[np.asarray(a) if isinstance(a, list) else a for a in args])
        assert np.array_equal(np.asarray(got), want, equal_nan=True), name
    assert results["norm"] == float(np.linalg.norm(V)) and type(results["norm"]) is float
    assert isinstance(results["matrix"], Mat) and results["matrix"][1, 0] == 3.0


def test_numpy_facade_refuses_everything_else():
    for name in ("ndarray", "frombuffer", "dtype", "load", "lib", "core", "ctypeslib", "memmap", "fromfile",
                 "empty", "ndarray", "vectorize", "object_", "save", "testing", "where"):
        with pytest.raises(AttributeError, match="it offers: pi, e, inf"):
            getattr(program_numpy, name)
    with pytest.raises(AttributeError, match="only norm"):
        program_numpy.linalg.inv  # noqa: B018
    with pytest.raises(AttributeError, match="np.random in programs has no 'bit_generator'"):
        program_numpy.random.bit_generator  # noqa: B018
    with pytest.raises(TypeError, match="lists/tuples of numbers"):
        program_numpy.sqrt(["a", "b"])
    with pytest.raises(TypeError, match="lists/tuples of numbers"):
        program_numpy.array([object()])
    with pytest.raises(TypeError, match="dtype must be float, int or bool"):
        program_numpy.array([1.0], dtype=object)
    with pytest.raises(TypeError, match="lists/tuples of numbers"):
        program_numpy.array(2**80)  # numpy would make an object array of it


@pytest.mark.parametrize(("call", "kind"), [
    (lambda: program_numpy.ones(10**13), MemoryError),  # numpy's _ArrayMemoryError has .dtype
    (lambda: program_numpy.mean([1.0, 2.0], axis=3), ValueError),  # numpy's AxisError
    (lambda: program_numpy.random.uniform(size=-1), ValueError),
    (lambda: Random(1).choice([], size=2), ValueError),
    (lambda: Vec([1.0, 2.0]) @ Vec([1.0, 2.0, 3.0]), ValueError),
])
def test_numpy_errors_reach_programs_as_builtin_exceptions(call, kind):
    with pytest.raises(kind) as info:
        call()
    assert type(info.value).__module__ == "builtins" and info.value.args
    assert_plain(info.value)


def test_vectors_do_numpy_arithmetic():
    a, b = Vec([1.0, 2.0, 3.0]), Vec([0.5, 0.5, 0.5])
    assert a - b == (0.5, 1.5, 2.5) and isinstance(a - b, Vec)
    assert 2 * a == a * 2 == (2.0, 4.0, 6.0) and a / 2 == (0.5, 1.0, 1.5) and 1 - a == (0.0, -1.0, -2.0)
    assert a[:2] - b[:2] == (0.5, 1.5) and -a == (-1.0, -2.0, -3.0) and abs(-a) == a and a ** 2 == (1.0, 4.0, 9.0)
    assert a @ b == 3.0 and a + [1, 1, 1] == (2.0, 3.0, 4.0) and [1, 1, 1] + a == (2.0, 3.0, 4.0)
    assert math.hypot(*(a[:2] - b[:2])) == math.hypot(0.5, 1.5)
    with pytest.raises(ValueError, match="could not be broadcast"):
        a + Vec([1.0, 2.0])  # noqa: B018
    r = Mat([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    assert r[2, 2] == 1.0 and r[:, 0] == (0.0, 1.0, 0.0) and r.T[1] == (-1.0, 0.0, 0.0)
    assert r @ a == (-2.0, 1.0, 3.0) and r.T @ (r @ a) == a and r.shape == (3, 3)
    assert (r * 2)[0, 1] == -2.0 and (r - r) == Mat([[0.0] * 3] * 3)


# --- potential programs ------------------------------------------------------------------------------------

POTENTIAL = '''
import math

import numpy as np
from sim import helpers as h


def clip01(x):
    return float(np.clip(x, 0.0, 1.0))


def hover(s):
    return math.hypot(*(h.gripper_position(s)[:2] - h.position(s, "{t}")[:2]))


SUBGOALS = ["reach the {t}", "grasp the {t}", "put the {t} away"]
LEARNING_TOOL = "awr_shaped"


def complete_1(s):
    return hover(s) < 0.03 or h.is_grasped(s, "{t}") or h.xy_distance(s, "{t}", "{r}") < 0.05


def potential_1(s):
    gap = np.linalg.norm(np.array(h.gripper_position(s)) - h.position(s, "{t}"))
    return clip01(1.0 - gap / 0.4) * (0.9 + 0.1 * abs(h.rotation(s, "{t}")[2, 2]))


def complete_2(s):
    return h.is_grasped(s, "{t}") or h.xy_distance(s, "{t}", "{r}") < 0.05


def potential_2(s):
    touching = 0.5 * sum(h.fingers_touching(s, "{t}"))
    near = "{t}" in h.contact_objects(s, "gripper") or h.in_contact(s, "{t}", "gripper")
    return touching * clip01(1.0 - hover(s) / 0.05) * (1.0 if near else 0.9)


def complete_3(s):
    return h.xy_distance(s, "{t}", "{r}") < 0.05 and not h.is_grasped(s, "{t}")


def potential_3(s):
    box = h.interior_box(s, "{r}")
    floor = h.top_z(s, "{r}") if box is None else box[0][2] - box[2][2]
    v = (h.position(s, "{r}") - h.position(s, "{t}")) * 2.0
    lift = h.bottom_z(s, "{t}") - floor + 0.01 * h.lift_height(s, "{t}") + 0.001 * h.tilt_deg(s, "{t}")
    return clip01(1.0 - math.sqrt(np.dot(v[:2], v[:2])) / 1.0) * clip01(1.0 - lift / 0.3)
'''


@pytest.fixture(scope="module")
def demo():
    from sim.trace import planner_trace

    spec = sample_spec("pick_place", 0)
    _, trace = planner_trace(spec)
    roles = {"t": spec.task.with_role("target")[0].name, "r": spec.task.with_role("receptacle")[0].name}
    return spec, trace, roles


def _trusted_namespace(source: str) -> dict:
    namespace = {"__name__": "__program__"}
    exec(compile(source, "<program>", "exec"), namespace)  # real sim.helpers and numpy: the old behaviour
    return namespace


@pytest.mark.parametrize("which", ["test_potential_good", "vectors_and_numpy"])
def test_potential_values_are_unchanged(demo, which, monkeypatch):
    import sim.potential
    from sim.potential import episode, evaluate_in_sandbox
    from tests.sim.test_potential import GOOD

    spec, trace, roles = demo
    body = GOOD if which == "test_potential_good" else POTENTIAL
    source = body.replace("{t}", roles["t"]).replace("{r}", roles["r"])
    inputs = {"spec": spec.model_dump(mode="json"), "episodes": [episode(trace, 3)]}
    after = evaluate_in_sandbox(program_namespace(source), inputs)
    with monkeypatch.context() as m:  # the old behaviour: real sim.helpers on the live state
        m.setattr(sim.potential, "program_state", lambda namespace, state: state)
        before = evaluate_in_sandbox(_trusted_namespace(source), inputs)
    keys = ("phi", "phi_again", "k", "phi_next")
    assert [{k: e[k] for k in keys} for e in after["episodes"]] == [{k: e[k] for k in keys} for e in before["episodes"]]
    assert len(set(after["episodes"][0]["k"])) > 1  # the program got past its first subgoal


def test_potential_programs_get_an_opaque_view():
    from sim.env import CodaEnv
    from sim.potential import program_state

    env = CodaEnv(sample_spec("pick_place", 0))
    env.reset()
    seen = []
    namespace = program_namespace("from sim import helpers as h\nimport numpy as np\n")
    view = program_state(namespace, env.state)
    assert type(view) is program_helpers.SceneState and [a for a in dir(view) if not a.startswith("_")] == []
    assert_plain(view)
    with pytest.raises(AttributeError):
        view.model  # noqa: B018
    with pytest.raises(TypeError, match="cannot make a SceneState"):
        program_helpers.SceneState()
    with pytest.raises(TypeError, match="helpers take the state"):
        program_helpers.finger_gap(env.state)  # the live state is not accepted either
    seen.append(program_helpers.finger_gap(view))
    assert seen == [real_helpers.finger_gap(env.state)]
    # whatever the namespace holds, programs get the view
    assert type(program_state(_trusted_namespace("from sim import helpers as h\n"), env.state)) is \
        program_helpers.SceneState
    assert type(program_state({}, env.state)) is program_helpers.SceneState


def _helper_calls(names: list[str], articulated: str | None):
    a, b = names[0], names[-1]
    calls = {
        "position": (a,), "rotation": (a,), "bottom_z": (a,), "top_z": (b,), "distance": (a, b),
        "xy_distance": (a, b), "lift_height": (a,), "is_upright": (a, 10.0), "tilt_deg": (a,), "gripper_position": (),
        "finger_gap": (), "tcp_distance": (a,), "contact_objects": (a,), "in_contact": (a, "table"),
        "fingers_touching": (a,), "is_grasped": (a,), "max_penetration": (), "interior_box": (b,),
        "is_inside": (a, b), "is_on": (a, "table"),
    }
    if articulated:
        calls["open_fraction"] = (articulated,)
    return calls


def _same(got, want) -> bool:
    if isinstance(want, np.ndarray):
        return isinstance(got, (Vec, Mat)) and np.array_equal(np.asarray(got), want)
    if isinstance(want, tuple):
        return isinstance(got, tuple) and len(got) == len(want) and all(map(_same, got, want))
    return type(got) in (float, bool, str, set, type(None)) and got == want


def test_helpers_facade_matches_sim_helpers(demo):
    from sim.env import CodaEnv
    from sim.potential import helper_names

    facade = {n for n in program_helpers.__all__ if n != "SceneState"}
    assert facade == helper_names()
    spec, trace, roles = demo
    checked = 0
    for state_spec, states in ((spec, list(range(0, trace.steps + 1, 10))), (sample_spec("articulated", 0), [None])):
        env = CodaEnv(state_spec)
        env.reset()
        names = state_spec.object_names()
        if state_spec is spec:
            names = [roles["t"], roles["r"]]
        articulated = next((o.name for o in state_spec.task.objects if o.role == "articulated"), None)
        for t in states:
            state = env.state if t is None else trace.state_at(t, env)
            view = program_helpers._view(state)
            for name, args in _helper_calls(names, articulated).items():
                got = getattr(program_helpers, name)(view, *args)
                want = getattr(real_helpers, name)(state, *args)
                assert _same(got, want), (name, args, got, want)
                assert_plain(got, name)
                checked += 1
    assert checked > 50
