"""Text a program chooses cannot rewrite what a reader sees (session 37, red team: an exception's text with ESC,
CR and OSC 52 erased `coda verify`'s FAIL line, printed a fake all-ok report and hid the verdict)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sim.families import sample_spec
from sim.spec import SceneSpec
from sim.verify import verify_program

FORGE = 'raise ValueError(chr(13) + chr(27) + "[2Kok   executes" + chr(10) + "PASSED" + chr(7) + chr(8238))\n'


def test_a_programs_error_text_comes_back_with_its_control_characters_escaped():
    report = verify_program(FORGE, seed=0)
    failed = next(c for c in report.checks if c.name == "executes")
    assert not failed.passed
    assert not any(ord(c) < 32 or c == "\u202e" for c in failed.message), repr(failed.message)
    assert "\\r\\x1b[2Kok   executes\\nPASSED\\x07\\u202e" in failed.message


@pytest.mark.parametrize("field", ["instruction", "template"])
def test_a_task_text_with_control_characters_is_refused(field):
    data = sample_spec("pick_place", 0).model_dump(mode="json")
    data["task"][field] = "put the mug \x1b[8m in the bowl"
    with pytest.raises(ValidationError, match="without control characters, got U\\+001B"):
        SceneSpec.model_validate(data)
