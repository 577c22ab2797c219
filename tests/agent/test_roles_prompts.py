"""Prompt files: loaded by name, placeholders filled, missing prompts and values rejected with a clear error."""

from __future__ import annotations

import pytest

from agent.roles.compiler import helper_reference
from agent.roles.engine import sdk_reference
from prompts import PromptError, load_prompt, render_prompt


def test_every_role_prompt_renders(hub):
    engine = render_prompt("engine", **sdk_reference(hub))
    critic = render_prompt("critic", factors="task, spatial", phases="approach, grasp")
    compiler = render_prompt("compiler", helpers=helper_reference(), tools="bc, awr_shaped")
    for text in (engine, critic, compiler):
        assert "{{" not in text
    assert "mug" in engine and "put the mug in the bowl" in engine and "cutting_board" in engine
    assert "h.open_fraction(" in compiler and "awr_shaped" in compiler


def test_missing_prompt_and_placeholders_are_rejected():
    with pytest.raises(PromptError, match="no prompt named 'enginee'; available prompts: compiler, critic, engine"):
        load_prompt("enginee")
    with pytest.raises(PromptError, match=r"needs value\(s\) for \['phases'\]"):
        render_prompt("critic", factors="task")
    with pytest.raises(PromptError, match=r"has no placeholder\(s\) \['colour'\]"):
        render_prompt("critic", factors="task", phases="lift", colour="red")
