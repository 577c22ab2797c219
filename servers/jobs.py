"""Background jobs for MCP servers: work longer than ~30 s runs in a worker thread with an id, progress, a result
or error, cooperative cancellation and a status file; `register_job_tools` adds get/wait/list/cancel tools.

    jobs = JobManager(run_dir / "jobs")
    register_job_tools(mcp, jobs)                                   # get_job, wait_job, list_jobs, cancel_job

    @tool(mcp, WRITES)
    def start_training(config: TrainConfig) -> JobStarted:
        '''Start a training job; follow it with wait_job.'''
        return JobStarted(job_id=jobs.start(train, config, kind="train"))   # train(job: JobHandle, config)
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
import traceback
import uuid
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel, Field

from servers.common import CANCELS, EXPECTED_ERRORS, READ_ONLY, error_text, tool
from servers.contract import MAX_PAGE
from sim.fileio import RECORD_ID_PATTERN, write_atomic

log = logging.getLogger(__name__)

JobState = Literal["queued", "running", "succeeded", "failed", "cancelled", "interrupted"]
FINISHED: tuple[str, ...] = ("succeeded", "failed", "cancelled", "interrupted")


MAX_QUEUED = 32
"""most jobs waiting to start on one server (a running job is not counted)"""

class JobCancelled(Exception):
    """Raised inside a job by `JobHandle.check()` once the job was cancelled."""


class JobStatus(BaseModel):
    """Where a background job stands."""

    job_id: str
    kind: str = Field(description="what the job does, e.g. 'train' or 'rollouts'")
    state: JobState
    done: float = Field(0.0, description="units of work done")
    total: float | None = Field(None, description="units of work in all, when known")
    message: str = ""
    result: Any = Field(None, description="the job's return value once it succeeded")
    error: str | None = Field(None, description="why the job failed")
    created_at: float
    started_at: float | None = None
    finished_at: float | None = None

    @property
    def finished(self) -> bool:
        return self.state in FINISHED


class JobHandle:
    """Given to a job function as its first argument: report progress, honour cancellation."""

    def __init__(self, manager: JobManager, job_id: str):
        self._manager = manager
        self.job_id = job_id
        self.cancel_event = threading.Event()

    def progress(self, done: float, total: float | None = None, message: str = "") -> None:
        """Record progress; raises JobCancelled when the job was cancelled (a natural check point)."""
        self._manager._update(self.job_id, done=float(done), total=total, message=message)
        self.check()

    def advance(self, units: float) -> None:
        """Add `units` of work done (total and message unchanged); raises JobCancelled like `progress`."""
        self._manager._advance(self.job_id, float(units))
        self.check()

    @property
    def cancelled(self) -> bool:
        return self.cancel_event.is_set()

    def check(self) -> None:
        if self.cancel_event.is_set():
            raise JobCancelled(f"job {self.job_id} was cancelled")


class JobManager:
    """Background jobs in worker threads, with progress, results, cooperative cancellation and a status file.

        jobs = JobManager(run_dir / "jobs")
        job_id = jobs.start(train_fn, config, kind="train")     # train_fn(job: JobHandle, config) -> JSON-able
        jobs.status(job_id); jobs.cancel(job_id)
        await jobs.wait(job_id, ctx, timeout_s=50)              # progress notifications while waiting

    A job function calls `job.progress(done, total, message)` now and then (which also raises `JobCancelled`
    after `cancel`). Statuses are written to `state_dir/<job_id>.json`; jobs found unfinished when a new
    manager opens the directory (the server was killed) are marked `interrupted`.
    """

    def __init__(self, state_dir: Path | None = None, max_workers: int = 1):
        self.state_dir = state_dir
        _MANAGERS.add(self)
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="coda-job")
        self._lock = threading.Lock()
        self._jobs: dict[str, JobStatus] = {}
        self._handles: dict[str, JobHandle] = {}
        self._changed = threading.Condition(self._lock)
        if state_dir is not None:
            state_dir.mkdir(parents=True, exist_ok=True)
            self._recover()

    def _recover(self) -> None:
        for path in sorted(self.state_dir.glob("*.json")):
            try:
                status = JobStatus.model_validate_json(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if not status.finished:
                status.state, status.finished_at = "interrupted", time.time()
                status.error = "the server stopped while the job ran; start it again"
                self._save(status)
            self._jobs[status.job_id] = status

    def _save(self, status: JobStatus) -> None:
        if self.state_dir is not None:
            write_atomic(self.state_dir / f"{status.job_id}.json", status.model_dump_json())

    def start(self, fn: Callable[..., Any], *args: Any, kind: str = "job", **kwargs: Any) -> str:
        """Queue `fn(handle, *args, **kwargs)`; returns the job id at once. Refused (OSError) while MAX_QUEUED
        jobs wait: one client cannot stack up work that nobody will wait for."""
        job_id = f"{kind}-{uuid.uuid4().hex[:12]}"
        status = JobStatus(job_id=job_id, kind=kind, state="queued", created_at=time.time())
        handle = JobHandle(self, job_id)
        with self._lock:
            waiting = sum(1 for j in self._jobs.values() if j.state == "queued")
            if waiting >= MAX_QUEUED:
                raise BlockingIOError(f"{waiting} jobs are already queued on this server (at most {MAX_QUEUED}); "
                                      "wait for them (wait_job) or cancel some (cancel_job), then start more")
            self._jobs[job_id] = status
            self._handles[job_id] = handle
            self._save(status)
        # in the starting request's context: sandbox runs of the job count against its caller's share of the pool
        self._pool.submit(contextvars.copy_context().run, self._run, handle, fn, args, kwargs)
        return job_id

    def _run(self, handle: JobHandle, fn, args, kwargs) -> None:
        if handle.cancelled:
            return
        self._update(handle.job_id, state="running", started_at=time.time())
        try:
            result = fn(handle, *args, **kwargs)
        except JobCancelled:
            self._update(handle.job_id, state="cancelled", finished_at=time.time())
        except Exception as exc:  # noqa: BLE001 - a failed job is reported through its status
            log.warning("job %s failed:\n%s", handle.job_id, traceback.format_exc())
            text = error_text(exc) if isinstance(exc, EXPECTED_ERRORS) else f"{type(exc).__name__}: {exc}"
            self._update(handle.job_id, state="failed", error=text, finished_at=time.time())
        else:
            state = "cancelled" if handle.cancelled else "succeeded"
            self._update(handle.job_id, state=state, result=result, finished_at=time.time())

    def _update(self, job_id: str, **changes: Any) -> None:
        with self._changed:
            status = self._jobs[job_id]
            if status.finished and changes.get("state") not in (None, status.state):
                return  # cancelled before it started: keep the first final state
            for key, value in changes.items():
                setattr(status, key, value)
            if "state" in changes:
                self._save(status)
            self._changed.notify_all()

    def _advance(self, job_id: str, units: float) -> None:
        with self._changed:
            self._jobs[job_id].done += units
            self._changed.notify_all()

    def status(self, job_id: str) -> JobStatus:
        with self._lock:
            if job_id not in self._jobs:
                known = ", ".join(list(self._jobs)[-5:]) or "none yet"
                raise LookupError(f"unknown job_id {job_id!r}; recent jobs: {known} (see list_jobs)")
            return self._jobs[job_id].model_copy()

    def list(self, limit: int = 50) -> list[JobStatus]:
        with self._lock:
            jobs = sorted(self._jobs.values(), key=lambda s: s.created_at, reverse=True)[:limit]
            return [s.model_copy() for s in jobs]

    def cancel(self, job_id: str) -> JobStatus:
        """Ask a job to stop (a queued job never starts; a running one stops at its next progress report or
        `check`, e.g. the trainer's rollouts after their current chunk)."""
        status = self.status(job_id)
        if not status.finished:
            handle = self._handles.get(job_id)
            if handle is not None:
                handle.cancel_event.set()
            if status.state == "queued":
                self._update(job_id, state="cancelled", finished_at=time.time())
        return self.status(job_id)

    def wait_sync(self, job_id: str, timeout_s: float) -> JobStatus:
        """Block until the job finished or `timeout_s` passed; returns its status."""
        deadline = time.monotonic() + timeout_s
        self.status(job_id)
        with self._changed:
            while not self._jobs[job_id].finished:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(left)
            return self._jobs[job_id].model_copy()

    async def wait(self, job_id: str, ctx: Context | None = None, timeout_s: float = 50.0) -> JobStatus:
        """Wait up to `timeout_s` for a job, sending a progress notification whenever its progress moves."""
        import anyio

        deadline = time.monotonic() + timeout_s
        last = None
        while True:
            status = self.status(job_id)
            seen = (status.done, status.total, status.message, status.state)
            if ctx is not None and seen != last:
                await ctx.report_progress(status.done, status.total, status.message or status.state)
                last = seen
            left = deadline - time.monotonic()
            if status.finished or left <= 0:
                return status
            await anyio.to_thread.run_sync(self._wait_change, job_id, min(left, 1.0), seen)

    def _wait_change(self, job_id: str, timeout_s: float, seen: tuple) -> None:
        with self._changed:
            s = self._jobs[job_id]
            if (s.done, s.total, s.message, s.state) == seen:
                self._changed.wait(timeout_s)

    def shutdown(self) -> None:
        for job_id, handle in list(self._handles.items()):
            handle.cancel_event.set()
            if self.status(job_id).state == "queued":  # it will never start: final now, as `cancel` does
                self._update(job_id, state="cancelled", finished_at=time.time())
        self._pool.shutdown(wait=False, cancel_futures=True)

    def unfinished(self) -> list[str]:
        with self._lock:
            return [j for j, s in self._jobs.items() if not s.finished]


_MANAGERS: weakref.WeakSet[JobManager] = weakref.WeakSet()
"""every JobManager of this process, for `stop_all_jobs`"""


def stop_all_jobs(grace_s: float = 5.0) -> list[str]:
    """Cancel every job of this process (queued ones never start, running ones stop at their next progress report)
    and wait up to `grace_s` for them; returns the ids of jobs still running then. For a server whose client is
    gone: its jobs' results would reach nobody."""
    managers = list(_MANAGERS)
    for m in managers:
        m.shutdown()
    deadline = time.monotonic() + grace_s
    while True:
        left = [j for m in managers for j in m.unfinished()]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.05)


MAX_WAIT_S = 50.0
"""longest wait_job call: below the 60 s many clients allow a request"""
JobId = Annotated[str, Field(description="id returned by the tool that started the job", pattern=RECORD_ID_PATTERN)]


def register_job_tools(server: MCPServer, jobs: JobManager) -> None:
    """Add get_job, wait_job, list_jobs and cancel_job tools for `jobs` to a server."""

    @tool(server, READ_ONLY)
    def get_job(job_id: JobId) -> JobStatus:
        """Status, progress and (when finished) the result or error of a job."""
        return jobs.status(job_id)

    @tool(server, READ_ONLY, title="Wait for job")
    async def wait_job(
        job_id: JobId,
        ctx: Context,
        timeout_s: Annotated[
            float, Field(description="seconds to wait at most; call again if unfinished", gt=0,
                         le=MAX_WAIT_S)
        ] = 30.0,
    ) -> JobStatus:
        """Wait for a job to finish (progress notifications meanwhile); returns its status."""
        return await jobs.wait(job_id, ctx, timeout_s)

    @tool(server, READ_ONLY)
    def list_jobs(limit: Annotated[int, Field(description="most jobs to list, newest first", ge=1, le=MAX_PAGE)] = 20
                  ) -> list[JobStatus]:
        """Recent jobs of this server, newest first."""
        return jobs.list(limit)

    @tool(server, CANCELS)
    def cancel_job(job_id: JobId) -> JobStatus:
        """Cancel a queued or running job (it stops at its next check point: a progress report, or the next
        chunk of a rollout)."""
        return jobs.cancel(job_id)
