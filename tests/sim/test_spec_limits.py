"""Session 36 (red team over the sim and verifier servers): scene specs the trusted side could not read back, list
or act on, and written programs whose reported scene id was not the one they build."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from sim.engine import programs
from sim.families import sample_spec
from sim.scene_store import SceneStore
from sim.spec import MAX_META_DEPTH, SceneSpec
from sim.verify import verify_programs, verify_spec


def _with(spec: SceneSpec, **task_or_meta) -> dict:
    data = spec.model_dump(mode="json")
    for key, value in task_or_meta.items():
        if key == "meta":
            data["meta"] = value
        elif key == "placements":
            data["layout"]["placements"] = value
        else:
            data["task"][key] = value
    return data


def _deep(n: int):
    x: object = 0
    for _ in range(n):
        x = [x]
    return x


@pytest.mark.parametrize("meta,words", [
    ({"note": _deep(250)}, "nested deeper"),  # pydantic wrote it, and could not read it back
    ({"parent": 12345}, "meta['parent'] must be text"),  # the listing's SceneInfo refused it after the store
    ({"blob": "x" * 30_000}, "at most 20,000"),
    ({"nan": float("nan")}, "plain JSON"),
])
def test_meta_is_small_plain_and_readable(meta, words):
    with pytest.raises(ValidationError, match="meta") as exc:
        SceneSpec.model_validate(_with(sample_spec("pick_place", 0), meta=meta))
    assert words in str(exc.value)
    SceneSpec.model_validate(_with(sample_spec("pick_place", 0), meta={"note": _deep(MAX_META_DEPTH - 2)}))


def test_task_fields_that_every_caller_acts_on_are_checked_up_front():
    spec = sample_spec("pick_place", 0)
    with pytest.raises(ValidationError, match="template"):
        SceneSpec.model_validate(_with(spec, template="t" * 4_500))  # was echoed by every listing, megabytes each
    with pytest.raises(ValidationError, match=r"initial_state names unknown object\(s\) \['ghost'\]"):
        SceneSpec.model_validate(_with(spec, initial_state={"ghost": {"open": 0.5}}))  # was a bare KeyError 'ghost'
    a, b = (p["object"] for p in spec.model_dump(mode="json")["layout"]["placements"][:2])
    cycle = [{**p, "support": b if p["object"] == a else a} for p in spec.model_dump(mode="json")["layout"]["placements"]]
    with pytest.raises(ValidationError, match="cycle"):
        SceneSpec.model_validate(_with(spec, placements=cycle))  # was a RecursionError in compile and potentials


@pytest.mark.parametrize("success,words", [
    ({"op": "or", "terms": []}, "at least 1 item"),
    ({"op": "inside", "args": ["mug", "mug"]}, "relates mug to itself"),
    ({"op": "on", "args": ["table", "mug"]}, "'table' can only be the support"),
    ({"op": "upright", "args": ["table"]}, "'table' can only be the support"),
])
def test_success_conditions_that_never_hold_or_name_the_table_wrongly_are_refused(success, words):
    spec = sample_spec("pick_place", 0)
    report = verify_spec(_with(spec, success=success))
    assert not report.passed and report.checks[0].name == "spec_valid", report.summary()
    assert words in report.checks[0].message


def test_open_fraction_of_a_rigid_object_is_a_failed_check_not_an_exception():
    spec = sample_spec("pick_place", 0)
    target = spec.task.with_role("target")[0].name
    report = verify_spec(_with(spec, success={"op": "open_fraction", "args": [target], "params": {"min": 0.5}}))
    assert not report.passed and "is not articulated" in report.summary()


def test_a_scene_that_cannot_be_listed_is_not_stored(tmp_path):
    store = SceneStore(tmp_path)
    spec = sample_spec("stack", 1)
    bad = spec.model_construct(**{**dict(spec), "meta": {"parent": 7}})  # skips validation, as a buggy caller could
    with pytest.raises(ValueError):
        store.put(bad, source="scene = 1\n")
    assert list((tmp_path / "scenes").iterdir()) == []


def test_written_programs_report_the_id_of_the_scene_they_build():
    progs = [p for f in ("pick_place", "prep") for p in programs.sample_programs(f, 3)]
    progs += programs.vary_scene(sample_spec("stack", 2), "layout", 2).programs
    built = list(verify_programs([(p.source, p.seed) for p in progs]))
    assert all(r.spec is not None for r in built)
    assert [SceneSpec.model_validate(r.spec).spec_hash() for r in built] == [p.spec_hash for p in progs]


def test_vary_scene_bounds_its_verifier_runs_and_refuses_repeated_operators(monkeypatch):
    spec = sample_spec("prep", 0)
    with pytest.raises(ValueError, match="listed more than once"):
        programs.vary_scene(spec, "layout", 2, operators=("resample", "resample"))
    calls = []
    import sim.engine.variations as V

    monkeypatch.setattr(V, "_verified", lambda s: calls.append(s) or False)  # every draw fails, as a hostile
    out = programs.vary_scene(spec, "layout", 50, max_tries=16, verify=True, max_verifications=20)  # scene's did
    assert out.programs == [] and len(calls) == 20
    assert "verification budget of 20 spent" in out.log[-1]


@pytest.mark.parametrize("name", ["scene", "seed", "inside", "np", "if", "lambda"])
def test_an_object_name_the_written_program_could_not_bind_is_refused(name):
    """Session 37 (red team): a raw spec with an object named `scene` or `if` verified, and the program written for
    it (`program_of`) failed to run while claiming the spec's id."""
    data = sample_spec("pick_place", 0).model_dump(mode="json")
    old = data["task"]["objects"][0]["name"]
    text = json.dumps(data).replace(f'"{old}"', f'"{name}"')
    with pytest.raises(ValidationError, match=f"object name '{name}' is reserved"):
        SceneSpec.model_validate_json(text)
