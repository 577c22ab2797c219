import json

import numpy as np
import pytest
from memory_workers import EMBEDDER, diagnosis, open_store, scene

from memory_store.schema import TABLES, Mode
from memory_store.store import MemoryStore, round_tag


def test_same_record_twice_is_stored_once(tmp_path):
    store = open_store(tmp_path)
    first = store.put(scene("s1"))
    second = store.put(scene("s1"))
    assert (first.inserted, second.inserted, second.updated) == (1, 0, 1)
    assert store.count("scenes") == 1
    store.put_many([scene("s2"), scene("s2", family="stack")])  # duplicate id in one batch: last wins
    assert store.count("scenes") == 2
    assert store.get("scenes", "s2").family == "stack"


def test_reads_filter_and_find(tmp_path):
    store = open_store(tmp_path)
    store.put_many([scene(f"s{i}", family="stack" if i % 2 else "pick_place", round=i) for i in range(6)])
    assert store.count("scenes", "family = 'stack'") == 3
    assert {r.id for r in store.records("scenes", "round >= 4")} == {"s4", "s5"}
    assert store.get("scenes", "missing") is None
    assert store.find("s3")[0] == "scenes"
    assert store.get("scenes", "it's") is None  # quotes are escaped


def test_filtered_search_returns_nearest_within_filter(tmp_path):
    store = open_store(tmp_path)
    store.put_many(
        [
            diagnosis("d1", "the gripper hits the bowl rim", phase="approach"),
            diagnosis("d2", "the gripper hits the bowl rim hard", phase="grasp"),
            diagnosis("d3", "the drawer is opened too little", phase="approach"),
            diagnosis("d4", "the mug slips during lift", factor="attribute", phase="lift"),
        ]
    )
    hits = store.search_diagnoses("the gripper hits the bowl rim", k=3, phase="approach")
    assert [d.id for d, _ in hits] == ["d1", "d3"]
    assert hits[0][1] == pytest.approx(1.0, abs=1e-5) and hits[0][1] > hits[1][1]
    vec = EMBEDDER.encode(["the mug slips during lift"])[0]
    assert [d.id for d, _ in store.search_diagnoses(vec, k=5, factor="attribute")] == ["d4"]
    assert store.search_diagnoses(vec, k=5, mode_id="none") == []


def test_diagnosis_without_embedding_is_embedded_on_write(tmp_path):
    store = open_store(tmp_path)
    d = diagnosis("d1", "x").model_copy(update={"embedding": None})
    store.put(d)
    assert np.allclose(store.get("diagnoses", "d1").embedding, EMBEDDER.encode(["x"])[0])


def test_versions_and_round_tags_time_travel(tmp_path):
    store = open_store(tmp_path)
    store.put(scene("s1", success_rate=0.2))
    assert store.tag_round(1)["scenes"] == store.table("scenes").version
    store.put_many([scene("s1", success_rate=0.6), scene("s2")])
    store.tag_round(2)
    assert store.count("scenes") == 2 and len(store.versions("scenes")) == 3
    old = store.checkout("scenes", round_tag(1))
    assert old.count() == 1 and old.get("s1").success_rate == 0.2
    assert store.checkout("scenes", store.round_versions(2)["scenes"]).get("s1").success_rate == 0.6
    assert store.get("scenes", "s1").success_rate == 0.6  # the live handle stays on the latest version
    with pytest.raises(ValueError, match="tags"):
        store.checkout("scenes", round_tag(9))
    store.tag_round(1)  # moving a tag is allowed
    assert store.round_versions(1) == store.round_versions(2)


def test_export_import_round_trip(tmp_path):
    src = open_store(tmp_path / "src")
    vec = EMBEDDER.encode(["rim"])[0]
    src.put_many([scene(f"s{i}", round=i) for i in range(5)])
    src.put_many([diagnosis(f"d{i}", f"cause {i}", mode_id="m1") for i in range(7)])
    src.put(
        Mode(
            id="m1",
            factor="spatial",
            phase="approach",
            centroid=vec,
            description="rim",
            members=7,
            hardness=0.3,
            importance=0.12,
            status="validated",
        )
    )
    manifest = src.export(tmp_path / "export")
    assert manifest["tables"]["diagnoses"]["rows"] == 7
    dst = open_store(tmp_path / "dst")
    summary = dst.import_(tmp_path / "export")
    assert summary["scenes"] == {"rows": 5, "inserted": 5, "updated": 0}
    for name in TABLES:
        key = lambda r: r.id  # noqa: E731
        assert sorted(dst.records(name), key=key) == sorted(src.records(name), key=key), name
    again = dst.import_(tmp_path / "export")  # idempotent
    assert sum(t["inserted"] for t in again.values()) == 0
    assert dst.counts() == src.counts()


def test_import_rejects_a_changed_file(tmp_path):
    src = open_store(tmp_path / "src")
    src.put(scene("s1"))
    src.export(tmp_path / "export")
    path = tmp_path / "export" / "scenes.jsonl"
    row = json.loads(path.read_text())
    row["family"] = "stack"
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(ValueError, match="checksum"):
        open_store(tmp_path / "dst").import_(tmp_path / "export")
    with pytest.raises(FileNotFoundError, match="coda memory export"):
        open_store(tmp_path / "dst").import_(tmp_path / "nothing")


def test_relative_db_path_opens_locally(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    store = MemoryStore.open("db/memory", embedder=EMBEDDER)
    store.put(scene("s1"))
    assert store.uri == str(tmp_path / "db" / "memory")
    assert open_store(tmp_path / "db" / "memory").count("scenes") == 1


def test_default_embedder_is_minilm(tmp_path):
    from memory_store.embed import MiniLMEmbedder

    assert isinstance(MemoryStore.open(tmp_path).embedder, MiniLMEmbedder)


def test_indexed_search_matches_exact_search(tmp_path):
    store = open_store(tmp_path)
    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((600, 384)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    base = diagnosis("d", "c")
    store.put_many(
        [
            base.model_copy(
                update={
                    "id": f"d{i:03d}",
                    "factor": ("task", "spatial")[i % 2],
                    "embedding": vecs[i].tolist(),
                }
            )
            for i in range(600)
        ]
    )
    query = vecs[7]
    exact = [d.id for d, _ in store.search_diagnoses(query, k=5, factor="spatial")]
    built = store.create_indexes(vector_min_rows=500)
    assert built["diagnoses"] == ["id", "factor", "phase", "mode_id", "scene_id", "embedding"]
    assert [d.id for d, _ in store.search_diagnoses(query, k=5, factor="spatial")] == exact
    store.put(diagnosis("d999", "c", factor="spatial"))  # unindexed rows are still searched
    store.optimize()
    assert store.count("diagnoses") == 601


def test_commit_conflicts_are_retried(tmp_path):
    store = open_store(tmp_path)
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise RuntimeError("Commit conflict for version 7")
        return "ok"

    assert store._retry("test", flaky) == "ok" and len(calls) == 3

    def broken():
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        store._retry("test", broken)
