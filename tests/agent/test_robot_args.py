"""A run's embodiment reaches the servers that make and verify its scenes."""

from pathlib import Path

import pytest

from agent.hub import stdio_specs
from agent.presets import get_preset


def test_servers_of_a_panda_run_get_the_robot():
    specs = {s.name: s.args for s in stdio_specs(Path("/tmp/x"), robot="panda")}
    assert specs["sim"][-2:] == ["--robot", "panda"] and specs["verifier"][-2:] == ["--robot", "panda"]
    assert "--robot" not in specs["memory"] and "--robot" not in specs["trainer"]
    assert all("--robot" not in s.args for s in stdio_specs(Path("/tmp/x")))


def test_a_preset_names_a_known_robot():
    assert get_preset("quick", robot="panda").robot == "panda"
    with pytest.raises(ValueError, match="robot must be one of gripper, panda"):
        get_preset("quick", robot="ur5")


@pytest.mark.slow
def test_a_tiny_panda_run_keeps_every_scene_and_the_policy_on_the_panda(tmp_path):
    import json
    import subprocess
    import sys

    from sim.panda import PandaUnavailable, assets_dir

    try:
        assets_dir()
    except PandaUnavailable as exc:
        pytest.skip(str(exc))
    cmd = [sys.executable, "-m", "coda.cli", "run", "--preset", "tiny", "--families", "pick_place", "--set",
           "robot=panda", "--runs-dir", str(tmp_path), "--name", "panda", "--workers", "1", "--json"]
    subprocess.run(cmd, check=True, capture_output=True, timeout=1200)
    run = tmp_path / "panda"
    robots = {json.loads(p.read_text()).get("robot", "gripper") for p in (run / "scenes").glob("*.json")}
    assert robots == {"panda"}
    from policy.checkpoint import load_checkpoint
    from policy.evaluate import policy_robot

    assert policy_robot(load_checkpoint(run / "checkpoints" / "base.pt")) == "panda"
