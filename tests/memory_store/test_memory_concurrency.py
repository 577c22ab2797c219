"""Two writers at once lose nothing; a writer killed mid-write leaves a consistent store."""

import multiprocessing as mp
import os
import signal
import time
from pathlib import Path

from memory_workers import CRASH_BATCH, open_store, write_many, write_until_killed

SPAWN = mp.get_context("spawn")


def test_two_processes_writing_at_once_lose_nothing(tmp_path):
    open_store(tmp_path)  # create the tables once, as the memory server would
    barrier = SPAWN.Barrier(2)
    procs = [
        SPAWN.Process(target=write_many, args=(str(tmp_path), name, 200, barrier)) for name in ("a", "b")
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0]
    store = open_store(tmp_path)
    ids = {r.id for r in store.records("scenes")}
    assert ids == {f"{name}-{i:04d}" for name in ("a", "b") for i in range(200)}
    assert store.count("scenes") == 400


def _wait_for_acks(path: Path, n: int, proc, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_text().split()) >= n:
            return
        assert proc.is_alive(), f"writer died early with exit code {proc.exitcode}"
        time.sleep(0.01)
    raise TimeoutError(f"writer acknowledged fewer than {n} batches in {timeout}s")


def test_killed_writer_leaves_a_consistent_store(tmp_path):
    open_store(tmp_path)
    ack = tmp_path / "acks.txt"
    proc = SPAWN.Process(target=write_until_killed, args=(str(tmp_path / "."), str(ack)))
    proc.start()
    _wait_for_acks(ack, 8, proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(timeout=30)
    assert proc.exitcode == -signal.SIGKILL

    acked = [int(x) for x in ack.read_text().split()]
    assert acked == list(range(len(acked)))
    store = open_store(tmp_path)
    records = store.records("scenes")  # every row reads back and validates
    assert len(records) == store.count("scenes")
    batches = {}
    for r in records:
        assert r.program == "x" * 2000  # no partial row
        batches.setdefault(r.round, set()).add(r.id)
    # whole batches only: the acknowledged ones, plus possibly the one committed just before the kill
    assert all(len(ids) == CRASH_BATCH for ids in batches.values())
    assert sorted(batches) in (acked, [*acked, len(acked)])
    assert store.count("scenes") >= len(acked) * CRASH_BATCH  # nothing acknowledged is lost
    store.put_many([r.model_copy(update={"id": "after-" + r.id}) for r in records[:3]])  # still writable
    assert store.count("scenes") == len(records) + 3
