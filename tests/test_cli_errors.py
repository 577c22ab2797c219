"""Bad input anywhere in the CLI: one line on stderr saying what is wrong and what is valid, a non-zero exit and
nothing created on disk (the rows of issue 21's table, plus the neighbours a user is likely to hit)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

CASES = [
    # (argv, words the one-line error must contain)
    (["eval", "--policy", "{tmp}/p.pt", "--family", "laundry"], ["--family", "laundry", "pick_place"]),
    (["eval", "--policy", "{tmp}/nonexistent.pt", "--family", "pick_place"], ["nonexistent.pt", "does not exist"]),
    (["eval", "--policy", "{tmp}/p.pt", "--family", "stack", "--suite", "ood"], ["--suite", "'ood'", "layouts"]),
    (["eval", "--policy", "{tmp}/p.pt", "--family", "stack", "--n", "0"], ["--n", ">= 1"]),
    (["sim", "render", "--family", "laundry"], ["--family", "laundry", "prep"]),
    (["sim", "demo", "--family", "laundry"], ["--family", "laundry", "all"]),
    (["sim", "render", "{tmp}/missing.py"], ["missing.py"]),
    (["train", "sft", "--family", "stack", "--out", "{tmp}/x.pt", "--demos", "-5"], ["--demos", ">= 1", "-5"]),
    (["run", "--runs-dir", "{tmp}/runs", "--backend", "bogus"], ["--backend", "bogus", "offline"]),
    (["run", "--runs-dir", "{tmp}/runs", "--mode", "autonomus"], ["--mode", "autonomus", "orchestrated"]),
    (["run", "--runs-dir", "{tmp}/runs", "--preset", "huge"], ["--preset", "huge", "quick"]),
    (["run", "--runs-dir", "{tmp}/runs", "--families", "pick_place,laundry"], ["laundry", "valid families"]),
    (["run", "--runs-dir", "{tmp}/runs", "--mode", "autonomous"], ["autonomous", "--backend anthropic"]),
    (["run", "--runs-dir", "{tmp}/runs", "--backend", "anthropic"], ["ANTHROPIC_API_KEY", "--backend offline"]),
    (["bench", "round", "--arms", "today,magic"], ["magic", "valid arms"]),
    (["run", "--runs-dir", "{tmp}/runs", "--method", "magic"], ["--method", "magic", "with_dt"]),
    (["run", "--runs-dir", "{tmp}/runs", "--method", "sft", "--mode", "autonomous", "--backend", "anthropic"],
     ["--method sft", "autonomous"]),
    (["serve", "sim", "--transport", "http", "--port", "99999"], ["--port", "1..65535", "99999"]),
    (["serve", "trainer", "--run-dir", "{tmp}/runs/x", "--torch-threads", "0"], ["--torch-threads", ">= 1", "0"]),
    (["memory", "modes", "--store", "{tmp}/nonexistent/store"], ["no memory store", "does not exist"]),
    (["eval", "--policy", "{tmp}/p.pt"], ["--family", "--programs"]),
    (["eval", "--policy", "{tmp}/p.pt", "--programs", "{tmp}/none.py"], ["none.py", "no such scene program"]),
    (["eval", "--policy", "{tmp}/p.pt", "--programs", "{tmp}"], ["holds no scene programs"]),
    (["eval", "--policy", "{tmp}/p.pt", "--family", "stack", "--programs", "{tmp}"], ["exclude each other"]),
    (["run", "--runs-dir", "{tmp}/runs", "--name", "nope", "--resume"], ["--resume", "no run to continue", "nope"]),
    (["run", "--runs-dir", "{tmp}/runs", "--resume"], ["--resume", "--name"]),
    (["verify", "{tmp}/scene.py", "--seed", "-5"], ["--seed", ">= 0", "-5"]),
    (["verify", "{tmp}"], ["is a folder", "eval --programs"]),
    (["eval", "--policy", "{tmp}/p.pt", "--family", "stack", "--planner"], ["--planner", "--programs"]),
    (["serve", "sim", "--run-dir", ""], ["--run-dir", "empty"]),
    (["serve", "memory", "--run-dir", "{tmp}/rd/x", "--memory-uri", "/proc/nonexistent/mem"],
     ["--memory-uri", "/proc/nonexistent/mem", "cannot start"]),
    (["sim", "render", "--family", "stack", "--size", "500"], ["--size", "<= 480", "500"]),
    # issue 37: bad export folders, and the benchmarks' numbers checked before any work (no ZeroDivisionError)
    (["memory", "import", "{tmp}/noexport", "--store", "{tmp}/new"], ["noexport", "does not exist"]),
    (["bench", "sim", "--episodes", "-1"], ["--episodes", ">= 1", "-1"]),
    (["bench", "sandbox", "--programs", "-1"], ["--programs", ">= 1", "-1"]),
    (["bench", "sandbox", "--rounds", "0"], ["--rounds", ">= 1", "0"]),
    (["bench", "rollouts", "--workers", "0"], ["--workers", ">= 1", "0"]),
    (["bench", "policy", "--devices", "bogus"], ["--devices", "'bogus'", "'cpu'"]),
    (["bench", "critic", "--families", "bogus"], ["--families", "bogus", "valid families", "pick_place"]),
    (["bench", "mcp", "--calls", "0"], ["--calls", ">= 1", "0"]),
    (["bench", "memory", "--rows", "-5"], ["--rows", ">= 1", "-5"]),
    (["bench", "round", "--seeds", "a"], ["--seeds", "integer", "'a'"]),
]


@pytest.mark.parametrize("argv,words", CASES, ids=[" ".join(a[:2]) + " " + a[-1] for a, _ in CASES])
def test_bad_input_one_line_nonzero_nothing_created(argv, words, tmp_path):
    argv = [a.format(tmp=tmp_path) for a in argv]
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
    before = set(tmp_path.rglob("*"))
    proc = subprocess.run([sys.executable, "-m", "coda.cli", *argv], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, env=env)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode != 0, proc.stdout
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for word in words:
        assert word in lines[0], lines[0]
    assert "--api-key" not in lines[0]  # no flag the CLI does not have
    assert set(tmp_path.rglob("*")) == before  # no run folder, store or file as a side effect


def test_eval_of_a_file_that_is_no_checkpoint_says_so_in_one_line(tmp_path):
    bad = tmp_path / "notes.pt"
    bad.write_text("not a checkpoint\n")
    proc = subprocess.run([sys.executable, "-m", "coda.cli", "eval", "--policy", str(bad), "--family", "stack",
                           "--n", "1"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "notes.pt is not a CoDA checkpoint" in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.pt"]


def test_human_output_prints_tables_and_lists_plainly(capsys):
    from coda.cli import emit

    emit({"name": "mug", "size_m": [0.06, 0.123456], "instance_ids": [{"id": "mug/000", "split": "train"}]}, False)
    out = capsys.readouterr().out.splitlines()
    assert out == ["name          mug", "size_m        0.06, 0.1235", "instance_ids", "  id=mug/000  split=train"]


def test_bench_memory_refuses_a_store_that_holds_anything(tmp_path):
    """Issue 37: `coda bench memory --store DIR` wrote thousands of synthetic diagnoses into a store in use."""
    store = tmp_path / "memory"
    store.mkdir()
    (store / "scenes.lance").mkdir()
    before = sorted(tmp_path.rglob("*"))
    proc = subprocess.run([sys.executable, "-m", "coda.cli", "bench", "memory", "--rows", "10", "--store", str(store)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "--store" in lines[0] and "new or empty folder" in lines[0]
    assert sorted(tmp_path.rglob("*")) == before
