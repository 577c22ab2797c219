"""`coda eval --programs`: a checkpoint evaluated on scene programs of one's own, each verified in the sandbox per
seed; a program that fails verification is reported with its reason and skipped, never counted as a failure."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCENES = REPO / "examples" / "scenes"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    from policy.checkpoint import build_train_state, save_checkpoint
    from policy.config import PolicyConfig, TrainConfig

    path = tmp_path_factory.mktemp("ckpt") / "tiny.pt"
    pcfg = PolicyConfig(d_model=32, n_layers=1, n_heads=2, ff_mult=2, n_candidates=2)
    save_checkpoint(path, build_train_state(pcfg, TrainConfig(batch_size=16, device="cpu"), with_critic=False))
    return path


def coda_eval(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "coda.cli", "eval", *argv], capture_output=True, text=True,
                          timeout=600, cwd=cwd)


def test_programs_and_a_folder_with_seeds_give_suite_shaped_results(checkpoint, tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    for name in ("stack.py", "fault_raises.py"):
        shutil.copy(SCENES / name, folder / name)
    done = coda_eval("--policy", str(checkpoint), "--programs", str(SCENES / "pick_place.py"), str(folder),
                     "--seeds", "3", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert [(s["suite"], s["family"], s["n"]) for s in out["suites"]] == [
        (str(SCENES / "pick_place.py"), "pick_place", 3), (str(folder / "stack.py"), "stack", 3)]
    for s in out["suites"]:
        assert set(s) >= {"family", "suite", "n", "success_rate", "stderr", "mean_steps", "scenes"}
        assert "seconds" not in s  # the programs run as one batch: its time is the total's, not split by share
        assert s["scenes"] == 3  # a program that uses `seed` gives a scene per seed
        assert 0.0 <= s["success_rate"] <= 1.0 and s["mean_steps"] > 0
    assert out["total"]["n"] == 6  # the failing program's seeds are not episodes of the policy
    assert out["total"]["seconds"] > 0
    assert [(k["program"], k["seed"]) for k in out["skipped"]] == [(str(folder / "fault_raises.py"), s)
                                                                  for s in range(3)]
    assert all("ZeroDivisionError" in k["reason"] for k in out["skipped"])
    assert done.stderr.count("skipped") == 3


def test_planner_skips_unsolvable_scenes_and_seedless_programs_are_flagged(checkpoint, tmp_path):
    """Session 35 (outsider): a goal out of the hand's reach passed verification and counted as a failure of the
    policy; a program that ignores `seed` gave one scene for every seed, counted as independent episodes."""
    far = tmp_path / "contradiction.py"  # in the bowl yet not near it: every check passes, no one can do it
    far.write_text((SCENES / "pick_place.py").read_text().replace(
        "success=inside(mug, bowl) & ~grasped(mug)", "success=inside(mug, bowl) & ~near(mug, bowl, dist=0.5)").replace(
        "from sim import Scene, grasped, inside, place", "from sim import Scene, inside, near, place"))
    fixed = tmp_path / "fixed.py"
    fixed.write_text((SCENES / "pick_place.py").read_text().replace("seed=seed", "seed=42"))
    done = coda_eval("--policy", str(checkpoint), "--programs", str(far), str(fixed), "--seeds", "2", "--planner",
                     "--json", cwd=tmp_path)
    out = json.loads(done.stdout)
    assert [s["suite"] for s in out["suites"]] == [str(fixed)] and out["suites"][0]["scenes"] == 1, out
    assert out["total"] == {**out["total"], "n": 2, "skipped": 2}
    assert all(k["program"] == str(far) and "planner_solvable" in k["reason"] for k in out["skipped"]), out
    assert "gave 1 distinct scene(s) for 2 seeds" in done.stderr


def test_only_failing_programs_exit_nonzero(checkpoint, tmp_path):
    done = coda_eval("--policy", str(checkpoint), "--programs", str(SCENES / "fault_raises.py"), "--json",
                     cwd=tmp_path)
    assert done.returncode == 1
    assert json.loads(done.stdout)["suites"] == [] and "ZeroDivisionError" in done.stderr


def test_verify_with_seeds_checks_each_seed(tmp_path):
    """`coda verify --seeds K`: every seed verified; the exit code is 1 when any fails, and the JSON lists each."""
    program = tmp_path / "sometimes.py"  # fails at odd seeds
    program.write_text((SCENES / "pick_place.py").read_text() + "\nif seed % 2:\n    raise ValueError('odd seed')\n")
    done = subprocess.run([sys.executable, "-m", "coda.cli", "verify", str(program), "--seeds", "3", "--json"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    out = json.loads(done.stdout)
    assert not out["passed"] and [(r["seed"], r["passed"]) for r in out["seeds"]] == [(0, True), (1, False), (2, True)]
    assert "odd seed" in out["seeds"][1]["checks"][0]["message"]
    done = subprocess.run([sys.executable, "-m", "coda.cli", "verify", str(SCENES / "pick_place.py"), "--seeds", "2"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.count("seed ") == 2 and done.stdout.rstrip().endswith("PASSED")


def test_verify_train_side_names_a_held_out_object(tmp_path):
    program = tmp_path / "duck.py"
    program.write_text((SCENES / "pick_place.py").read_text().replace('"mug"', '"rubber_duck"')
                       .replace("mass=0.25", "mass=0.05"))  # a duck's weight
    run = lambda *a: subprocess.run([sys.executable, "-m", "coda.cli", "verify", str(program), *a],  # noqa: E731
                                    capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert run().returncode == 0  # a scene of one's own may use anything
    done = run("--train-side")
    assert done.returncode == 1 and "FAIL train_side: held out for the OOD suites" in done.stdout, done.stdout
    assert "rubber_duck is a held-out category" in done.stdout


def test_sim_assets_lists_categories_instances_and_the_split(tmp_path):
    run = lambda *a: subprocess.run([sys.executable, "-m", "coda.cli", "sim", "assets", *a, "--json"],  # noqa: E731
                                    capture_output=True, text=True, timeout=120, cwd=tmp_path)
    pool = json.loads(run().stdout)
    cats = {c["name"]: c for c in pool["categories"]}
    assert len(cats) == 85
    assert sum(c["split"] == "heldout" for c in cats.values()) == pool["heldout_categories"]
    assert sum(c["train_instances"] + c["heldout_instances"] for c in cats.values()) == pool["rigid"] + pool["articulated"]
    mug = json.loads(run("--category", "mug").stdout)
    assert len(mug["instance_ids"]) == mug["instances"] and {i["split"] for i in mug["instance_ids"]} == {"train",
                                                                                                      "heldout"}
    held = json.loads(run("--split", "heldout").stdout)["categories"]
    assert held and all(c["split"] == "heldout" for c in held)
