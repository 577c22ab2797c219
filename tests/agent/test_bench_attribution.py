"""`coda bench attribution`: the retest and targeting figures from intervention outcomes, and bad input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from agent.bench_attribution import kappa, label_of, mode_factor, summarize_arm

REPO = Path(__file__).resolve().parents[2]


def outcome(helps: str | None, solved: bool = False) -> dict:
    """An intervention outcome whose variants help only in scene factor `helps` (None: nowhere)."""
    return {"original_success": solved, "variants": {} if solved else {
        f: [f == helps] for f in ("task", "layout", "attributes")}}


def test_labels_and_mode_factors():
    assert label_of(outcome("layout")) == "spatial" and label_of(outcome(None)) == "execution"
    assert label_of(outcome(None, solved=True)) is None
    assert mode_factor("mode-attribute-grasp-3e7f53403129") == "attribute"
    assert mode_factor("mode-spatial-approach-f80129c475ee") == "spatial"
    assert mode_factor(None) is None and mode_factor("uniform") is None


def test_kappa_is_one_for_identical_labelings_and_zero_at_chance():
    assert kappa(["a", "b", "a", "b"], ["a", "b", "a", "b"]) == 1.0
    assert kappa(["a", "a", "b", "b"], ["a", "b", "a", "b"]) == 0.0
    assert kappa(["a", "a"], ["a", "a"]) is None  # one label everywhere: agreement says nothing


def test_summary_separates_repeatable_attributions_from_drawn_ones():
    first = {"s1": outcome("layout"), "s2": outcome("attributes"), "s3": outcome(None), "s4": outcome(None, True)}
    second = {"s1": outcome("layout"), "s2": outcome("task"), "s3": outcome(None), "s4": outcome(None, True)}
    got = summarize_arm([first, second], {"s1": "spatial", "s2": "attribute", "s4": "task"})
    assert got["failing_scenes"] == 3 and got["labels"] == {"spatial": 1, "attribute": 1, "execution": 1}
    assert got["tested"] == {"task": 3, "layout": 3, "attributes": 3} and got["absent"] == {}
    assert got["retest_agreement"] == round(2 / 3, 3)
    assert got["attribution_repeats"] == 0.5  # s1 repeats, s2 does not
    assert got["targeted_scenes"] == 2 and got["targeted_factor_match"] == 1.0  # s4 solved: not judged
    assert got["targeted_factor_match_retest"] == 0.5


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "coda.cli", "bench", "attribution", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def test_bad_input_is_one_line_and_a_nonzero_exit(tmp_path):
    done = bench("--run", str(tmp_path / "nothing"))
    assert done.returncode != 0 and "holds no run" in done.stderr
    (tmp_path / "state.json").write_text('{"steps": {"r0.intervene": {"result": {}}}, "preset": {"name": "tiny"}}')
    done = bench("--run", str(tmp_path))
    assert done.returncode != 0 and "this run has no interventions" in done.stderr
    (tmp_path / "state.json").write_text('{"steps": {"r0.intervene": {"result": {"s": {"original_success": true}}}},'
                                         ' "preset": {"name": "tiny"}}')
    for args, message in ((["--arms", "remove"], "valid: resample, undo"), (["--rounds", "3"], "rounds with them: [0]"),
                          (["--rounds", "x"], "comma-separated integers"), (["--draws", "0"], "--draws must be")):
        done = bench("--run", str(tmp_path), *args)
        assert done.returncode != 0 and message in done.stderr, (args, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]  # nothing created
