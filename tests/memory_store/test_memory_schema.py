import numpy as np
import pytest
from memory_workers import diagnosis, scene

from memory_store.schema import (
    EMBED_DIM,
    TABLES,
    CompileCheck,
    Diagnosis,
    GenerationProgram,
    HistoryEvent,
    Mode,
    Relation,
    RolloutRecord,
    TrainingProgram,
    arrow_schema,
    records_to_arrow,
    rows_to_records,
    table_name,
)


def _one_of_each():
    vec = np.random.default_rng(0).standard_normal(EMBED_DIM)
    return [
        scene(
            "s1",
            violations=[{"check": "overlap", "message": "mug inside bowl", "objects": ["mug", "bowl"]}],
            repairs=[{"attempt": 1, "error": "NameError: plase"}],
            success_rate=0.25,
            n_rollouts=8,
        ),
        RolloutRecord(
            id="r1",
            scene_id="s1",
            policy_id="p0",
            success=False,
            steps=40,
            episode_return=0.5,
            seed=3,
            phase_reached="grasp",
            summary={"min_dist": 0.02},
        ),
        diagnosis(
            "d1",
            "the gripper hits the rim",
            rollout_ids=["r1"],
            evidence={"step_indices": [12, 13], "state_facts": ["contact(gripper, bowl)"]},
        ),
        Mode(
            id="m1",
            factor="spatial",
            phase="approach",
            centroid=vec / np.linalg.norm(vec),
            description="rim",
            members=2,
            hardness=0.3,
            history=[HistoryEvent(round=1, event="created")],
        ),
        GenerationProgram(
            id="g1",
            mode_id="m1",
            factor="layout",
            variants=["v1", "v2"],
            compile_checks=[CompileCheck(ok=True)],
            roles=["target", "receptacle"],
            required_relations=[Relation(predicate="near", roles=["target", "receptacle"])],
            family="pick_place",
            success_on_variants=0.4,
        ),
        TrainingProgram(
            id="t1",
            mode_id="m1",
            phase="approach",
            subgoals=["align", "descend"],
            completion_predicates=["aligned()", "low()"],
            potential_code="def phi(s): return 0.0",
            learning_tool="awr_shaped",
            evidence={"before": 0.2, "after": 0.5},
            improved=True,
        ),
    ]


def test_every_model_round_trips_through_arrow():
    for record in _one_of_each():
        model = type(record)
        table = records_to_arrow(model, [record])
        assert table.schema == arrow_schema(model)
        assert rows_to_records(model, table) == [record]


def test_invalid_values_name_the_valid_ones():
    with pytest.raises(ValueError, match="valid values: task, spatial, attribute, execution"):
        Diagnosis(id="d", scene_id="s", factor="spacial", phase="grasp", cause="x")
    with pytest.raises(ValueError, match="valid values: approach, grasp"):
        Diagnosis(id="d", scene_id="s", factor="spatial", phase="grab", cause="x")
    with pytest.raises(ValueError, match="shape"):
        Diagnosis(id="d", scene_id="s", factor="spatial", phase="grasp", cause="x", embedding=[0.1] * 3)
    with pytest.raises(ValueError, match="learning_tool|valid values: bc"):
        TrainingProgram(id="t", mode_id="m", phase="grasp", learning_tool="ppo")
    with pytest.raises(ValueError, match="valid values: target"):
        Relation(predicate="on", roles=["cup"])


def test_vectors_are_stored_as_float32_values():
    d = Diagnosis(
        id="d", scene_id="s", factor="task", phase="other", cause="x", embedding=np.full(EMBED_DIM, 0.1)
    )
    assert d.embedding[0] == float(np.float32(0.1))


def test_table_name_accepts_names_models_and_records():
    assert table_name("modes") == table_name(Mode) == "modes"
    assert table_name(scene("s")) == "scenes"
    assert set(TABLES) == {
        "scenes",
        "rollouts",
        "diagnoses",
        "modes",
        "generation_programs",
        "training_programs",
    }
    with pytest.raises(ValueError, match="valid tables"):
        table_name("mode")


BAD_IDS = ["../../etc/passwd", "a' OR '1'='1", ".hidden", "a/b", "", "x" * 129, "sp ace"]


def test_record_ids_and_references_follow_the_documented_pattern():
    """Issue 17: ids such as `../../etc/passwd` or `a' OR '1'='1` were stored; SECURITY.md promises RECORD_ID_PATTERN."""
    from memory_store.schema import RECORD_ID_PATTERN
    from sim.fileio import RECORD_ID_PATTERN as FILE_ID_PATTERN

    assert RECORD_ID_PATTERN == FILE_ID_PATTERN
    rollout = {"id": "r1", "scene_id": "s1", "policy_id": "run@r0", "success": True, "steps": 3,
               "episode_return": 1.0, "seed": 0, "phase_reached": "grasp"}
    make = {
        "id": lambda bad: scene(bad),
        "scene_id": lambda bad: RolloutRecord(**{**rollout, "scene_id": bad}),
        "rollout_ids": lambda bad: Diagnosis(id="d", scene_id="s", factor="task", phase="other", cause="x",
                                             rollout_ids=["r1", bad]),
        "mode_id": lambda bad: scene("s1", mode_id=bad),
        "parent_scene_id": lambda bad: GenerationProgram(id="g", mode_id="m", factor="layout", parent_scene_id=bad),
    }
    for field, build in make.items():
        for bad in BAD_IDS:
            if field == "parent_scene_id" and bad == "":
                continue  # no parent
            with pytest.raises(ValueError, match=field):
                build(bad)
    assert RolloutRecord(**rollout).policy_id == "run@r0"  # not a record id
    assert GenerationProgram(id="g", mode_id="mode-spatial-grasp-0123abcd", factor="layout").parent_scene_id == ""
    assert scene("failed-r3-0123456789abcdef").id == "failed-r3-0123456789abcdef"


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_float_fields_must_be_finite(bad):
    """Issue 17: NaN and Infinity were stored (success_rate, episode_return) and exported as non-standard JSON."""
    rollout = {"id": "r1", "scene_id": "s1", "policy_id": "p0", "success": True, "steps": 3,
               "episode_return": 1.0, "seed": 0, "phase_reached": "grasp"}
    vec = np.ones(EMBED_DIM)
    cases = [
        ("success_rate", lambda: scene("s1", success_rate=bad)),
        ("learning_progress", lambda: scene("s1", learning_progress=bad)),
        ("episode_return", lambda: RolloutRecord(**{**rollout, "episode_return": bad})),
        ("summary", lambda: RolloutRecord(**{**rollout, "summary": {"returns": [0.0, bad]}})),
        ("hardness", lambda: Mode(id="m", factor="task", phase="other", centroid=vec, description="d", hardness=bad)),
        ("importance", lambda: Mode(id="m", factor="task", phase="other", centroid=vec, description="d",
                                    importance=bad)),
        ("values", lambda: HistoryEvent(round=0, event="hardness", values={"hardness": bad})),
        ("success_on_variants", lambda: GenerationProgram(id="g", mode_id="m", factor="layout",
                                                          success_on_variants=bad)),
        ("evidence", lambda: TrainingProgram(id="t", mode_id="m", phase="grasp", evidence={"before": bad})),
        ("extra", lambda: Diagnosis(id="d", scene_id="s", factor="task", phase="other", cause="x",
                                    evidence={"extra": {"score": bad}})),
    ]
    for field, build in cases:
        with pytest.raises(ValueError, match=field):
            build()


def test_exports_are_standard_json(tmp_path):
    import json

    from memory_workers import open_store

    store = open_store(tmp_path / "mem")
    store.put_many(_one_of_each())
    store.export(tmp_path / "exp")

    def refuse(constant):
        raise AssertionError(f"non-standard JSON constant {constant} in an export")

    json.loads((tmp_path / "exp" / "manifest.json").read_text(), parse_constant=refuse)
    for path in (tmp_path / "exp").glob("*.jsonl"):
        for line in path.read_text().splitlines():
            json.loads(line, parse_constant=refuse)
