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
    assert rc == 1 and not out  # the error goes to stderr (test_memory_import_errors)

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



def test_read_only_commands_never_create_a_store(tmp_path, capsys):
    """Issue 17: `coda memory ls --store DIR` created six tables in DIR, and gave a traceback on a file."""
    missing, empty, a_file = tmp_path / "missing", tmp_path / "empty", tmp_path / "file.txt"
    empty.mkdir()
    a_file.write_text("not a store")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    parser = argparse.ArgumentParser(prog="coda")
    memory_command.register(parser.add_subparsers(dest="command"), "memory")
    for argv in (["ls"], ["modes"], ["show", "d1"], ["export", str(tmp_path / "exp")]):
        for store, words in ((missing, "does not exist"), (empty, "none of the memory tables"),
                             (a_file, "is a file")):
            args = parser.parse_args(["memory", *argv, "--store", str(store)])
            rc = args.func(args)
            out, err = capsys.readouterr()
            assert rc != 0 and not out, (argv, store, out)
            assert err.count("\n") == 1 and words in err and str(store) in err, err
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # nothing created
