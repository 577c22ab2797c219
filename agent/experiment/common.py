"""What the parts of an experiment share: backbones, cell names, the cell plan, atomic JSON files, the log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

DEFAULT_BACKBONE = "transformer"
TRANSFER_BACKBONE = "deepsets"
THRESHOLD_GAIN = 0.05
"""Text2potential ablation: a cell reaches the threshold when its mean OOD success is ≥ its base's + this"""


def say(msg: str) -> None:
    print(f"[experiment] {msg}", file=sys.stderr, flush=True)


def cell_name(method: str, seed: int, backbone: str = DEFAULT_BACKBONE) -> str:
    return f"{method}-s{seed}" + ("" if backbone == DEFAULT_BACKBONE else f"@{backbone}")


def write_json(path: Path, data) -> None:
    """Atomic write (a crash leaves the old file or the new one, never half of one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    os.replace(tmp, path)


def code_commit() -> str:
    if os.environ.get("CODA_COMMIT"):
        return os.environ["CODA_COMMIT"]
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10,
                             cwd=Path(__file__).resolve().parents[1])
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def plan_cells(methods: list[str], seeds: list[int], transfer: bool, transfer_seeds: list[int]) -> list[dict]:
    """Cells in run order: seed by seed over the methods (so early seeds give complete comparisons), then the
    transfer cells."""
    cells = [{"method": m, "seed": s, "backbone": DEFAULT_BACKBONE} for s in seeds for m in methods]
    if transfer:
        for s in transfer_seeds:
            cells += [{"method": "sft", "seed": s, "backbone": TRANSFER_BACKBONE},
                      {"method": "coda", "seed": s, "backbone": TRANSFER_BACKBONE},
                      {"method": "memory_transfer", "seed": s, "backbone": TRANSFER_BACKBONE,
                       "memory_from": cell_name("coda", s)}]
        cells += [{"method": "program_transfer", "seed": s, "backbone": DEFAULT_BACKBONE} for s in transfer_seeds]
    return cells


def load_cells(out: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((Path(out) / "cells").glob("*.json"))]


def log_line(path: Path, line: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {line}\n")

