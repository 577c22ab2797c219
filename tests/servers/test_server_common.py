"""servers.common and servers.jobs: error translation, images, prompts, the stats resource, the job manager."""

from __future__ import annotations

import asyncio
import io
import logging
import threading
from pathlib import Path
from typing import Annotated

import numpy as np
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_testing import err, ok
from PIL import Image as PILImage
from pydantic import Field

from servers.common import (
    CLIENT_LOG,
    FORWARDED_LOGGERS,
    READ_ONLY,
    WRITES,
    error_text,
    image_content,
    lean_schema,
    load_prompts,
    new_server,
    tool,
)
from servers.contract import MAX_IMAGE_BYTES
from servers.jobs import JobCancelled, JobManager, register_job_tools


def test_error_text_is_clean():
    assert error_text(KeyError("no object named 'mug'")) == "no object named 'mug'"
    assert error_text(ValueError("bad")) == "bad"


def test_large_png_falls_back_to_jpeg():
    noise = np.random.default_rng(0).integers(0, 255, (700, 700, 3), dtype=np.uint8)
    buf = io.BytesIO()
    PILImage.fromarray(noise).save(buf, format="PNG")
    assert buf.tell() > MAX_IMAGE_BYTES
    img = image_content(buf.getvalue())
    assert img.to_image_content().mime_type == "image/jpeg"
    small = image_content(b"\x89PNG")
    assert small.to_image_content().mime_type == "image/png"


def test_tool_errors_reach_the_client_with_their_message():
    mcp = new_server("t", "test")

    @tool(mcp, READ_ONLY)
    def lookup(key: Annotated[str, Field(description="a key", max_length=5)]) -> dict[str, int]:
        """Look a key up."""
        if key == "crash":
            raise RuntimeError("internal detail")
        return {"known": {"a": 1}[key]}

    async def main():
        async with Client(mcp) as c:
            assert (await ok(c, "lookup", {"key": "a"})) == {"known": 1}
            assert (await err(c, "lookup", {"key": "zz"})).endswith(": zz")  # KeyError text, unquoted
            crash = await err(c, "lookup", {"key": "crash"})
            assert "internal detail" not in crash  # unexpected errors stay on the server
            assert "internal error in lookup (RuntimeError)" in crash and "server's log" in crash
            bad = await err(c, "lookup", {"key": "toolong"})  # names the argument, in one line, no pydantic internals
            assert bad == "lookup: argument key: String should have at most 5 characters (got 'toolong')"
            assert (await err(c, "lookup", {})) == "lookup: argument key: Field required"
            tools = (await c.list_tools()).tools
            assert tools[0].annotations.read_only_hint and tools[0].annotations.open_world_hint is False
            assert tools[0].input_schema["properties"]["key"]["description"] == "a key"

    asyncio.run(main())


def test_tools_are_titled_from_their_name_unless_given(tmp_path):
    mcp = new_server("t", "test")

    @tool(mcp, READ_ONLY)
    def get_scene_info() -> str:
        """Say hello,
        on two lines."""
        return "hi"

    @tool(mcp, WRITES, title="Store it")
    def put_thing() -> str:
        """Store."""
        return "ok"

    async def main():
        async with Client(mcp) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            assert (tools["get_scene_info"].title, tools["get_scene_info"].annotations.title) == ("Get scene info",) * 2
            assert (tools["put_thing"].title, tools["put_thing"].annotations.title) == ("Store it",) * 2
            assert tools["get_scene_info"].description == "Say hello, on two lines."
            assert not tools["put_thing"].annotations.read_only_hint  # the shared annotations object is copied
            assert READ_ONLY.title is None

    asyncio.run(main())


def test_lean_schema_keeps_the_meaning_in_fewer_characters():
    ref = {"$ref": "#/$defs/Id"}
    schema = {
        "title": "fArguments", "type": "object", "required": ["a"],
        "$defs": {"Id": {"title": "Id", "type": "string", "pattern": "^x$"},
                  "Once": {"title": "Once", "type": "object", "properties": {"n": {"title": "N", "type": "integer"}}},
                  "Pair": {"type": "array", "items": {"$ref": "#/$defs/Tag"}},  # used twice, holds Tag's one use
                  "Tag": {"type": "string", "enum": ["p", "q"]}},
        "properties": {
            "a": {**ref, "description": "first"},
            "b": {"anyOf": [ref, {"type": "null"}], "default": None},
            "title": {"title": "Title", "type": "string", "default": ""},  # a property may be called "title"
            "c": {"anyOf": [{"type": "string", "maxLength": 4}, {"type": "null"}], "default": None, "title": "C"},
            "d": {"anyOf": [{"enum": ["x", "y"], "type": "string"}, {"type": "null"}]},
            "e": {"$ref": "#/$defs/Once"},
            "f": {"$ref": "#/$defs/Pair"},
            "g": {"$ref": "#/$defs/Pair"},
        },
    }
    assert lean_schema(schema) == {
        "type": "object", "required": ["a"],
        "$defs": {"Id": {"type": "string", "pattern": "^x$"},  # used twice: kept and shared
                  "Pair": {"type": "array", "items": {"type": "string", "enum": ["p", "q"]}}},
        "properties": {
            "a": {**ref, "description": "first"},
            "b": {"anyOf": [ref, {"type": "null"}]},  # a reference cannot take null into its type
            "title": {"type": "string", "default": ""},
            "c": {"type": ["string", "null"], "maxLength": 4},
            "d": {"enum": ["x", "y", None], "type": ["string", "null"]},
            "e": {"type": "object", "properties": {"n": {"type": "integer"}}},  # used once: put in place
            "f": {"$ref": "#/$defs/Pair"},
            "g": {"$ref": "#/$defs/Pair"},
        },
    }


@pytest.fixture
def restore_loggers():
    """The logging tests lower the project loggers' levels and add the client handler: put both back."""
    levels = {n: logging.getLogger(n).level for n in FORWARDED_LOGGERS}
    yield
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)
        logging.getLogger(name).removeHandler(CLIENT_LOG)


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # the client's own warning
def test_log_records_reach_the_client_at_the_level_it_set(restore_loggers):
    """logging/setLevel (a handshake-era client): the project's records at or above the level go to the client as
    notifications/message, from the tool threads as from the event loop; nothing before the client asks."""
    mcp = new_server("t", "test")

    @tool(mcp, READ_ONLY)
    def work(text: str) -> str:
        """Log from the tool's worker thread."""
        logging.getLogger("sim.work").info("working on %s", text)
        logging.getLogger("sim.work").debug("detail of %s", text)
        return text

    got = []

    async def on_log(params):
        got.append((params.level, params.logger, params.data))

    async def main():
        async with Client(mcp, mode="legacy", logging_callback=on_log) as c:
            assert c.server_capabilities.logging is not None
            logging.getLogger("policy.x").warning("before any level was set")
            await c.call_tool("work", {"text": "a"})
            assert await c.set_logging_level("info") is not None  # an empty result
            await c.call_tool("work", {"text": "b"})
            logging.getLogger("memory_store.y").error("from the event loop")
            logging.getLogger("somebody.else").error("not a project logger")
            await c.set_logging_level("error")
            logging.getLogger("sim.work").warning("below error now")
            logging.getLogger("servers.z").critical("still sent")
            await asyncio.sleep(0.2)  # notifications are sent without waiting

    asyncio.run(main())
    assert got == [("info", "sim.work", "working on b"), ("error", "memory_store.y", "from the event loop"),
                   ("critical", "servers.z", "still sent")]


def test_prompts_from_markdown_files(tmp_path):
    (tmp_path / "engine.md").write_text("# Engine\nWrite a scene program for {{ family }}.\n")
    mcp = new_server("t", "test")
    assert load_prompts(mcp, tmp_path) == ["engine"]
    assert load_prompts(new_server("u", "test"), tmp_path / "missing") == []

    async def main():
        async with Client(mcp) as c:
            prompts = (await c.list_prompts()).prompts
            assert [p.name for p in prompts] == ["engine"]
            assert [(a.name, a.required) for a in prompts[0].arguments] == [("family", True), ("context", False)]
            got = await c.get_prompt("engine", {"family": "stack", "context": "use two blocks"})
            body = got.messages[0].content.text
            assert body.startswith("# Engine") and "for stack." in body and body.endswith("use two blocks")
            with pytest.raises(MCPError, match="prompt 'engine' needs argument.s. family; its arguments: family, "
                                               "context .optional."):
                await c.get_prompt("engine", {})

    asyncio.run(main())


def _counting(job, n, gate=None):
    for i in range(n):
        if gate is not None:
            gate.wait(5)
        job.progress(i + 1, n, f"step {i + 1}")
    return {"counted": n}


def test_job_manager_lifecycle(tmp_path):
    jobs = JobManager(tmp_path / "jobs")
    job_id = jobs.start(_counting, 3, kind="count")
    status = jobs.wait_sync(job_id, 10)
    assert status.state == "succeeded" and status.result == {"counted": 3} and status.done == 3

    def boom(job):
        raise ValueError("the config is wrong: lr must be > 0")

    failed = jobs.wait_sync(jobs.start(boom), 10)
    assert failed.state == "failed" and "lr must be > 0" in failed.error

    gate = threading.Event()
    slow = jobs.start(_counting, 1000, gate, kind="slow")
    queued = jobs.start(_counting, 1)  # one worker: waits behind `slow`
    assert jobs.cancel(queued).state == "cancelled"
    jobs.cancel(slow)
    gate.set()
    assert jobs.wait_sync(slow, 10).state == "cancelled"
    assert jobs.wait_sync(queued, 1).state == "cancelled"
    with pytest.raises(LookupError, match="unknown job_id"):
        jobs.status("nope")
    assert {s.job_id for s in jobs.list()} >= {job_id, slow, queued}
    jobs.shutdown()


def test_a_job_runs_in_the_sandbox_share_of_the_caller_that_started_it(tmp_path):
    """Sandbox runs inside a job (e.g. potentials during training) count against the starting caller's share of
    the pool, not against a shared anonymous one."""
    from sim.sandbox import _caller, caller_scope

    jobs = JobManager(tmp_path / "jobs")
    with caller_scope("session-a"):
        job_id = jobs.start(lambda job: _caller(None))
    outside = jobs.start(lambda job: _caller(None))
    assert jobs.wait_sync(job_id, 10).result == "session-a"
    assert jobs.wait_sync(outside, 10).result == ""
    jobs.shutdown()


def test_a_full_job_queue_refuses_more_jobs_until_one_starts(tmp_path):
    from servers.jobs import MAX_QUEUED

    jobs = JobManager(tmp_path / "jobs")  # one worker: the first job runs, the others wait
    gate = threading.Event()
    running = jobs.start(_counting, 1, gate)
    queued = [jobs.start(_counting, 1, gate) for _ in range(MAX_QUEUED)]
    with pytest.raises(BlockingIOError, match=f"at most {MAX_QUEUED}"):
        jobs.start(_counting, 1, gate)
    jobs.cancel(queued[0])  # a cancelled job no longer waits
    assert jobs.start(_counting, 1, gate)
    gate.set()
    assert jobs.wait_sync(running, 10).state == "succeeded"
    jobs.shutdown()


def test_jobs_found_unfinished_are_interrupted(tmp_path):
    jobs = JobManager(tmp_path)
    gate = threading.Event()
    job_id = jobs.start(_counting, 5, gate)
    jobs.wait_sync(job_id, 0.2)
    reopened = JobManager(tmp_path)  # as after a server restart
    status = reopened.status(job_id)
    assert status.state == "interrupted" and "start it again" in status.error
    gate.set()
    jobs.shutdown()
    reopened.shutdown()


def test_job_tools_report_progress(tmp_path):
    jobs = JobManager(tmp_path / "jobs")
    mcp = new_server("jobs", "test")
    register_job_tools(mcp, jobs)

    @tool(mcp, WRITES)
    def start_count(n: Annotated[int, Field(ge=1, le=50)]) -> dict[str, str]:
        """Start counting."""
        return {"job_id": jobs.start(_counting, n, kind="count")}

    async def main():
        seen = []

        async def on_progress(progress, total, message):
            seen.append((progress, total, message))

        async with Client(mcp) as c:
            job_id = (await ok(c, "start_count", {"n": 5}))["job_id"]
            res = await c.call_tool("wait_job", {"job_id": job_id, "timeout_s": 10}, progress_callback=on_progress)
            assert not res.is_error and res.structured_content["state"] == "succeeded"
            assert res.structured_content["result"] == {"counted": 5}
            assert seen and seen[-1][0] == 5
            assert (await ok(c, "get_job", {"job_id": job_id}))["done"] == 5
            assert len((await ok(c, "list_jobs", {}))["result"]) == 1
            assert (await ok(c, "cancel_job", {"job_id": job_id}))["state"] == "succeeded"  # already finished
            assert "unknown job_id" in await err(c, "get_job", {"job_id": "count-000"})
            assert "timeout_s" in await err(c, "wait_job", {"job_id": job_id, "timeout_s": 1e6})
            names = {t.name: t.annotations for t in (await c.list_tools()).tools}
            assert names["cancel_job"].destructive_hint and names["wait_job"].read_only_hint

    asyncio.run(main())
    jobs.shutdown()


def test_job_cancelled_exception_is_raised_by_check(tmp_path):
    jobs = JobManager()
    gate = threading.Event()
    job_id = jobs.start(_counting, 10, gate)
    jobs.cancel(job_id)
    gate.set()
    assert jobs.wait_sync(job_id, 5).state == "cancelled"
    assert issubclass(JobCancelled, Exception)
    jobs.shutdown()
    assert not Path(tmp_path / "jobs").exists()


def test_stats_resource_counts_time_inside_tools():
    import json
    import time

    from servers.contract import STATS_URI

    server = new_server("coda-test", "test")

    @tool(server, READ_ONLY)
    def nap(seconds: float) -> float:
        """Sleep."""
        time.sleep(seconds)
        return seconds

    async def main():
        async with Client(server) as c:
            await ok(c, "nap", {"seconds": 0.05})
            await err(c, "nap", {"seconds": "long"})  # rejected by validation: never reaches the function
            await ok(c, "nap", {"seconds": 0.05})
            res = await c.read_resource(STATS_URI)
            return json.loads(res.contents[0].text)

    stats = asyncio.run(main())
    assert stats["calls"] == 2
    assert 0.1 <= stats["handler_seconds"] < 1.0
