"""The adapter interface of an external benchmark, and the worker process that hosts its simulator.

An external suite's simulator runs in its own virtualenv (`scripts/setup --external` makes `.venv-external`),
because it pins libraries this project cannot share (robosuite 1.5 needs MuJoCo 3, this project MuJoCo 4). The
policy stays in this process; the env lives in a worker subprocess that speaks `policy.external.protocol` over
its stdin / stdout. An adapter turns the worker's raw simulator state into this project's observation
(`sim.env.make_observation`) and this project's action chunks into the benchmark's controller commands, and
reports success from the benchmark's own success function.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from abc import ABC, abstractmethod
from pathlib import Path

import numpy as np

from policy.external import protocol

VENV_ENV = "CODA_EXTERNAL_VENV"
"""environment variable naming the external virtualenv (default: `.venv-external` at the repository root)"""
SETUP_HINT = "run scripts/setup --external"


class ExternalUnavailable(OSError):
    """The external suite cannot run here (no external venv, its package missing, the worker died)."""


def repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


def external_venv() -> Path:
    return Path(os.environ.get(VENV_ENV) or repo_root() / ".venv-external")


def external_python(package: str) -> Path:
    """The external venv's python, or ExternalUnavailable (one line, naming the fix) when it is missing."""
    venv = external_venv()
    python = venv / "bin" / "python"
    if not python.exists():
        raise ExternalUnavailable(f"no external virtualenv at {venv} (the {package} simulator runs there): "
                                  f"{SETUP_HINT}")
    return python


def has_package(package: str) -> bool:
    """Whether the external venv exists and imports `package` (for tests that skip without it)."""
    try:
        python = external_python(package)
    except ExternalUnavailable:
        return False
    probe = subprocess.run([str(python), "-c", f"import importlib.util as u, sys; "
                            f"sys.exit(0 if u.find_spec({package!r}) else 1)"], capture_output=True, timeout=60)
    return probe.returncode == 0


class WorkerProcess:
    """A worker script run by the external venv's python; `call` sends one message and returns the answer.

    `send` / `receive` split a call so several workers can step in parallel while this process waits."""

    def __init__(self, script: Path, package: str, env: dict | None = None):
        python = external_python(package)
        self.package = package
        self._log = tempfile.TemporaryFile(prefix="coda-external-", suffix=".log")
        child_env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
        child_env.update(env or {})
        self.proc = subprocess.Popen([str(python), "-u", str(script)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._log, env=child_env, cwd=script.parent)
        self._pending = False
        try:
            hello = self._read()
        except ExternalUnavailable:
            missing = re.search(r"No module named '([^']+)'", self.log_tail(10_000))
            self.close()
            if missing:
                raise ExternalUnavailable(f"the {package} worker cannot import {missing.group(1)!r} in "
                                          f"{external_venv()}: {SETUP_HINT}") from None
            raise
        if not hello.get("ready"):
            raise ExternalUnavailable(f"the {package} worker did not start: {self.log_tail()}")

    def log_tail(self, n: int = 600) -> str:
        if self._log.closed:
            return "(log closed)"
        self._log.seek(0)
        text = self._log.read().decode("utf-8", "replace")
        lines = [ln for ln in text.splitlines() if ln.strip() and "WARNING" not in ln and "INFO" not in ln]
        return " | ".join(lines)[-n:] or "(no output)"

    def _read(self) -> dict:
        try:
            return protocol.read_message(self.proc.stdout)
        except (protocol.ProtocolError, OSError) as exc:
            code = self.proc.poll()
            raise ExternalUnavailable(f"the {self.package} worker stopped (exit {code}): {self.log_tail()}"
                                      ) from exc

    def send(self, msg: dict) -> None:
        if self._pending:
            raise RuntimeError("the worker has an unanswered message")
        try:
            protocol.write_message(self.proc.stdin, msg)
        except (BrokenPipeError, OSError) as exc:
            raise ExternalUnavailable(f"the {self.package} worker is gone (exit {self.proc.poll()}): "
                                      f"{self.log_tail()}") from exc
        self._pending = True

    def receive(self) -> dict:
        self._pending = False
        answer = self._read()
        if "error" in answer:
            raise RuntimeError(f"{self.package} worker: {answer['error']}\n{answer.get('traceback', '')}")
        return answer

    def call(self, msg: dict) -> dict:
        self.send(msg)
        return self.receive()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                if self._pending:
                    self._read()
                    self._pending = False
                protocol.write_message(self.proc.stdin, {"cmd": "close"})
                self._read()
            except (ExternalUnavailable, OSError):
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream:
                stream.close()
        self._log.close()


class ExternalAdapter(ABC):
    """One task of an external benchmark, seen as this project's env.

    reset(seed) -> observation (the `sim.constants.OBS_*` layout); step_chunk((h, 7)) -> (observation, reward,
    terminated, truncated, info) with info["success"] from the benchmark and info["observations"] the observation
    after each executed action. `begin_chunk` / `end_chunk` split `step_chunk` so that many adapters (one worker
    process each) step in parallel."""

    benchmark: str
    task: str
    family: str
    """the nearest of this project's task families (for reports and later routing)"""
    instruction: str
    max_steps: int
    """episode length in this project's 10 Hz control steps"""

    @abstractmethod
    def reset(self, seed: int | None = None) -> dict: ...

    @abstractmethod
    def begin_chunk(self, chunk: np.ndarray, render: bool = False) -> None: ...

    @abstractmethod
    def end_chunk(self) -> tuple[dict, float, bool, bool, dict]: ...

    def step_chunk(self, chunk, render: bool = False) -> tuple[dict, float, bool, bool, dict]:
        self.begin_chunk(chunk, render=render)
        return self.end_chunk()

    @abstractmethod
    def render(self) -> np.ndarray: ...

    @abstractmethod
    def close(self) -> None: ...

    @property
    @abstractmethod
    def steps(self) -> int: ...

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class WorkerAdapter(ExternalAdapter):
    """An adapter whose simulator lives in a `WorkerProcess` (`self.worker`): render, success, steps and close
    are the worker's answers and the adapter's episode counters (`_steps`, `_success`)."""

    worker: WorkerProcess | None
    _steps: int = 0
    _success: bool = False
    gripper_rate: float | None = None
    """how far the benchmark's gripper command moves per action of this project (command units); None: at once"""

    def render(self) -> np.ndarray:
        return self.worker.call({"cmd": "render"})["image"]

    def benchmark_success(self) -> bool:
        """The benchmark's own success function on the current state (what an episode's success is read from)."""
        return bool(self.worker.call({"cmd": "success"})["success"])

    @property
    def steps(self) -> int:
        return self._steps

    def success(self) -> bool:
        return self._success

    def phase_report(self) -> dict | None:
        """How far the current episode got, from the external simulator's state (`policy.external.phases`); None
        for an adapter that does not track phases."""
        tracker = getattr(self, "_tracker", None)
        return tracker.report() if tracker is not None else None

    @property
    def phase_kind(self) -> str | None:
        tracker = getattr(self, "_tracker", None)
        return tracker.kind if tracker is not None else None

    def start_objects(self) -> list[dict]:
        """The current episode's objects at reset, in this project's frame: name, role, category, position
        (metres, table top at z = 0) and half extents — what a scene of this project's simulator resembling the
        episode is built from (`sim.engine.proxy`)."""
        from sim.constants import OBS_OBJECTS

        tokens = np.asarray(self._start_obs[OBS_OBJECTS], dtype=np.float64)
        return [{"name": o.name, "role": o.role, "category": o.category,
                 "pos": [round(float(v), 4) for v in tokens[i, 0:3]],
                 "half_extent": [round(float(v), 4) for v in tokens[i, 13:16]]} for i, o in enumerate(self.objects)]

    def start_robot(self) -> dict:
        """Where the current episode's hand started, in this project's frame: TCP position (m), orientation
        (w, x, y, z; identity = fingers down) and finger opening (1 open), and how fast the benchmark's gripper
        closes (`gripper_rate`, when it is slow) — a `sim.spec.RobotStart`."""
        from sim.constants import OBS_PROPRIO

        p = np.asarray(self._start_obs[OBS_PROPRIO], dtype=np.float64)
        rate = self.gripper_rate
        return {"pos": [round(float(v), 4) for v in p[0:3]], "quat": [round(float(v), 4) for v in p[3:7]],
                "opening": round(float(np.clip(p[10], 0.0, 1.0)), 4), **({"gripper_rate": rate} if rate else {})}

    def evidence(self, rollout_id: str = ""):
        """The current episode as rollout evidence for the failure critic (`policy.external.evidence`)."""
        from policy.external.evidence import ExternalObjectFacts, external_evidence

        tracker = self._tracker
        objects = [ExternalObjectFacts(o["name"], o["role"], o["category"], tuple(o["half_extent"]))
                   for o in self.start_objects()]
        fr = np.asarray(self.info["finger_range"], dtype=np.float64)
        return external_evidence(benchmark=self.benchmark, task=self.task, family=self.family,
                                 instruction=self.instruction, kind=tracker.kind, objects=objects,
                                 series=tracker.series, success=self._success,
                                 gripper_opening=float(abs(fr[0, 1] - fr[0, 0]) + abs(fr[1, 1] - fr[1, 0])),
                                 rollout_id=rollout_id)

    def close(self) -> None:
        worker = getattr(self, "worker", None)
        if worker is not None:
            worker.close()
            self.worker = None


def check_chunk(chunk, action_dim: int, max_len: int) -> np.ndarray:
    c = np.asarray(chunk, dtype=np.float64)
    if c.ndim != 2 or c.shape[1] != action_dim or not 1 <= c.shape[0] <= max_len:
        raise ValueError(f"chunk must have shape (h, {action_dim}) with 1 <= h <= {max_len}, got {c.shape}")
    if not np.all(np.isfinite(c)):
        raise ValueError("chunk contains NaN or infinite values")
    return c

