"""External targets for the loop (`coda run --target external:...`, `Preset.external`): the flag's checks, and a
tiny run against robosuite (skipped without the external venv) whose probe failures become diagnosed modes with
verified scenes of this simulator resembling them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from agent.presets import Preset, external_tasks, get_preset


def test_external_tasks_are_parsed_and_checked():
    assert external_tasks("robosuite:Lift,Door+metaworld:push-v3") == ["robosuite:Lift", "robosuite:Door",
                                                                       "metaworld:push-v3"]
    assert external_tasks("") == [] and get_preset("tiny").external == ""
    with pytest.raises(ValueError, match="BENCHMARK:TASK"):
        get_preset("tiny", external="robosuite")
    with pytest.raises(ValueError, match="external_probe_n must be >= 1"):
        get_preset("tiny", external="robosuite:Lift", external_probe_n=0)
    with pytest.raises(ValueError, match="external_proxies must be >= 0"):
        get_preset("tiny", external="robosuite:Lift", external_proxies=-1)


def test_external_dt_takes_every_earlier_probes_scenes_only_when_the_preset_says(tmp_path):
    from types import SimpleNamespace

    from agent.loop import CoEvolution
    from agent.runstate import RunState

    state = RunState(tmp_path)
    state.step("r0.external", lambda: {"diagnoses": [{"scene_id": "a"}, {"scene_id": "b"}, {"scene_id": "a"}]})
    state.step("r1.external", lambda: {"diagnoses": [{"scene_id": "c"}]})
    on = SimpleNamespace(preset=get_preset("tiny", external="robosuite:Lift", external_dt=True), state=state)
    assert CoEvolution.external_dt_scenes(on, 0) == []  # no probe before the first round
    assert CoEvolution.external_dt_scenes(on, 1) == ["a", "b"]
    assert CoEvolution.external_dt_scenes(on, 2) == ["c", "a", "b"]  # newest first, each scene once
    off = SimpleNamespace(preset=get_preset("tiny", external="robosuite:Lift", external_dt=False), state=state)
    assert CoEvolution.external_dt_scenes(off, 2) == []  # off: the scenes only seed their modes' variants
    assert get_preset("tiny").external_dt  # on by default since external target v3
    old = Preset.from_dict({k: v for k, v in get_preset("tiny").to_dict().items()
                            if k not in ("external_dt", "external_proxies")})
    assert not old.external_dt and old.external_proxies == 0  # a run recorded before the fields did neither


@pytest.mark.parametrize("target, says", [
    ("robosuite:Lift", "give external:BENCHMARK:TASK"),
    ("external:robosuite:Juggle", "unknown robosuite task 'Juggle'; valid tasks: Lift"),
    ("external:gym:CartPole", "unknown external benchmark 'gym'"),
])
def test_a_bad_target_is_one_line_and_creates_nothing(tmp_path, target, says):
    proc = subprocess.run([sys.executable, "-m", "coda.cli", "run", "--preset", "tiny", "--target", target,
                           "--runs-dir", str(tmp_path / "runs"), "--name", "x"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr and len(proc.stderr.strip().splitlines()) <= 3, proc.stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_a_tiny_run_aims_at_its_external_failures(tmp_path):
    from policy.external.base import external_venv, has_package

    if not has_package("robosuite"):
        pytest.skip(f"no external venv with robosuite at {external_venv()} (run scripts/setup --external)")
    cmd = [sys.executable, "-m", "coda.cli", "run", "--preset", "tiny", "--rounds", "2", "--families",
           "pick_place,stack", "--target", "external:robosuite:Lift,Stack", "--set",
           "external_eval_n=3,external_probe_n=3,external_start=true,external_template=true,external_proxies=2,"
           "external_dt=true,external_takeover=true", "--runs-dir", str(tmp_path), "--name", "ext", "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert set(summary["external_before_after"]) == {"robosuite:Lift", "robosuite:Stack"}
    state = json.loads((tmp_path / "ext" / "state.json").read_text())
    steps = state["steps"]
    order = state["order"]
    assert order.index("external.before") < order.index("r0.allocate") and "r1.external" not in order
    assert order.index("r0.train") < order.index("r0.external") < order.index("r1.allocate")
    before = {e["suite"]: e for e in steps["external.before"]["result"]}
    assert all(e["n"] == 3 and "phases" in e for e in before.values())
    probe = steps["r0.external"]["result"]
    assert {s["suite"] for s in probe["suites"]} == set(before)
    failures = sum(round(s["n"] * (1 - s["success_rate"])) for s in probe["suites"])
    assert len(probe["diagnoses"]) == min(failures, 2 * 2)  # external_proxies 2 per task; every one has a scene
    scenes = {p.stem for p in (tmp_path / "ext" / "scenes").glob("*.json")}
    for d in probe["diagnoses"]:
        assert d["scene_id"] in scenes and d["mode_id"] in state["mode_scenes"]
        assert d["scene_id"] in state["mode_scenes"][d["mode_id"]]
        spec = json.loads((tmp_path / "ext" / "scenes" / f"{d['scene_id']}.json").read_text())
        assert spec["start"]["pos"][2] < 0.26 and spec["start"]["opening"] < 0.8  # robosuite's lower, half-open start
        assert spec["task"]["template"] == {"robosuite:Lift": "pp_lift", "robosuite:Stack": "st_on"}[d["suite"]]
    # the next round allocates the modes the probe found
    allocated = set(steps["r1.allocate"]["result"]["per_mode"]) | set(steps["r1.allocate"]["result"].get(
        "replay_per_mode", {}))
    assert {d["mode_id"] for d in probe["diagnoses"]} & allocated
    # and with external_dt the probe's scenes are in round 2's D_t
    assert steps["r1.train"]["result"]["external_dt_scenes"] == len({d["scene_id"] for d in probe["diagnoses"]})
    assert steps["r0.train"]["result"]["external_dt_scenes"] == 0
    # and with external_takeover the policy was rolled out in them, the planner taking over where it failed
    takeover = steps["r1.train"]["result"]["takeover"]
    assert takeover["scenes"] == steps["r1.train"]["result"]["takeover_scenes"] == len(
        {d["scene_id"] for d in probe["diagnoses"]}) and takeover["planner_calls"] == takeover["failed"]
    assert "takeover" not in steps["r0.train"]["result"]


def test_proxy_scenes_copy_the_external_start_only_when_the_preset_says_and_it_is_valid():
    from types import SimpleNamespace

    from agent.loop import CoEvolution

    start = {"pos": [0.46, 0.0, 0.22], "quat": [0.997, 0.003, -0.075, 0.008], "opening": 0.52}
    on, off = (SimpleNamespace(preset=get_preset("tiny", external_start=v, external_gripper_rate=False))
               for v in (True, False))
    assert CoEvolution._proxy_start(on, {"start_robot": start})["start"]["opening"] == 0.52
    assert CoEvolution._proxy_start(off, {"start_robot": start}) == {}
    assert CoEvolution._proxy_start(on, {}) == {}  # cells recorded before the adapters reported a start
    assert CoEvolution._proxy_start(on, {"start_robot": {**start, "pos": [0.46, 0.0, 0.01]}}) == {}  # under the table
    slow = {**start, "gripper_rate": 0.4}  # robosuite's adapter reports its gripper's speed
    assert "gripper_rate" not in CoEvolution._proxy_start(on, {"start_robot": slow})["start"]
    rate = SimpleNamespace(preset=get_preset("tiny"))  # on by default since gripper rate v1
    assert CoEvolution._proxy_start(rate, {"start_robot": slow})["start"]["gripper_rate"] == 0.4


def test_external_table_pairs_the_same_episodes_per_seed():
    from agent.experiment.metrics import paired_outcomes
    from agent.experiment.tables import external_table

    def cell(method, seed, lift, door, base=0.0):
        return {"method": method, "seed": seed, "external": {"robosuite:Lift": sum(lift) / 4,
                                                            "robosuite:Door": sum(door) / 4},
                "external_mean": (sum(lift) + sum(door)) / 8, "external_mean_before": base,
                "external_outcomes": {"robosuite:Lift": lift, "robosuite:Door": door}}

    d = paired_outcomes({"a": [1, 1, 0, 0]}, {"a": [1, 0, 0, 0]})
    assert d["points"] == 25.0 and d["se"] > 0 and d["tasks"] == 1
    assert paired_outcomes({"a": [1]}, {"b": [0]}) is None
    by_method = {"sft": [cell("sft", 0, [0, 0, 0, 0], [0, 0, 0, 0]), cell("sft", 1, [1, 0, 0, 0], [0, 0, 0, 0])],
                 "coda": [cell("coda", 0, [1, 1, 0, 0], [0, 0, 0, 0]), cell("coda", 1, [1, 0, 0, 0], [1, 0, 0, 0])]}
    out, md = external_table(by_method, ["sft", "coda"])
    # seed 0: Lift +50, Door 0 -> +25 points; seed 1: Lift 0, Door +25 -> +12.5; pooled over seeds: +18.75
    assert out["sft"]["vs_ref"]["points"] == 18.75 and out["sft"]["vs_ref"]["seeds"] == 2
    assert out["coda"]["vs_ref"] is None and "coda − method" in md
    assert external_table({"sft": [{"method": "sft", "seed": 0}]}, ["sft"]) == ({}, "(no external targets)")


def test_external_phases_are_summed_per_method_with_each_seeds_base_once():
    from agent.experiment.tables import external_table

    def cell(method, seed, after, before):
        return {"method": method, "seed": seed, "external": {"robosuite:Lift": 0.0}, "external_mean": 0.0,
                "external_mean_before": 0.0, "external_outcomes": {"robosuite:Lift": [0, 0]},
                "external_phases": {"robosuite:Lift": after}, "external_phases_before": {"robosuite:Lift": before}}

    base0, base1 = {"none": 2, "reach": 0}, {"none": 1, "reach": 1}
    by_method = {"sft": [cell("sft", 0, base0, base0), cell("sft", 1, base1, base1)],
                 "coda": [cell("coda", 0, {"none": 0, "reach": 2}, base0), cell("coda", 1, {"none": 1, "reach": 1},
                                                                              base1)]}
    out, md = external_table(by_method, ["sft", "coda"])
    assert out["phases"]["base (before rounds)"]["robosuite:Lift"] == {"none": 3, "reach": 1}  # not counted twice
    assert out["phases"]["coda"]["robosuite:Lift"] == {"none": 1, "reach": 3}
    assert "| coda | none 1, reach 3 |" in md and "furthest phase" in md
    old = {m: [{k: v for k, v in c.items() if not k.startswith("external_phases")} for c in cs]
           for m, cs in by_method.items()}
    assert "phases" not in external_table(old, ["sft", "coda"])[0]  # cells from before phases were kept


def test_servers_get_the_external_venv_but_no_key(monkeypatch, tmp_path):
    from agent.hub import stdio_specs

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-secret")
    monkeypatch.delenv("CODA_EXTERNAL_VENV", raising=False)
    assert stdio_specs(tmp_path, names=("trainer",))[0].target().env is None  # MCP's default few variables
    monkeypatch.setenv("CODA_EXTERNAL_VENV", str(tmp_path / "ext"))
    env = stdio_specs(tmp_path, names=("trainer",))[0].target().env
    assert env["CODA_EXTERNAL_VENV"] == str(tmp_path / "ext") and "PATH" in env
    assert "ANTHROPIC_API_KEY" not in env


def test_a_missing_external_venv_is_named_before_a_run_starts(tmp_path):
    import os

    env = {**os.environ, "CODA_EXTERNAL_VENV": str(tmp_path / "none")}
    proc = subprocess.run([sys.executable, "-m", "coda.cli", "run", "--preset", "tiny", "--target",
                           "external:robosuite:Lift", "--runs-dir", str(tmp_path / "runs"), "--name", "x"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2 and "scripts/setup --external" in proc.stderr, proc.stderr
    assert not (tmp_path / "runs").exists()


def test_the_autonomous_round_prompt_names_the_external_steps_only_with_targets():
    from agent.autonomous import external_step
    from prompts import render_prompt

    def prompt(preset):
        return render_prompt("round", rounds=1, families="stack", max_turns=9, demos_per_family=1, sft_updates=1,
                             budget=3, max_diagnoses=2, external=external_step(preset))

    with_targets = prompt(get_preset("tiny", external="robosuite:Lift,Door"))
    assert "robosuite:Lift, robosuite:Door" in with_targets and "`sim: proxy_scene`" in with_targets
    assert "evaluate_external" not in prompt(get_preset("tiny"))
    assert "add those scenes to `demo_scene_ids`" in with_targets and "at most 24 per task" in with_targets
    assert "demo_scene_ids" not in prompt(get_preset("tiny", external="robosuite:Lift", external_dt=False))
    dt = prompt(get_preset("tiny", external="robosuite:Lift", external_dt=True, external_proxies=5))
    assert "add those scenes to `demo_scene_ids`" in dt and "at most 5 per task" in dt
    assert "takeover_scene_ids" not in dt
    takeover = prompt(get_preset("tiny", external="robosuite:Lift", external_takeover=True))
    assert "demo_scene_ids` (planner demonstrations on them) and to `takeover_scene_ids`" in takeover


def test_external_takeover_needs_the_probe_scenes_in_d_t():
    with pytest.raises(ValueError, match="external_takeover needs external_dt"):
        get_preset("tiny", external="robosuite:Lift", external_takeover=True, external_dt=False)


def test_a_method_without_a_critic_gets_the_probe_scenes_but_no_diagnoses(tmp_path, monkeypatch):
    """`external_probe_all`: a baseline probes the external tasks and gets a scene per failure (for its D_t), with
    no critic call, diagnosis or mode; a critic method gets both."""
    from types import SimpleNamespace

    from agent.loop import CoEvolution
    from agent.runstate import RunState
    from sim.evidence.models import Evidence

    monkeypatch.setattr(Evidence, "model_validate", classmethod(lambda cls, value: value))  # the critic is a stub
    failures = [{"seed": k, "start": [], "evidence": {}} for k in range(3)]
    rows = [{"suite": "robosuite:Lift", "family": "pick_place", "n": 4, "success_rate": 0.25, "failures": failures,
             "benchmark": "robosuite", "task": "Lift"}]
    calls = []

    class Critic:
        def diagnose(self, evidence):
            calls.append("diagnose")
            return SimpleNamespace(factor="spatial", phase="grasp", cause="c", evidence_steps=[], state_facts=[])

    def loop(critic: bool):
        obj = SimpleNamespace(
            preset=get_preset("tiny", external="robosuite:Lift", external_probe_all=True, external_proxies=2),
            method=SimpleNamespace(critic=critic), state=RunState(tmp_path / str(critic)), run_id="t",
            roles=SimpleNamespace(critic=Critic()), external_eval=lambda *a, **k: rows, save_ledger=lambda: None,
            _proxy_scene=lambda r, row, failure, i: f"scene-{failure['seed']}",
            call=lambda server, tool, **k: calls.append(tool) or {"mode_id": "m"})
        return CoEvolution.external_targets(obj, 0)

    out = loop(critic=False)
    assert out["scenes"] == ["scene-0", "scene-1"] and out["diagnoses"] == [] and calls == []
    out = loop(critic=True)
    assert out["scenes"] == ["scene-0", "scene-1"] and [d["scene_id"] for d in out["diagnoses"]] == out["scenes"]
    assert calls == ["diagnose", "record_diagnosis"] * 2
