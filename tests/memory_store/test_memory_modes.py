"""Clustering with the real MiniLM embedder, and the per-mode statistics."""

import numpy as np
import pytest
from memory_workers import diagnosis, open_store, scene

from memory_store import calibration
from memory_store.embed import MiniLMEmbedder
from memory_store.modes import (
    DEFAULT_THRESHOLD,
    add_member,
    assign,
    hardness_from_store,
    new_mode,
    observe_hardness,
    observe_training,
    record_diagnosis,
    refutation_rate,
    set_status,
    validate,
    visit,
)
from memory_store.schema import Diagnosis, RolloutRecord
from memory_store.store import MemoryStore

RIM = "the gripper collides with the bowl rim while approaching the mug"
RIM_PARAPHRASE = "during approach the fingers hit the bowl's edge next to the mug"
UNRELATED = "the policy opens the wrong drawer because the handles look alike"


@pytest.fixture(scope="module")
def minilm():
    return MiniLMEmbedder()


def _store(tmp_path, minilm) -> MemoryStore:
    return MemoryStore.open(tmp_path, embedder=minilm)


def _diag(id, cause, factor="spatial", phase="approach"):
    return Diagnosis(id=id, scene_id="s0", factor=factor, phase=phase, cause=cause)


def test_paraphrased_causes_with_same_factor_and_phase_merge(tmp_path, minilm):
    store = _store(tmp_path, minilm)
    _, first, created_first = record_diagnosis(store, _diag("d1", RIM), round_=1)
    d2, second, created_second = record_diagnosis(store, _diag("d2", RIM_PARAPHRASE), round_=1)
    assert created_first and not created_second
    assert second.id == first.id == d2.mode_id and second.members == 2
    assert store.count("modes") == 1 and store.get("modes", first.id).members == 2
    assert store.get("diagnoses", "d2").mode_id == first.id
    assert np.linalg.norm(second.centroid) == pytest.approx(1.0, abs=1e-5)


def test_different_phase_splits_under_the_factor_phase_key(tmp_path, minilm):
    store = _store(tmp_path, minilm)
    _, a, _ = record_diagnosis(store, _diag("d1", RIM, phase="approach"), key="factor_phase")
    _, b, created = record_diagnosis(store, _diag("d2", RIM_PARAPHRASE, phase="grasp"), key="factor_phase")
    assert created and a.id != b.id and store.count("modes") == 2


def test_factor_key_merges_phases_but_not_factors_or_causes(tmp_path, minilm):
    """cluster by the factor alone: a paraphrase in another phase joins the mode (which keeps its founding phase);
    another factor, or an unrelated cause, still founds a mode of its own."""
    store = _store(tmp_path, minilm)
    _, a, _ = record_diagnosis(store, _diag("d1", RIM, phase="approach"), key="factor")
    _, b, created = record_diagnosis(store, _diag("d2", RIM_PARAPHRASE, phase="grasp"), key="factor")
    assert not created and b.id == a.id and b.members == 2 and b.phase == "approach"
    _, c, created_c = record_diagnosis(store, _diag("d3", RIM_PARAPHRASE, factor="execution"), key="factor")
    _, d, created_d = record_diagnosis(store, _diag("d4", UNRELATED), key="factor")
    assert created_c and created_d and len({a.id, c.id, d.id}) == 3
    with pytest.raises(ValueError, match="mode key must be one of factor_phase, factor"):
        record_diagnosis(store, _diag("d5", RIM), key="phase")


def test_unrelated_cause_splits(tmp_path, minilm):
    store = _store(tmp_path, minilm)
    _, a, _ = record_diagnosis(store, _diag("d1", RIM))
    _, b, created = record_diagnosis(store, _diag("d2", UNRELATED))
    assert created and a.id != b.id
    assert float(np.dot(a.centroid, b.centroid)) < DEFAULT_THRESHOLD


def test_threshold_calibration_keeps_distinct_causes_apart(minilm):
    (row,) = calibration.clustering_quality(minilm, thresholds=(DEFAULT_THRESHOLD,))
    assert row["distinct_kept_apart"] == 1.0
    assert row["paraphrases_merged"] >= 0.75


def test_record_diagnosis_is_idempotent(tmp_path):
    store = open_store(tmp_path)
    record_diagnosis(store, diagnosis("d1", "the gripper hits the rim"))
    _, mode, created = record_diagnosis(store, diagnosis("d1", "the gripper hits the rim"))
    assert not created and mode.members == 1
    assert store.count("modes") == 1 and store.count("diagnoses") == 1


def test_centroid_is_the_renormalized_running_mean():
    e = np.eye(384, dtype=np.float32)
    d = diagnosis("d1", "x").model_copy(update={"embedding": e[0].tolist()})
    mode = new_mode(d, round_=0)
    add_member(mode, e[1])
    assert np.allclose(mode.centroid[:2], [2**-0.5, 2**-0.5], atol=1e-6)
    add_member(mode, e[1])  # c = normalize(2·c + e1) = normalize([√2, √2 + 1])
    expected = np.array([2**0.5, 2**0.5 + 1]) / np.linalg.norm([2**0.5, 2**0.5 + 1])
    assert np.allclose(mode.centroid[:2], expected, atol=1e-6) and mode.members == 3
    other = diagnosis("d2", "y").model_copy(update={"embedding": e[2].tolist()})
    joined, created, sim = assign(other, [mode], threshold=0.6)
    assert created and joined.id != mode.id and sim == 1.0 and other.mode_id == joined.id


def test_hardness_importance_visits_and_history():
    mode = new_mode(diagnosis("d1", "x"), round_=1)
    observe_hardness(mode, 3, 10, round_=2)
    assert mode.hardness == 0.3 and mode.hardness_n == 10 and mode.in_band
    observe_hardness(mode, 19, 20, round_=3)  # 0.95: mastered, leaves the band
    assert not mode.in_band
    observe_training(mode, before=0.2, after=0.5, round_=3)  # first outcome: w = 0.3
    assert mode.importance == pytest.approx(0.3)
    observe_training(mode, before=0.5, after=0.4, round_=4)  # w = 0.5·0.3 + 0.5·(−0.1) = 0.1
    assert mode.importance == pytest.approx(0.1) and mode.importance_n == 2
    visit(mode, 5, round_=4)
    visit(mode, 2, round_=5)
    assert mode.visits == 7 and mode.last_round == 5
    set_status(mode, "validated", round_=5, reason="test")
    events = [e.event for e in mode.history]
    assert events == [
        "created",
        "hardness",
        "hardness",
        "band_exit",
        "training",
        "training",
        "visit",
        "visit",
        "status",
    ]
    assert mode.history[-1].values == {"old": "candidate", "new": "validated", "reason": "test"}
    with pytest.raises(ValueError):
        observe_hardness(mode, 3, 0)


def test_validation_and_refutation_rate():
    modes = [new_mode(diagnosis(f"d{i}", "x")) for i in range(3)]
    validate(modes[0], targeted_success=0.2, control_success=0.6)
    validate(modes[1], targeted_success=0.6, control_success=0.6)
    assert [m.status for m in modes] == ["validated", "refuted", "candidate"]
    assert refutation_rate(modes) == 0.5 and refutation_rate(modes[2:]) is None


def test_hardness_from_stored_rollouts(tmp_path):
    store = open_store(tmp_path)
    store.put_many([scene("s1", mode_id="m1"), scene("s2", mode_id="m1"), scene("s3", mode_id="m2")])
    outcomes = {"s1": [True, False, False], "s2": [True], "s3": [True, True]}
    store.put_many(
        [
            RolloutRecord(
                id=f"{s}-{i}",
                scene_id=s,
                policy_id="p1" if i < 2 else "p0",
                success=ok,
                steps=10,
                episode_return=float(ok),
                seed=i,
                phase_reached="grasp",
            )
            for s, oks in outcomes.items()
            for i, ok in enumerate(oks)
        ]
    )
    assert hardness_from_store(store, "m1") == (2, 4)
    assert hardness_from_store(store, "m1", policy_id="p1") == (2, 3)
    assert hardness_from_store(store, "none") == (0, 0)
