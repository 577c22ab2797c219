"""`coda memory import` of a bad export, and opening a store that cannot be reached: one line naming the file (line,
field) and what is valid, a non-zero exit, and no store created or changed (the red-team findings of issue 37)."""

from __future__ import annotations

import hashlib
import json

import pytest
from memory_workers import diagnosis, open_store, scene

from coda.cli import main
from memory_store.store import MemoryStore


def _coda(argv, capsys) -> tuple[int, str, str]:
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def _one_line_error(rc: int, err: str, *words: str) -> None:
    assert rc != 0
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    for word in words:
        assert word in lines[0], lines[0]


@pytest.fixture
def export(tmp_path):
    """An export of a store with two scenes."""
    store = open_store(tmp_path / "src")
    store.put_many([scene("s1"), scene("s2")])
    store.export(tmp_path / "export")
    return tmp_path / "export"


def _rewrite(export, table: str, text: str, rows: int | None = None) -> None:
    """Replace a table file and give the manifest its checksum (and a row count), as a crafted export would."""
    (export / f"{table}.jsonl").write_text(text)
    manifest = json.loads((export / "manifest.json").read_text())
    entry = manifest["tables"][table]
    entry["sha256"] = hashlib.sha256(text.encode()).hexdigest()
    entry["rows"] = text.count("\n") if rows is None else rows
    (export / "manifest.json").write_text(json.dumps(manifest))


def _edit_manifest(export, change) -> None:
    manifest = json.loads((export / "manifest.json").read_text())
    change(manifest)
    (export / "manifest.json").write_text(json.dumps(manifest))


def test_bad_export_folder_creates_no_store(tmp_path, capsys):
    """A missing folder, a folder without manifest.json and a file: checked before the store is opened."""
    (tmp_path / "empty").mkdir()
    (tmp_path / "afile").write_text("hi\n")
    for name, words in (("missing", ["missing", "does not exist"]), ("empty", ["manifest.json", "not found"]),
                        ("afile", ["afile", "is a file, not an export folder"])):
        rc, out, err = _coda(["memory", "import", str(tmp_path / name), "--store", str(tmp_path / "new")], capsys)
        _one_line_error(rc, err, *words)
        assert not (tmp_path / "new").exists()


def test_invalid_row_in_a_later_table_merges_nothing(export, tmp_path, capsys):
    """Every row of every table is checked before the first write: the valid scenes are not stored either."""
    _rewrite(export, "modes", '{"id": "bad"}\n')
    rc, _, err = _coda(["memory", "import", str(export), "--store", str(tmp_path / "new")], capsys)
    _one_line_error(rc, err, "modes.jsonl:1", "invalid Mode", "factor", "Field required", "more")
    assert not (tmp_path / "new").exists()
    dst = open_store(tmp_path / "dst")
    with pytest.raises(ValueError, match="modes.jsonl:1"):
        dst.import_(export)
    assert dst.count("scenes") == 0


def test_row_count_mismatch_merges_nothing(export, tmp_path, capsys):
    _rewrite(export, "scenes", json.dumps(scene("s3").model_dump(mode="json")) + "\n", rows=5)
    rc, _, err = _coda(["memory", "import", str(export), "--store", str(tmp_path / "new")], capsys)
    _one_line_error(rc, err, "scenes.jsonl", "1 rows", "says 5")
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("text,words", [
    ("null\n", ["scenes.jsonl:1", "invalid SceneRecord", "Input should be an object"]),
    ("\n", ["scenes.jsonl:1", "Invalid JSON"]),
    ('{"id": "s1", "family": "pick_place", "program": "x", "round": -1}\n', ["scenes.jsonl:1", "round", "greater than or equal to 0"]),
])
def test_invalid_row_is_one_line_naming_file_line_and_field(export, tmp_path, capsys, text, words):
    _rewrite(export, "scenes", text)
    rc, _, err = _coda(["memory", "import", str(export), "--store", str(tmp_path / "new")], capsys)
    _one_line_error(rc, err, *words)
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("change,words", [
    (lambda m: m.pop("tables"), ["'tables'", "it is missing"]),
    (lambda m: m.update(tables=[1]), ["'tables'", "got [1]"]),
    (lambda m: m["tables"]["scenes"].pop("sha256"), ["tables.scenes.sha256", "64 lowercase hex", "missing"]),
    (lambda m: m["tables"]["scenes"].update(rows=-1), ["tables.scenes.rows", ">= 0"]),
    (lambda m: m["tables"]["scenes"].update(file="../../../../etc/hostname"),
     ["tables.scenes.file", "plain file name", "etc/hostname"]),
    (lambda m: m["tables"]["scenes"].update(file="."), ["tables.scenes.file", "plain file name"]),
])
def test_malformed_manifest_entry_is_refused_before_any_file_is_read(export, tmp_path, capsys, change, words):
    _edit_manifest(export, change)
    rc, _, err = _coda(["memory", "import", str(export), "--store", str(tmp_path / "new")], capsys)
    _one_line_error(rc, err, "manifest.json", *words)
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("raw,words", [
    (b"[1, 2]", ["expected a JSON object", "got list"]),
    (b"{not json", ["not a coda-memory manifest"]),
    (b"\xff\xfe\x00garbage", ["not a coda-memory manifest", "utf-8"]),
])
def test_unreadable_manifest_names_the_file(export, tmp_path, capsys, raw, words):
    (export / "manifest.json").write_bytes(raw)
    rc, _, err = _coda(["memory", "import", str(export), "--store", str(tmp_path / "new")], capsys)
    _one_line_error(rc, err, str(export / "manifest.json"), *words)
    assert not (tmp_path / "new").exists()


def test_show_of_an_unknown_id_goes_to_stderr_and_names_a_listing(export, tmp_path, capsys):
    rc, out, err = _coda(["memory", "show", "nope", "--store", str(tmp_path / "src")], capsys)
    _one_line_error(rc, err, "no record with id 'nope'", "coda memory modes")
    assert not out


def test_unreachable_store_uri_is_one_line(tmp_path, capsys):
    """An unknown scheme (a ValueError from Lance) through the CLI; nothing is created."""
    before = sorted(tmp_path.rglob("*"))
    rc, out, err = _coda(["memory", "ls", "--store", "bogus://bucket/mem"], capsys)
    _one_line_error(rc, err, "bogus://bucket/mem", "cannot open the memory store", "scheme")
    assert not out and sorted(tmp_path.rglob("*")) == before


def test_lance_runtime_error_on_open_becomes_one_line_oserror(monkeypatch):
    """An unreachable S3 bucket: Lance raises a RuntimeError with a Rust source location (a traceback in `coda
    memory ls` and `coda serve memory` before); opening turns it into an OSError with the reason only."""
    import memory_store.store as store_module

    def unreachable(*args, **kwargs):
        raise RuntimeError("lance error: LanceError(IO): Generic S3 error: Failed to resolve region for bucket "
                           "'nonexistent', /root/.cargo/registry/src/lance-io-13.0.0/src/providers/aws.rs:319:13")

    monkeypatch.setattr(store_module.lancedb, "connect", unreachable)
    with pytest.raises(OSError) as caught:
        MemoryStore.open("s3://nonexistent/mem", create=False)
    assert str(caught.value) == ("cannot open the memory store s3://nonexistent/mem: Generic S3 error: Failed to "
                                 "resolve region for bucket 'nonexistent'")


def test_import_whose_write_fails_midway_leaves_the_store_as_it_was(tmp_path, monkeypatch):
    """A write that fails after some batches were merged (a full disk, Ctrl-C) restores every table the import
    touched; the same import then completes as if the first had never run."""
    from memory_store import transfer

    src = open_store(tmp_path / "src")
    src.put_many([scene(f"s{i}") for i in range(7)])
    src.put_many([diagnosis(f"d{i}", f"cause {i}") for i in range(3)])
    src.export(tmp_path / "export")
    dst = open_store(tmp_path / "dst")
    dst.put_many([scene("s0", program="# the destination's own s0"), scene("mine")])
    before = {name: sorted(dst.table(name).to_arrow().to_pylist(), key=lambda r: r["id"]) for name in ("scenes",
                                                                                                   "diagnoses")}
    monkeypatch.setattr(transfer, "IMPORT_BATCH", 2)
    real, calls = MemoryStore.put_many, []

    def failing(self, records):
        calls.append(1)
        if len(calls) == 6:  # scenes merged in full (4 batches), diagnoses half-way (1 of 2)
            raise OSError(28, "No space left on device")
        return real(self, records)

    monkeypatch.setattr(MemoryStore, "put_many", failing)
    with pytest.raises(OSError, match="No space left"):
        dst.import_(tmp_path / "export")
    monkeypatch.setattr(MemoryStore, "put_many", real)
    reopened = open_store(tmp_path / "dst")
    after = {name: sorted(reopened.table(name).to_arrow().to_pylist(), key=lambda r: r["id"]) for name in before}
    assert after == before
    summary = reopened.import_(tmp_path / "export")
    assert summary["scenes"]["rows"] == 7 and summary["diagnoses"]["rows"] == 3
    assert reopened.table("scenes").count_rows() == 8 and reopened.table("diagnoses").count_rows() == 3
