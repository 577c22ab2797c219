"""sim.fileio: paths confined to the run directory, atomic writes, file-safe ids."""

from __future__ import annotations

import re

import pytest

from sim.fileio import RECORD_ID_PATTERN, SCENE_ID_PATTERN, confine, write_atomic, write_new


def test_confine_rejects_escapes(tmp_path):
    assert confine(tmp_path, "exports/a") == (tmp_path / "exports/a").resolve()
    for bad in ("/etc/passwd", "../x", "a/../../x", "", "~/x"):
        with pytest.raises(ValueError):
            confine(tmp_path, bad)
    (tmp_path / "link").symlink_to("/tmp")
    with pytest.raises(ValueError, match="symlink"):
        confine(tmp_path, "link/x")


def test_write_atomic_replaces_the_whole_file_and_leaves_no_temporaries(tmp_path):
    target = tmp_path / "deep" / "f.json"
    write_atomic(target, "old")
    write_atomic(target, b"new")
    assert target.read_bytes() == b"new"
    assert sorted(p.name for p in target.parent.iterdir()) == ["f.json"]


def test_write_new_keeps_the_first_file_and_leaves_no_temporaries(tmp_path):
    target = tmp_path / "deep" / "f.json"
    assert write_new(target, "first") is True
    assert write_new(target, b"second") is False
    assert target.read_text() == "first"
    assert sorted(p.name for p in target.parent.iterdir()) == ["f.json"]


def test_ids_are_plain_file_names():
    assert re.fullmatch(SCENE_ID_PATTERN, "0123456789abcdef")
    assert not re.fullmatch(SCENE_ID_PATTERN, "0123456789ABCDEF")
    for bad in ("../x", ".hidden", "a/b", ""):
        assert not re.fullmatch(RECORD_ID_PATTERN, bad)
    assert re.fullmatch(RECORD_ID_PATTERN, "planner-0123456789abcdef")
