"""`run_experiment`: the cells of methods × seeds (and transfer) in order, skipping finished ones, then the tables."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from agent.experiment.cells import ensure_base, load_programs, run_cell, run_program_transfer
from agent.experiment.common import (
    THRESHOLD_GAIN,
    cell_name,
    code_commit,
    log_line,
    plan_cells,
    say,
    write_json,
)
from agent.experiment.tables import write_tables
from agent.methods import get_method
from agent.presets import Preset


def preset_changes(old: dict, new: dict) -> list[str]:
    """The preset fields in which `new` differs from an experiment's recorded `old` preset, as "name: old -> new".
    A field the old record lacks was added to `Preset` after the experiment started; its default reproduces the
    behaviour from before it existed, so the old value is that default."""
    defaults = json.loads(json.dumps(Preset(name=new.get("name", "")).to_dict()))
    return [f"{k}: {old.get(k, defaults.get(k))!r} -> {new.get(k)!r}" for k in sorted(set(old) | set(new))
            if old.get(k, defaults.get(k)) != new.get(k, defaults.get(k))]


def run_experiment(out: Path, methods: list[str], seeds: list[int], preset: Preset, *, resume: bool = False,
                   transfer: bool = False, transfer_seeds: list[int] | None = None, embedder: str | None = None,
                   threshold_gain: float = THRESHOLD_GAIN, command: str = "",
                   cell_runner: Callable[..., dict] | None = None) -> dict:
    out = Path(out).resolve()
    for m in methods:
        get_method(m)
    transfer_seeds = list(seeds if transfer_seeds is None else transfer_seeds)
    if transfer and "coda" not in methods:
        raise ValueError("transfer reuses the CoDA cells: include coda in --methods")
    config_path = out / "experiment.json"
    config = {"methods": methods, "seeds": seeds, "preset": json.loads(json.dumps(preset.to_dict())),
              "transfer": transfer,
              "transfer_seeds": transfer_seeds, "threshold_gain": threshold_gain, "command": command,
              "commit": code_commit(), "embedder": embedder or "minilm"}
    if resume and not config_path.exists():
        raise ValueError(f"--resume: {out} holds no experiment to continue (no experiment.json); drop --resume to "
                         "start one there")
    if config_path.exists():
        if not resume:
            raise FileExistsError(f"{out} already holds an experiment; pass --resume to continue it or choose "
                                  "another --out")
        old = json.loads(config_path.read_text())
        changed = preset_changes(old["preset"], config["preset"])
        if changed:
            raise ValueError(f"{out} was run with another preset budget ({', '.join(changed)}); cells would not be "
                             "comparable")
        config["methods"] = list(dict.fromkeys(old["methods"] + methods))
        config["seeds"] = sorted(set(old["seeds"]) | set(seeds))
        if old.get("transfer"):  # a process of another seed group may run the transfer cells
            config["transfer"] = True
            config["transfer_seeds"] = sorted(set(old.get("transfer_seeds", [])) | set(transfer_seeds if transfer
                                                                                        else []))
        config["started"] = old.get("started")
        config["commits"] = sorted(set(old.get("commits", [old.get("commit")])) | {config["commit"]})
    config.setdefault("started", time.strftime("%Y-%m-%d %H:%M:%S"))
    write_json(config_path, config)
    runner = cell_runner or run_cell
    cells = plan_cells(methods, seeds, transfer, transfer_seeds)
    log = out / "progress.log"
    failures: list[str] = []
    for i, c in enumerate(cells, start=1):
        name = cell_name(c["method"], c["seed"], c["backbone"])
        if (out / "cells" / f"{name}.json").exists():
            continue
        log_line(log, f"start {name} ({i}/{len(cells)})")
        say(f"cell {i}/{len(cells)}: {name}")
        t0 = time.perf_counter()
        try:
            base = ensure_base(out, preset, c["seed"], c["backbone"]) if cell_runner is None else {"seed": c["seed"]}
            if c["method"] == "program_transfer" and cell_runner is None:
                run_program_transfer(out, c["seed"], preset, base, load_programs(out, seeds), embedder=embedder)
            else:
                memory_from = out / "runs" / c["memory_from"] / "state.json" if c.get("memory_from") else None
                runner(out, c["method"], c["seed"], preset, base, backbone=c["backbone"], memory_from=memory_from,
                       embedder=embedder)
        except Exception as exc:  # noqa: BLE001 - one failed cell must not stop the others; --resume retries it
            log_line(log, f"FAILED {name} after {time.perf_counter() - t0:.0f} s: {type(exc).__name__}: "
                      + " | ".join(str(exc).splitlines()))
            say(f"cell {name} failed: {exc}")
            failures.append(name)
            continue
        log_line(log, f"done  {name} in {time.perf_counter() - t0:.0f} s")
        write_tables(out, threshold_gain)
    tables = write_tables(out, threshold_gain)
    tables["failed_cells"] = failures
    log_line(log, "experiment finished" + (f" ({len(failures)} failed: {', '.join(failures)})" if failures else ""))
    return tables

