"""Helpers for the memory-store tests: record factories and subprocess writers (spawn-safe, top level)."""

from __future__ import annotations

import os
from pathlib import Path

from memory_store.embed import HashingEmbedder
from memory_store.schema import Diagnosis, SceneRecord
from memory_store.store import MemoryStore

EMBEDDER = HashingEmbedder()
CRASH_BATCH = 25


def scene(id: str, **kw) -> SceneRecord:
    return SceneRecord(
        id=id, family=kw.pop("family", "pick_place"), program=kw.pop("program", f"# {id}"), **kw
    )


def diagnosis(id: str, cause: str, factor: str = "spatial", phase: str = "approach", **kw) -> Diagnosis:
    vec = EMBEDDER.encode([cause])[0]
    return Diagnosis(
        id=id, scene_id=kw.pop("scene_id", "s0"), factor=factor, phase=phase, cause=cause, embedding=vec, **kw
    )


def open_store(path) -> MemoryStore:
    return MemoryStore.open(path, embedder=EMBEDDER)


def write_many(path: str, prefix: str, n: int, barrier) -> int:
    """Write n scenes one record per commit, after every writer reached the barrier."""
    store = open_store(path)
    barrier.wait()
    for i in range(n):
        store.put(scene(f"{prefix}-{i:04d}", round=i))
    return n


def write_until_killed(path: str, ack_path: str) -> None:
    """Write batches of CRASH_BATCH scenes forever; append the batch number to ack_path after each commit."""
    store = open_store(path)
    with Path(ack_path).open("a") as ack:
        batch = 0
        while True:
            store.put_many(
                [
                    scene(f"crash-{batch:05d}-{j:02d}", program="x" * 2000, round=batch)
                    for j in range(CRASH_BATCH)
                ]
            )
            ack.write(f"{batch}\n")
            ack.flush()
            os.fsync(ack.fileno())
            batch += 1
