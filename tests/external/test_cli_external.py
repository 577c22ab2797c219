"""`coda eval --external`: one-line errors (no venv, unknown task or benchmark, conflicting options) and, slow,
end-to-end runs of a small checkpoint on robosuite's Lift and Meta-World's pick-place-v3 with the suite-shaped JSON
and a GIF."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from policy.external.base import VENV_ENV

ERRORS = [
    # (argv, extra environment, words the one-line error must contain)
    (["--external", "robosuite:Lift,Dorr"], {}, ["'Dorr'", "valid tasks: Lift, Stack, PickPlaceCan, Door"]),
    (["--external", "metaworld:pick-place-v2"], {},
     ["unknown metaworld task 'pick-place-v2'", "valid tasks: pick-place-v3, push-v3, drawer-open-v3, door-open-v3"]),
    (["--external", "robosuite:Lift+metaworld:reach-v3"], {}, ["'reach-v3'", "pick-place-v3"]),
    (["--external", "libero:spatial"], {}, ["'libero'", "valid benchmarks: robosuite, metaworld"]),
    (["--external", "robosuite"], {}, ["BENCHMARK:TASK", "robosuite:Lift,Door"]),
    (["--external", "robosuite:Lift"], {VENV_ENV: "{tmp}/no-venv"}, ["no-venv", "run scripts/setup --external"]),
    (["--external", "robosuite:Lift", "--family", "stack"], {}, ["--external excludes --family"]),
    (["--family", "stack", "--gif", "{tmp}/g"], {}, ["--external only"]),
    (["--family", "stack", "--external-frame", "home"], {}, ["--external only"]),
    (["--external", "robosuite:Lift", "--external-frame", "home"], {}, ["--external-frame applies to metaworld"]),
    (["--family", "stack", "--gripper-map", "opening"], {}, ["--external only"]),
    (["--external", "metaworld:push-v3", "--gripper-map", "opening"], {}, ["--gripper-map applies to robosuite"]),
    (["--family", "stack", "--rot-gain", "1"], {}, ["--external only"]),
    (["--external", "metaworld:push-v3", "--rot-gain", "1"], {}, ["--rot-gain applies to robosuite"]),
    (["--external", "robosuite:Lift", "--rot-gain", "0"], {}, ["--rot-gain must be in (0, 10]"]),
    (["--external", "robosuite:Lift", "--rot-gain", "nan"], {}, ["--rot-gain must be in (0, 10]"]),
    (["--family", "stack", "--object-yaw", "canonical"], {}, ["--external only"]),
    (["--family", "stack", "--first-group", "3"], {}, ["--external only"]),
    (["--external", "robosuite:Lift", "--first-group", "-1"], {}, ["--first-group must be in [0, 1000]"]),
]


def coda(argv, tmp_path, extra=None, timeout=300):
    env = {**os.environ, **{k: v.format(tmp=tmp_path) for k, v in (extra or {}).items()}}
    return subprocess.run([sys.executable, "-m", "coda.cli", "eval", *[a.format(tmp=tmp_path) for a in argv]],
                          capture_output=True, text=True, timeout=timeout, cwd=tmp_path, env=env)


@pytest.mark.parametrize("argv,extra,words", ERRORS, ids=[" ".join(a) for a, _, _ in ERRORS])
def test_external_errors_are_one_line(argv, extra, words, tmp_path):
    before = set(tmp_path.rglob("*"))
    proc = coda(["--policy", "{tmp}/p.pt", *argv], tmp_path, extra)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for word in words:
        assert word in lines[0], lines[0]
    assert set(tmp_path.rglob("*")) == before


def test_missing_checkpoint_is_named(robosuite_available, tmp_path):
    proc = coda(["--policy", "{tmp}/none.pt", "--external", "robosuite:Lift"], tmp_path)
    assert proc.returncode == 2 and "none.pt" in proc.stderr and "does not exist" in proc.stderr


@pytest.mark.slow
def test_external_eval_end_to_end(robosuite_available, tmp_path):
    from policy.checkpoint import build_train_state, save_checkpoint
    from policy.config import PolicyConfig, TrainConfig

    state = build_train_state(PolicyConfig(d_model=32, n_layers=1, n_heads=2), TrainConfig(device="cpu"),
                              with_critic=False, device="cpu")
    save_checkpoint(tmp_path / "p.pt", state)
    proc = coda(["--policy", "{tmp}/p.pt", "--external", "robosuite:Lift", "--n", "2", "--max-steps", "12",
                 "--json", "--gif", "{tmp}/gifs"], tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    (row,) = out["suites"]
    assert row["suite"] == "robosuite:Lift" and row["family"] == "pick_place"
    for key in ("n", "success_rate", "stderr", "mean_steps", "outcomes", "per_seed"):
        assert key in row
    assert row["n"] == 2 and len(row["outcomes"]) == 2 and row["mean_steps"] <= 12
    assert out["total"]["n"] == 2
    assert (tmp_path / "gifs" / "robosuite_Lift.gif").stat().st_size > 1000


@pytest.mark.slow
def test_metaworld_eval_end_to_end(metaworld_available, tmp_path):
    from policy.checkpoint import build_train_state, save_checkpoint
    from policy.config import PolicyConfig, TrainConfig

    state = build_train_state(PolicyConfig(d_model=32, n_layers=1, n_heads=2), TrainConfig(device="cpu"),
                              with_critic=False, device="cpu")
    save_checkpoint(tmp_path / "p.pt", state)
    proc = coda(["--policy", "{tmp}/p.pt", "--external", "metaworld:pick-place-v3", "--n", "2", "--seeds", "2",
                 "--max-steps", "10", "--json", "--gif", "{tmp}/gifs"], tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    (row,) = out["suites"]
    assert row["suite"] == "metaworld:pick-place-v3" and row["benchmark"] == "metaworld"
    assert row["family"] == "pick_place"
    assert row["n"] == 4 and len(row["per_seed"]) == 2 and row["mean_steps"] <= 10
    assert row["mean_external_steps"] <= 80 and out["total"]["n"] == 4
    # the failure analysis by phase: a histogram over the ladder, one report per episode, in seed order
    assert row["phase_ladder"] == ["none", "reach", "grasp", "lift", "success"]
    assert sum(row["phases"].values()) == 4 and set(row["phases"]) == set(row["phase_ladder"])
    assert [e["seed"] for e in row["episodes"]] == [0, 1, 100_000, 100_001]
    for e in row["episodes"]:
        assert e["phase"] in row["phase_ladder"] and e["min_tcp_obj_dist"] >= 0 and "final_obj_displacement" in e
    assert row["mean_min_tcp_obj_dist"] > 0
    assert (tmp_path / "gifs" / "metaworld_pick-place-v3.gif").stat().st_size > 1000


def test_venv_without_robosuite_is_one_line(tmp_path, monkeypatch):
    venv = tmp_path / "bare-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    proc = coda(["--policy", "{tmp}/p.pt", "--external", "robosuite:Lift"], tmp_path, {VENV_ENV: str(venv)})
    # the venv exists, so the checkpoint is checked next; with one, the worker names what it cannot import
    assert proc.returncode == 2 and "p.pt" in proc.stderr
    from policy.external import make_adapter
    from policy.external.base import ExternalUnavailable

    monkeypatch.setenv(VENV_ENV, str(venv))
    with pytest.raises(ExternalUnavailable, match="cannot import 'numpy'.*run scripts/setup --external"):
        make_adapter("robosuite", "Lift")
