"""Run state on disk: which steps of a run are done and what they returned, so `--resume` continues exactly.

Each step is recorded after it finishes (atomic write). Steps write to memory with deterministic ids, so a step
that was interrupted half-way is simply run again on resume: its earlier writes are overwritten, not duplicated.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


class RunState:
    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / "state.json"
        self.data: dict[str, Any] = {"steps": {}, "order": [], "created": time.time()}
        if self.path.exists():
            self.data = json.loads(self.path.read_text())

    def done(self, key: str) -> bool:
        return key in self.data["steps"]

    def result(self, key: str) -> Any:
        return self.data["steps"][key]["result"]

    def step(self, key: str, fn: Callable[[], Any]) -> Any:
        """Run `fn` unless `key` is already done; record its (JSON-able) result."""
        if self.done(key):
            return self.result(key)
        t0 = time.perf_counter()
        result = fn()
        self.data["steps"][key] = {"result": result, "seconds": round(time.perf_counter() - t0, 3),
                                   "finished": time.time()}
        self.data["order"].append(key)
        self.save()
        return result

    def set(self, key: str, value: Any) -> None:
        self.data[key] = value
        self.save()

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, default=str))
        os.replace(tmp, self.path)

    def seconds(self) -> dict[str, float]:
        return {k: v["seconds"] for k, v in self.data["steps"].items()}
