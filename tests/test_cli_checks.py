"""Options checked before any work (red-team pass 37): an unusable --out, seeds numpy refuses, nan / negative
rates, absurd counts (which hung or overflowed), options that exclude or need each other, a folder or a damaged
file given as --policy. Each is one line on stderr naming the flag and what is valid, exit status 2, nothing
created (as in test_cli_errors)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

HUGE = "99999999999999999999"
SFT = ["train", "sft", "--family", "pick_place", "--demos", "1", "--updates", "1", "--eval", "0"]
AWR = ["train", "awr", "--policy", "{tmp}/p.pt", "--family", "pick_place", "--rounds", "1", "--scenes", "1",
       "--eval", "0", "--out", "{tmp}/awr.pt"]

CASES = [
    # (argv, words the one-line error must contain); {tmp} holds a folder `adir` and a file `afile`
    ([*SFT, "--out", "{tmp}/adir"], ["--out", "adir", "is a folder"]),
    ([*SFT, "--out", "{tmp}/afile/x.pt"], ["--out", "afile is a file, not a folder"]),
    ([*SFT, "--out", "{tmp}/afile/sub/x.pt"], ["--out", "afile is a file, not a folder"]),
    ([*SFT, "--seed", "-1", "--out", "{tmp}/s.pt"], ["--seed", ">= 0", "-1"]),
    ([*SFT, "--seed", str(2**32), "--out", "{tmp}/s.pt"], ["--seed", "0..4294967295"]),
    ([*SFT, "--perturbed", "1", "--perturb-sigma", "nan", "--out", "{tmp}/n.pt"], ["--perturb-sigma", "finite"]),
    ([*SFT, "--perturbed", "1", "--perturb-prob", "-3", "--out", "{tmp}/n.pt"], ["--perturb-prob", "[0, 1]", "-3"]),
    ([*SFT, "--demos", HUGE, "--out", "{tmp}/n.pt"], ["--demos", "1..100000"]),
    ([*SFT, "--eval", "20001", "--out", "{tmp}/n.pt"], ["--eval", "0..20000"]),
    ([*AWR, "--horizon", "3"], ["--horizon", "--potential task"]),
    ([*AWR, "--shaping", "fallback", "--potential", "task", "--collect", "sample"], ["--shaping", "--collect branch"]),
    ([*AWR[:-2], "--out", "{tmp}/adir"], ["--out", "is a folder"]),
    ([*AWR, "--rounds", "1000", "--scenes", "1000"], ["--rounds x --scenes", "900000"]),
    ([*SFT, "--d-model", "130", "--out", "{tmp}/n.pt"], ["--d-model", "multiple of the 4 attention heads", "130"]),
    ([*SFT, "--d-model", "100000", "--out", "{tmp}/n.pt"], ["--d-model", "8..2048"]),
    ([*SFT, "--layers", "1000", "--out", "{tmp}/n.pt"], ["--layers", "1..32"]),
    ([*SFT, "--updates", HUGE, "--out", "{tmp}/n.pt"], ["--updates", "1..1000000"]),
    (["eval", "--policy", "{tmp}/p.pt", "--external", "robosuite:Lift", "--max-steps", "999999"],
     ["--max-steps", "1..5000"]),
    (["verify", "{tmp}/scene.py", "--seeds", HUGE], ["--seeds", "1..100000", HUGE]),
    (["experiment", "--preset", "tiny", "--out", "{tmp}/e", "--methods", "sft", "--seeds", HUGE],
     ["--seeds", "0..99", "at most 100"]),
    (["experiment", "--preset", "tiny", "--out", "{tmp}/e", "--methods", "sft", "--seeds", "1000000000"],
     ["--seeds", "at most 100"]),
    (["eval", "--policy", "{tmp}/p.pt", "--programs", "{tmp}/scene.py", "--seeds", HUGE], ["--seeds", "1..100000"]),
    (["eval", "--policy", "{tmp}/p.pt", "--family", "stack", "--n", HUGE], ["--n", "1..20000"]),
    (["eval", "--policy", "{tmp}/adir", "--family", "stack"], ["--policy", "adir", "is a folder", "checkpoint file"]),
    (["sim", "demo", "--n", HUGE], ["--n", "1..100000"]),
    (["sim", "render", "{tmp}/scene.py", "--family", "stack"], ["coda sim render: error:", "--family", "program"]),
    (["sim", "render"], ["coda sim render: error:", "program --family", "required"]),
    (["sim", "render", "--family", "stack", "--out", "{tmp}/adir"], ["--out", "is a folder"]),
    (["sim", "program", "--seed", "-1"], ["--seed", ">= 0", "-1"]),
    (["sim", "demo", "--seed", "-1"], ["--seed", ">= 0", "-1"]),
    (["sim", "render", "--family", "stack", "--seed", "-1"], ["--seed", ">= 0", "-1"]),
    # rounds whose scenes would run into another seed's block (or the evaluation suites')
    (["run", "--rounds", "46", "--runs-dir", "{tmp}/runs"], ["rounds must be at most 45 for seed 0", "46"]),
    (["experiment", "--preset", "tiny", "--out", "{tmp}/e", "--methods", "sft", "--seeds", "0,9", "--rounds", "6"],
     ["rounds must be at most 5 for seed 9", "6"]),
    (["experiment", "--preset", "tiny", "--out", "{tmp}/e", "--methods", "sft", "--rounds", "0"],
     ["--rounds", ">= 1", "0"]),
    # session 39: the round benchmark took counts of 0 or below, and wrote --out only after its first seed
    (["bench", "round", "--replicates", "0"], ["--replicates", ">= 1", "0"]),
    (["bench", "round", "--eval", "-2"], ["--eval", ">= 1", "-2"]),
    (["bench", "round", "--phase-extra", "-1"], ["--phase-extra", ">= 0", "-1"]),
    (["bench", "round", "--out", "{tmp}/adir"], ["--out", "is a folder", "round.json"]),
    (["bench", "round", "--out", "{tmp}/afile/r.json"], ["--out", "afile is a file, not a folder"]),
]


def run_cli(argv: list[str], cwd) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
    return subprocess.run([sys.executable, "-m", "coda.cli", *argv], capture_output=True, text=True, timeout=300,
                          cwd=cwd, env=env)


def assert_one_line(proc: subprocess.CompletedProcess, words: list[str]) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("argv,words", CASES, ids=[" ".join(a[:2]) + " " + " ".join(a[-2:]) for a, _ in CASES])
def test_bad_option_refused_before_any_work(argv, words, tmp_path):
    (tmp_path / "adir").mkdir()
    (tmp_path / "afile").write_text("hi\n")
    before = set(tmp_path.rglob("*"))
    assert_one_line(run_cli([a.format(tmp=tmp_path) for a in argv], tmp_path), words)
    assert set(tmp_path.rglob("*")) == before  # no checkpoint, OUT.tmp, image or experiment folder


def test_eval_of_a_damaged_checkpoint_names_the_file_in_one_line(small_policy_checkpoint, tmp_path):
    """A file of the right format whose policy weights have another shape than its config gives (torch's
    RuntimeError size mismatch, as a traceback, before)."""
    import torch

    payload = torch.load(small_policy_checkpoint, weights_only=True)
    payload["policy"]["tokenizer.type_emb"] = torch.zeros(1)
    torch.save(payload, small_policy_checkpoint)
    line = assert_one_line(run_cli(["eval", "--policy", str(small_policy_checkpoint), "--family", "stack", "--n", "1"],
                                   tmp_path), ["coda eval: error:", str(small_policy_checkpoint), "tokenizer.type_emb"])
    assert "policy weights do not fit" in line


@pytest.fixture
def small_policy_checkpoint(tmp_path):
    from policy.checkpoint import build_train_state, save_checkpoint
    from policy.config import PolicyConfig, TrainConfig

    state = build_train_state(PolicyConfig(d_model=32, n_layers=1, n_heads=4, ff_mult=2), TrainConfig(seed=0),
                              with_critic=False, device="cpu")
    return save_checkpoint(tmp_path / "damaged.pt", state)


def test_the_suite_scene_bound_stays_inside_a_suite_s_block_of_seeds():
    from coda.options import MAX_SUITE_SCENES
    from sim.suites import suite_seed

    tries = 5  # sim.suites.suite_specs' max_tries
    assert suite_seed("in", MAX_SUITE_SCENES * tries - 1) < suite_seed("instances", 0)


def test_awr_scene_seeds_end_where_the_evaluation_suites_begin():
    from coda.commands.train import AWR_FIRST_SEED, AWR_SCENE_SEEDS
    from sim.suites import EVAL_SEED_BASE

    assert AWR_FIRST_SEED + AWR_SCENE_SEEDS == EVAL_SEED_BASE


def test_round_scenes_of_every_seed_stay_inside_its_block():
    """`max_rounds` rounds of novel scenes (10,000 sampler seeds each, from offset 10,000) end where the next seed's
    block, or the evaluation suites' seeds, begin."""
    from agent.presets import ROUND_SEEDS, RUN_SEEDS, max_rounds, scene_seed_block
    from sim.suites import EVAL_SEED_BASE, EVAL_SEED_END

    blocks = sorted(scene_seed_block(s) for s in RUN_SEEDS)
    for seed in RUN_SEEDS:
        start = scene_seed_block(seed)
        end = start + ROUND_SEEDS * (max_rounds(seed) + 1)  # one past the last round's last sampler seed
        later = [b for b in blocks if b > start]
        assert not later or end <= later[0], seed
        assert end <= EVAL_SEED_BASE or start >= EVAL_SEED_END, seed


def test_long_jobs_simulate_on_two_workers_where_two_cpus_are_free(monkeypatch):
    """`coda run` and an experiment's cells start the trainer with two simulation workers on a machine whose
    process may use two CPUs (episodes do not depend on it), one on a single CPU; `--workers` still sets it."""
    import argparse

    from agent import choices
    from agent.experiment.cells import server_args
    from coda.commands import run as run_cmd

    for cpus, want in (({0}, 1), ({0, 1}, 2), (set(range(16)), 2)):
        monkeypatch.setattr(choices.os, "sched_getaffinity", lambda pid, cpus=cpus: cpus)
        assert choices.default_workers() == want
        sub = argparse.ArgumentParser().add_subparsers()
        run_cmd.register(sub, "run")
        parser = sub.choices["run"]
        assert parser.parse_args([]).workers == want
        assert parser.parse_args(["--workers", "3"]).workers == 3
        trainer = server_args({"checkpoint": "/x/base.pt"})["trainer"]
        assert trainer[trainer.index("--workers") + 1] == str(want)
