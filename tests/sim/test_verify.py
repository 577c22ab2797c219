"""The verifier accepts the example programs and rejects each faulty one with a message naming the problem."""

from pathlib import Path

import pytest

from sim.families import sample_spec
from sim.verify import verify_program, verify_programs, verify_spec

SCENES = Path(__file__).resolve().parents[2] / "examples" / "scenes"

FAULTS = {
    "fault_interpenetrating.py": ("collision_free", "interpenetrate"),
    "fault_unstable.py": ("stable", "unstable"),
    "fault_giant_mug.py": ("scale_plausible", "implausible for a mug"),
    "fault_true_at_start.py": ("predicate_false_at_start", "already true"),
    "fault_contradiction.py": ("predicate_satisfiable", "can never hold (grasped(mug) & ~grasped(mug))"),
    "fault_raises.py": ("executes", "ZeroDivisionError"),
    "fault_loops.py": ("executes", "infinite loops"),  # wall-clock or CPU limit, whichever comes first
    "fault_imports_os.py": ("executes", "'os' is not allowed"),
    "fault_imports_subprocess.py": ("executes", "'subprocess' is not allowed"),
    "fault_memory.py": ("executes", "memory limit"),
}


@pytest.mark.parametrize("name", ["pick_place.py", "stack.py", "articulated.py", "prep.py"])
def test_example_programs_pass(name):
    report = verify_program((SCENES / name).read_text(), seed=0)
    assert report.passed, report.summary()
    assert report.spec is not None and report.spec_hash


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_faulty_programs_are_rejected_with_the_reason(name):
    check, words = FAULTS[name]
    report = verify_program((SCENES / name).read_text(), seed=0)
    assert not report.passed
    failed = {c.name: c.message for c in report.violations()}
    assert check in failed, failed
    assert words in failed[check], failed[check]


def test_interpenetration_names_the_objects():
    report = verify_program((SCENES / "fault_interpenetrating.py").read_text(), seed=0)
    bad = next(c for c in report.violations() if c.name == "collision_free")
    assert set(bad.objects) == {"mug", "can"}


def test_an_unreachable_object_is_reported_with_where_it_is_and_the_workspace():
    spec = sample_spec("pick_place", 0)
    data = spec.model_dump(mode="json")
    data["layout"]["placements"][0]["x"] = 1.5
    report = verify_spec(data)
    check = next(c for c in report.checks if c.name == "reachable")
    assert not check.passed and "at (1.50," in check.message and "x in [0.20, 0.90] m" in check.message


def test_an_object_beyond_the_grippers_reach_in_y_is_unreachable():
    """Session 35 (outsider): y up to ±0.42 passed while the gripper's targets are clipped at ±0.40."""
    data = sample_spec("pick_place", 0).model_dump(mode="json")
    data["layout"]["placements"][0]["y"] = 0.41
    check = next(c for c in verify_spec(data).checks if c.name == "reachable")
    assert not check.passed and "y in [-0.40, 0.40] m" in check.message


def test_train_side_check_refuses_the_ood_suites_items_and_names_them():
    """Session 35: environments to train on (the loop's, an LLM engine's repairs) must not use what the OOD suites
    hold out; user programs to evaluate may (the check is opt-in)."""
    from sim.suites import suite_specs

    clean = sample_spec("pick_place", 0)
    assert next(c for c in verify_spec(clean, train_side=True).checks if c.name == "train_side").passed
    assert all(c.name != "train_side" for c in verify_spec(clean).checks)
    for suite, words in [("categories", "held-out category"), ("instances", "held-out instance"),
                         ("layouts", "seed layout"), ("tasks", "task template")]:
        spec = suite_specs("pick_place", suite, 1)[0]
        check = next(c for c in verify_spec(spec, train_side=True).checks if c.name == "train_side")
        assert not check.passed and words in check.message and "never trained on" in check.message, (suite, check)
    source = (SCENES / "pick_place.py").read_text().replace('"mug"', '"rubber_duck"').replace("mug", "duck")
    report = verify_program(source, seed=0, train_side=True)
    check = next(c for c in report.checks if c.name == "train_side")
    assert not check.passed and check.objects == ["rubber_duck"] and "rubber_duck is a held-out category" in check.message


def test_a_joint_damped_shut_or_travelling_metres_is_implausible():
    """Session 35 (outsider): a drawer with 6 m of travel and a door with damping 1e5 passed every check."""
    for edit, words in [("damping=1e5", "holds it shut"), ("joint_range=(0.0, 6.0)", "joint travels 6 m")]:
        source = (SCENES / "articulated.py").read_text().replace("damping=0.5", edit)
        check = next(c for c in verify_program(source, seed=0).checks if c.name == "scale_plausible")
        assert not check.passed and words in check.message and check.objects == ["drawer"], check
    assert verify_program((SCENES / "articulated.py").read_text().replace("damping=0.5", "damping=10"), seed=0).passed


@pytest.mark.parametrize(("success", "words"), [
    ("open_fraction(drawer, min=0.7, max=0.3)", "min=0.7 is above max=0.3"),
    ("open_fraction(drawer, min=1.5)", "min=1.5 can never hold"),
])
def test_a_success_condition_that_can_never_hold_is_refused_with_the_range(success, words):
    source = (SCENES / "articulated.py").read_text().replace("open_fraction(drawer, min=0.6)", success)
    report = verify_program(source, seed=0)
    assert not report.passed and report.checks[0].name == "executes" and words in report.checks[0].message, report
    assert "Value error" not in report.checks[0].message


@pytest.mark.parametrize(("old", "new", "words"), [
    ("near=mug, gap=0.08)", "nera=mug)", "place(bowl): unknown argument 'nera'; valid arguments: obj, on, xy"),
    ("xy=(0.45, -0.10))", "xy=(0.45, -0.10), yaw=90)", "place(mug): yaw is in radians"),
    ("inside(mug, bowl)", "inside('cup', bowl)", "the scene is not valid: success predicate names unknown object"),
])
def test_mistakes_in_a_program_read_as_one_plain_line(old, new, words):
    """Session 35 (outsider): a keyword typo in place() gave a bare TypeError, yaw in degrees and a missing object
    came back as ': Value error, ...' without the object."""
    source = (SCENES / "pick_place.py").read_text().replace(old, new)
    message = verify_program(source, seed=0).checks[0].message
    assert words in message and "Value error" not in message and ": :" not in message and "\n" not in message


def test_invalid_spec_dict_is_reported_not_raised():
    spec = sample_spec("pick_place", 0).model_dump(mode="json")
    spec["attributes"]["objects"][0]["mass"] = -1.0
    report = verify_spec(spec)
    assert not report.passed and report.checks[0].name == "spec_valid"
    assert "mass" in report.checks[0].message


def test_planner_check_is_optional_and_passes_on_a_seed_scene():
    report = verify_spec(sample_spec("stack", 4), planner=True)
    assert report.passed, report.summary()
    assert report.checks[-1].name == "planner_solvable"


def test_stream_verification_matches_one_by_one_and_keeps_order():
    names = ["pick_place.py", "fault_raises.py", "stack.py", "fault_interpenetrating.py", "prep.py"]
    programs = [((SCENES / n).read_text(), i) for i, n in enumerate(names)]
    streamed = list(verify_programs(programs, lookahead=2))
    single = [verify_program(src, seed) for src, seed in programs]
    assert [r.passed for r in streamed] == [r.passed for r in single] == [True, False, True, False, True]
    assert [r.spec_hash for r in streamed] == [r.spec_hash for r in single]
    assert [[c.name for c in r.violations()] for r in streamed] == [[c.name for c in r.violations()] for r in single]


def test_stream_verification_runs_in_the_callers_share_of_the_pool():
    """The look-ahead thread runs programs for the caller that streams them (its share of the sandbox pool)."""
    from sim.sandbox import SandboxError, SandboxResult, _caller, caller_scope

    seen = []

    class Recording:  # a pool that records whose share each run counts against
        def run(self, source, **kwargs):
            seen.append(_caller(kwargs.get("caller")))
            return SandboxResult(ok=False, error=SandboxError(kind="runtime", message="not run"))

    with caller_scope("session-b"):
        reports = list(verify_programs([("x = 1", 0)] * 4, pool=Recording(), lookahead=2))
    assert len(reports) == 4 and not any(r.passed for r in reports)
    assert seen == ["session-b"] * 4


HUGE_PROGRAM = """from sim import Scene, grasped, inside, place
scene = Scene(family="pick_place", seed=seed)
mug = scene.add_object("mug", role="target")
bowl = scene.add_object("bowl", role="receptacle")
scene.set_task("put the mug in the bowl", success=inside(mug, bowl) & ~grasped(mug))
scene.set_layout(place(mug, on="table", xy=(0.45, -0.10)), place(bowl, on="table", near=mug, gap=0.08))
scene.set_attributes(mug, friction=1e300)
"""


@pytest.mark.parametrize(("where", "field", "value", "words"), [
    ("layout", "x", 1e300, "x must lie in [-2, 2] m, got 1e+300"),
    ("layout", "yaw", 1e300, "yaw must lie in [-6.28319, 6.28319] rad"),
    ("attributes", "friction", 1e300, "friction must lie in [0.01, 10], got 1e+300"),
    ("attributes", "scale", 1e30, "scale must lie in [0.01, 100]"),
    ("attributes", "scale", 1e-300, "scale must lie in [0.01, 100]"),
    ("attributes", "mass", 1e6, "mass must lie in [0.001, 100] kg"),
    ("attributes", "damping", 1e300, "damping must lie in [0, 1e+06]"),
])
def test_huge_values_are_refused_with_a_one_line_reason_and_no_mujoco_log(tmp_path, monkeypatch, where, field, value,
                                                                           words):
    """Issue 17 (red team): friction=1e300 or x=1e300 passed validation and made MuJoCo, simulating in the server
    process, append to ./MUJOCO_LOG.TXT."""
    monkeypatch.chdir(tmp_path)
    spec = sample_spec("pick_place", 0).model_dump(mode="json")
    section = spec["layout"]["placements"] if where == "layout" else spec["attributes"]["objects"]
    section[0][field] = value
    report = verify_spec(spec)
    assert not report.passed and [c.name for c in report.checks] == ["spec_valid"]
    message = report.checks[0].message
    assert words in message and field in message and "\n" not in message, message
    assert list(tmp_path.iterdir()) == []


def test_a_program_with_huge_friction_is_refused_and_mujoco_warnings_go_to_logging(tmp_path, monkeypatch, caplog):
    import mujoco

    from sim.env import CodaEnv

    monkeypatch.chdir(tmp_path)
    report = verify_program(HUGE_PROGRAM, seed=0)
    assert not report.passed and report.checks[0].name == "executes"
    assert "friction must lie in [0.01, 10], got 1e+300" in report.checks[0].message
    env = CodaEnv(sample_spec("pick_place", 0))  # the trusted side's handlers are installed with the first scene
    env.data.qvel[:] = 1e300  # what an unstable simulation reaches
    with caplog.at_level("WARNING", logger="sim.mujoco"):
        mujoco.mj_step(env.model, env.data)
    assert any("Nan, Inf or huge value" in r.getMessage() for r in caplog.records), caplog.records
    assert list(tmp_path.iterdir()) == []


def test_inside_an_object_without_a_cavity_can_never_hold():
    """Session 37 (red team): `inside(mug, plate)` passed every check without the planner although a plate has no
    cavity (`helpers.is_inside` is always false there)."""
    from sim.predicates import inside

    for seed in range(40):
        spec = sample_spec("pick_place", seed)
        if spec.task.success.op == "and" and spec.task.success.terms[0].op == "on":
            break
    target, receptacle = spec.task.success.terms[0].args
    data = spec.model_dump(mode="json")
    data["task"]["success"] = inside(target, receptacle).model_dump(mode="json")
    report = verify_spec(data)
    check = next(c for c in report.checks if c.name == "predicate_satisfiable")
    assert not check.passed and f"can never hold (inside({target}, {receptacle}))" in check.message
