"""The verifier server in memory: programs, scenes, predicates, potentials."""

from __future__ import annotations

import asyncio
import json

import pytest
from mcp import Client
from mcp_testing import FAULTY_PROGRAM, SCENE_PROGRAM, UNSTABLE_PROGRAM, err, ok

from servers.verifier import build_server
from sim.checks import parse_predicate
from sim.scene_store import SceneStore


def run(coro):
    return asyncio.run(coro)


@pytest.fixture
def stored(tmp_path):
    """(run_dir, scene_id) with one pick_place seed scene stored."""
    return tmp_path, SceneStore(tmp_path).sample("pick_place", 0).scene_id


def test_annotations_are_read_only(tmp_path):
    async def main():
        async with Client(build_server(tmp_path)) as c:
            tools = {t.name: t.annotations for t in (await c.list_tools()).tools}
            assert set(tools) == {"verify_program", "verify_scene", "check_predicate", "check_potential"}
            assert all(a.read_only_hint and a.idempotent_hint and not a.destructive_hint for a in tools.values())

    run(main())


def test_a_misspelled_argument_is_an_error_naming_it_and_the_valid_ones(tmp_path):
    """`sed` for `seed` used to be dropped silently and the tool ran with seed 0."""
    async def main():
        async with Client(build_server(tmp_path)) as c:
            text = await err(c, "verify_program", {"source": SCENE_PROGRAM, "sed": 1})
            assert "argument sed: not an argument of this tool (its arguments: source, seed, planner, train_side)" in text
            good = await ok(c, "verify_program", {"source": SCENE_PROGRAM, "seed": 1})
            assert good["passed"]

    run(main())


def test_verify_programs_with_reasons(tmp_path):
    async def main():
        async with Client(build_server(tmp_path)) as c:
            good = await ok(c, "verify_program", {"source": SCENE_PROGRAM, "seed": 0})
            assert good["passed"] and good["summary"] == "all checks passed" and good["spec_hash"]
            assert [ch["name"] for ch in good["checks"]][:3] == ["executes", "spec_valid", "compiles"]
            bad = await ok(c, "verify_program", {"source": FAULTY_PROGRAM})
            assert not bad["passed"] and bad["checks"][0]["name"] == "executes"
            assert "ZeroDivisionError" in bad["summary"]
            clash = await ok(c, "verify_program", {"source": UNSTABLE_PROGRAM})
            failed = [ch for ch in clash["checks"] if not ch["passed"]]
            assert failed and failed[0]["name"] == "collision_free" and "move them apart" in failed[0]["message"]
            planned = await ok(c, "verify_program", {"source": SCENE_PROGRAM, "planner": True})
            assert planned["checks"][-1]["name"] == "planner_solvable"

    run(main())


def test_verify_scene_by_id_or_spec(stored):
    run_dir, sid = stored

    async def main():
        async with Client(build_server(run_dir)) as c:
            by_id = await ok(c, "verify_scene", {"scene_id": sid})
            assert by_id["passed"] and by_id["spec_hash"] == sid
            spec = json.loads((run_dir / "scenes" / f"{sid}.json").read_text())
            assert (await ok(c, "verify_scene", {"spec": spec}))["spec_hash"] == sid
            assert (await ok(c, "verify_scene", {"spec": json.dumps(spec)}))["spec_hash"] == sid  # JSON text too
            spec["attributes"]["objects"][0]["mass"] = -1.0
            invalid = await ok(c, "verify_scene", {"spec": spec})
            assert not invalid["passed"] and invalid["checks"][0]["name"] == "spec_valid"
            assert "mass" in invalid["summary"]
            assert "exactly one" in await err(c, "verify_scene", {})
            assert "exactly one" in await err(c, "verify_scene", {"scene_id": sid, "spec": {}})
            assert "spec" in await err(c, "verify_scene", {"spec": "{nope"})
            assert "limit" in await err(c, "verify_scene", {"spec": {"meta": "x" * 300_000}})
            assert "unknown scene_id" in await err(c, "verify_scene", {"scene_id": "f" * 16})

    run(main())


def test_verify_scene_refuses_non_finite_state_and_huge_predicates(stored):
    """Issue 17: NaN/Infinity in task.initial_state and a 60k-atom success predicate used to pass verify_scene."""
    run_dir, sid = stored
    spec = json.loads((run_dir / "scenes" / f"{sid}.json").read_text())
    target = spec["task"]["objects"][0]["name"]

    async def main():
        async with Client(build_server(run_dir)) as c:
            for bad in ("NaN", "Infinity", "-Infinity"):
                text = json.dumps({**spec, "task": {**spec["task"], "initial_state": {target: {"open": 0.0}}}})
                text = text.replace('"open": 0.0', f'"open": {bad}')  # JSON text: NaN literals survive transport
                got = await ok(c, "verify_scene", {"spec": text})
                assert not got["passed"] and got["checks"][0]["name"] == "spec_valid", got["summary"]
                assert "finite" in got["checks"][0]["message"]
            atom = {"op": "grasped", "args": [target], "params": {}}
            huge = {**spec, "task": {**spec["task"], "success": {"op": "or", "terms": [atom] * 2_000}}}
            got = await ok(c, "verify_scene", {"spec": huge})
            assert not got["passed"] and got["checks"][0]["name"] == "spec_valid"
            assert "limit of 64 atoms" in got["checks"][0]["message"]

    run(main())


def test_parse_predicate_forms():
    text = "inside(mug, bowl) & ~grasped(mug) | lifted(mug, height=0.1)"
    pred = parse_predicate(text)
    assert str(pred) == "(inside(mug, bowl) & ~grasped(mug)) | lifted(mug, height=0.1)"
    assert parse_predicate(pred.model_dump_json()) == pred
    for bad in ("__import__('os')", "inside(mug)", "inside(mug, bowl) and grasped(mug)", "lifted(mug, height='x')"):
        with pytest.raises(ValueError):
            parse_predicate(bad)


HOSTILE_PREDICATES = {  # issue 17 (red team): RecursionError / OverflowError escaped, inf and NaN were accepted
    "~" * 3900 + "grasped({t})": "nested too deeply",
    " & ".join(["grasped({t})"] * 100): "more than the limit of 64 atoms",
    "~" * 9 + "grasped({t})": "deeper than the limit of 8 levels",
    "lifted({t}, height=" + "9" * 400 + ")": "parameter height must be a finite number",
    "lifted({t}, height=-" + "9" * 3000 + ")": "parameter height must be a finite number",
    "lifted({t}, height=1e999)": "parameter height must be a finite number",
    "near({t}, {t}, dist=-1e999)": "parameter dist must be a finite number",
    "lifted({t}, height=nan)": "parameter height must be a number",
    '{{"op": "lifted", "args": ["{t}"], "params": {{"height": NaN}}}}': "height: Input should be a finite number",
    '{{"op": "lifted", "args": ["{t}"], "params": {{"height": 1e999}}}}': "height: Input should be a finite number",
    '{{"op":"not","term":' * 150 + '{{"op":"grasped","args":["{t}"]}}' + "}}" * 150: "deeper than the limit of 8",
    "grasped(" + "a." * 1900 + "b)": "predicate arguments must be object names",
}


def test_parse_predicate_refuses_hostile_input_with_a_one_line_reason():
    for text, words in HOSTILE_PREDICATES.items():
        with pytest.raises(ValueError, match=None) as info:
            parse_predicate(text.format(t="mug"))
        assert words in str(info.value) and "\n" not in str(info.value), (text[:40], str(info.value))


def test_check_predicate_reports_hostile_predicates(stored):
    run_dir, sid = stored
    target = SceneStore(run_dir).spec(sid).task.with_role("target")[0].name

    async def main():
        async with Client(build_server(run_dir)) as c:
            for text, words in HOSTILE_PREDICATES.items():
                got = await ok(c, "check_predicate", {"predicate": text.format(t=target), "scene_id": sid})
                assert not got["parses"] and not got["ok"], (text[:40], got)
                assert got["message"].startswith("does not parse: ") and words in got["message"], got["message"]

    run(main())


def test_check_predicate(stored):
    run_dir, sid = stored
    spec = SceneStore(run_dir).spec(sid)
    target = spec.task.with_role("target")[0].name
    goal = str(spec.task.success.terms[0])  # the relation this receptacle affords: on a plate, in a bowl
    other = goal.replace("on(", "inside(", 1) if goal.startswith("on(") else goal.replace("inside(", "on(", 1)

    async def main():
        async with Client(build_server(run_dir)) as c:
            good = await ok(c, "check_predicate", {"predicate": goal, "scene_id": sid})
            assert good["ok"] and good["false_at_start"] and good["terms"] == {goal: False}
            if goal.startswith("on("):  # a surface has no cavity: inside it can never hold (session 37)
                cavityless = await ok(c, "check_predicate", {"predicate": other, "scene_id": sid})
                assert not cavityless["ok"] and not cavityless["satisfiable"]
                assert f"can never hold ({other})" in cavityless["message"]
            as_json = await ok(c, "check_predicate", {"predicate": json.dumps(good["predicate"]), "scene_id": sid})
            assert as_json["ok"]
            trivially = await ok(c, "check_predicate", {"predicate": f"~grasped({target})", "scene_id": sid})
            assert trivially["evaluable"] and not trivially["ok"] and "already true" in trivially["message"]
            never = await ok(c, "check_predicate", {"predicate": f"lifted({target}, height=0.2) & "
                                                    f"~lifted({target}, height=0.1)", "scene_id": sid})
            assert never["evaluable"] and never["false_at_start"] and not never["satisfiable"] and not never["ok"]
            assert "can never hold" in never["message"] and f"~lifted({target}, height=0.1)" in never["message"]
            assert good["satisfiable"]
            stranger = await ok(c, "check_predicate", {"predicate": "on(spoon, table)", "scene_id": sid})
            assert stranger["unknown_objects"] == ["spoon"] and target in stranger["message"]
            garbage = await ok(c, "check_predicate", {"predicate": "open(sesame)", "scene_id": sid})
            assert not garbage["parses"] and "unsupported" in garbage["message"]
            assert "predicate" in await err(c, "check_predicate", {"predicate": "", "scene_id": sid})

    run(main())


POTENTIAL = """from sim import helpers as h

SUBGOALS = ["grasp the {t}", "put the {t} in the {r}"]
LEARNING_TOOL = "awr_shaped"


def complete_1(state):
    return h.is_grasped(state, "{t}") or h.is_inside(state, "{t}", "{r}")


def potential_1(state):
    return max(0.0, min(1.0, 1.0 - h.tcp_distance(state, "{t}") / 0.5))


def complete_2(state):
    return h.is_inside(state, "{t}", "{r}")


def potential_2(state):
    return max(0.0, min(1.0, 1.0 - h.xy_distance(state, "{t}", "{r}") / 0.5))
"""


def test_check_potential_on_demo_and_rollout_states(stored):
    run_dir, sid = stored
    store = SceneStore(run_dir)
    spec = store.spec(sid)
    t, r = spec.task.with_role("target")[0].name, spec.task.with_role("receptacle")[0].name
    demo = store.run_planner(sid, save_trace=True)
    trace_id = demo.trace_id

    async def main():
        async with Client(build_server(run_dir)) as c:
            good = await ok(c, "check_potential", {"source": POTENTIAL.format(t=t, r=r), "scene_id": sid,
                                                   "trace_ids": [trace_id], "every": 2})
            assert good["ok"], good["errors"]
            assert good["rollouts"] == [trace_id]
            assert good["demos"] == ([f"planner-{sid}"] if demo.success else [])  # only solved demos count
            assert good["report"]["subgoals"] == [f"grasp the {t}", f"put the {t} in the {r}"]
            too_big = POTENTIAL.format(t=t, r=r).replace("def potential_1(state):\n    return",
                                                          "def potential_1(state):\n    return 1.5 +")
            bad = await ok(c, "check_potential", {"source": too_big, "scene_id": sid})
            assert not bad["ok"] and "[0, 1]" in bad["errors"][0]
            unnamed = await ok(c, "check_potential", {"source": "SUBGOALS = ['x']\n", "scene_id": sid})
            assert not unnamed["ok"] and any("complete_1" in e for e in unnamed["errors"])
            assert "unknown trace_id" in await err(c, "check_potential", {"source": "x = 1\n", "scene_id": sid,
                                                                         "trace_ids": ["missing"]})
            assert "trace_ids" in await err(c, "check_potential", {"source": "x = 1\n", "scene_id": sid,
                                                                  "trace_ids": ["../../etc/passwd"]})

    run(main())
