"""`coda memory ...` and `coda bench memory` (called in-process on a small store)."""

import argparse
import json

from memory_workers import diagnosis, open_store, scene

from coda.commands import memory as memory_command
from memory_store import bench
from memory_store.modes import record_diagnosis


def _run(argv, capsys):
    parser = argparse.ArgumentParser(prog="coda")
    memory_command.register(parser.add_subparsers(dest="command"), "memory")
    args = parser.parse_args(["memory", *argv])
    rc = args.func(args)
    return rc, capsys.readouterr().out


def test_memory_commands(tmp_path, capsys):
    path = str(tmp_path / "mem")
    store = open_store(path)
    store.put(scene("s1"))
    _, mode, _ = record_diagnosis(store, diagnosis("d1", "the gripper hits the rim"))

    rc, out = _run(["ls", "--store", path, "--json"], capsys)
    listing = json.loads(out)
    assert rc == 0 and listing["scenes"]["rows"] == 1 and listing["modes"]["rows"] == 1

    rc, out = _run(["show", mode.id, "--store", path, "--json"], capsys)
    assert json.loads(out)["table"] == "modes"
    rc, out = _run(["show", "d1", "--store", path], capsys)
    assert "<384 floats>" in out
    rc, out = _run(["show", "nope", "--store", path], capsys)
    assert rc == 1 and "no record" in out

    rc, out = _run(["modes", "--store", path, "--json"], capsys)
    assert [m["id"] for m in json.loads(out)] == [mode.id]

    rc, out = _run(["export", str(tmp_path / "exp"), "--store", path, "--json"], capsys)
    assert rc == 0 and json.loads(out)["diagnoses"] == 1
    rc, out = _run(["import", str(tmp_path / "exp"), "--store", str(tmp_path / "other"), "--json"], capsys)
    assert json.loads(out)["modes"]["inserted"] == 1
    assert open_store(tmp_path / "other").counts() == store.counts()


def test_bench_reports_throughput_and_latency(tmp_path):
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    args = parser.parse_args(
        [*"--rows 400 --batch 100 --queries 20 --embed-sentences 0".split(), "--store", str(tmp_path)]
    )
    result = bench.run(args)
    assert result["rows"] == 400 and result["rewrite_same_ids_inserted"] == 0
    assert result["add_rows_per_s"] > 0
    assert set(result["search_no_index_ms"]) == {"p50", "p95"}
    assert "search_vector_index_ms" not in result  # below VECTOR_INDEX_MIN_ROWS
