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
