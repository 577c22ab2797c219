"""Run metrics of the report (agent/report.py): the scripted loop's come from its step records, autonomous mode's
from the tool calls in its transcript (it writes no step records)."""

from __future__ import annotations

from agent.report import run_metrics, write_report


def call(tool: str, outcome: str = "ok", **arguments) -> dict:
    return {"turn": 0, "tool": tool, "arguments": arguments, "outcome": outcome}


def autonomous_state() -> dict:
    rollouts = [{"rollout_id": f"r{i}", "scene_id": "a" * 16, "success": i == 0, "steps": 180} for i in range(3)]
    transcript = [
        call("sim__sample_scene", family="stack", seed=0),
        call("sim__sample_scene", family="stack", seed=1),
        call("sim__create_scene", "error", source="oops"),  # failed calls make nothing
        call("sim__resample_scene", scene_id="a" * 16, factor="layout"),
        call("memory__record_scene", scene={"id": "a" * 16, "verified": True}),
        call("memory__record_scene", scene={"id": "b" * 16, "verified": False}),
        call("memory__record_scene", scene={"id": "a" * 16, "verified": True}),  # the same scene again
        call("trainer__collect_rollouts", scene_ids=["a" * 16], per_scene=3),
        call("memory__record_rollouts", rollouts=rollouts),
        call("memory__record_rollouts", rollouts=rollouts[:1]),  # recorded twice: one rollout
        call("memory__record_diagnosis", diagnosis={"id": "d1", "scene_id": "a" * 16}),
        call("memory__record_diagnosis", "error", diagnosis={"id": "d2", "scene_id": "nowhere"}),
        call("memory__set_mode_status", mode_id="m1", status="validated"),
        call("memory__set_mode_status", mode_id="m2", status="validated"),
        call("memory__set_mode_status", mode_id="m2", status="refuted"),  # the latest status counts
    ]
    return {"mode": "autonomous", "steps": {}, "transcript": transcript, "stop_reason": "answered",
            "final_answer": "done", "tokens": {"total": {"input_tokens": 9000, "output_tokens": 1000}}}


def test_autonomous_metrics_count_the_tool_calls_that_made_things():
    m = run_metrics(autonomous_state())
    assert (m["scenes"], m["accepted"], m["rollouts"], m["diagnoses"]) == (3, 1, 3, 1)
    assert (m["validated"], m["refuted"], m["refutation_rate"], m["modes_found"]) == (1, 1, 0.5, None)
    assert m["sim_hours"] == 3 * 180 * 0.1 / 3600 and m["tokens_per_1000_accepted"] == 10_000_000


def test_loop_metrics_come_from_step_records():
    steps = {"r0.generate": {"result": [{"verified": True}, {"verified": False}]},
             "r0.rollouts": {"result": [{"steps": 100}]},
             "r0.diagnose": {"result": [{"mode_id": "m1"}, {"mode_id": "m1"}]},
             "r0.validate": {"result": {"m1": {"status": "validated"}}}}
    m = run_metrics({"steps": steps})
    assert (m["scenes"], m["accepted"], m["rollouts"], m["diagnoses"], m["modes_found"], m["validated"]) == (
        2, 1, 1, 2, 1, 1)


def test_autonomous_report_shows_the_counts(tmp_path):
    text = write_report(autonomous_state(), tmp_path).read_text()
    assert "| scenes | 3 |" in text and "| rollouts | 3 |" in text and "| modes_found | – |" in text
    assert "15 tool calls (2 returned errors)" in text


def test_report_gives_the_paired_ood_difference(tmp_path):
    def ev(suite, outcomes):
        p = outcomes.count("1") / len(outcomes)
        return {"family": "stack", "suite": suite, "n": len(outcomes), "success_rate": p, "stderr": 0.1,
                "mean_steps": 10, "outcomes": outcomes}

    before = [ev("in", "0000"), ev("layouts", "0000"), ev("tasks", "0101")]
    after = [ev("in", "1111"), ev("layouts", "1111"), ev("tasks", "0101")]
    state = {"steps": {"eval.before": {"result": before, "seconds": 1.0}, "eval.after": {"result": after, "seconds": 0.0}}}
    text = write_report(state, tmp_path).read_text()
    assert "paired on the same scenes: **+50.0 ± 0.0 points** over 2 OOD suites" in text
    old = {"steps": {"eval.before": {"result": [{**e, "outcomes": None} for e in before], "seconds": 1.0},
                     "eval.after": {"result": after, "seconds": 0.0}}}
    assert "Paired OOD difference: –" in write_report(old, tmp_path).read_text()
