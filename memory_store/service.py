"""The memory as a long-lived service (what the memory MCP server wraps): one `MemoryService` per run, the single
writer of its store, with the read-modify-write operations a round needs and record views without embedding
vectors.

    svc = MemoryService(run_dir)                          # opens run_dir/memory
    svc.record_diagnosis(Diagnosis(id="d1", scene_id="s1", factor="spatial", phase="grasp", cause="..."))
    svc.allocate(64, round_=3)                           # per-mode units; records the visits
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from memory_store import modes as mode_ops
from memory_store.allocate import DEFAULT_BAND, EPS_NOVEL, EPS_REPLAY, UCB_C, allocate
from memory_store.programs import generation_programs, record_outcome, training_programs
from memory_store.schema import (
    RECORD_ID_PATTERN,
    Diagnosis,
    GenerationProgram,
    Mode,
    Record,
    SceneRecord,
    TrainingProgram,
)
from memory_store.store import VECTOR_INDEX_MIN_ROWS, MemoryStore, where_eq
from sim.constants import DEFAULT_MODE_KEY
from sim.fileio import confine

SERVER_DIRS = ("memory", "scenes", "traces", "jobs", "checkpoints", "rollouts")
"""folders of the run directory that servers own (the store, scenes and traces, jobs, policy checkpoints and
rollouts): memory exports never go there"""


class Written(BaseModel):
    table: str
    ids: list[str]
    inserted: int
    updated: int


class ModeSummary(BaseModel):
    """A difficulty mode K_j without its centroid vector."""

    id: str
    factor: str
    phase: str
    status: str
    description: str
    members: int
    hardness: float | None = Field(description="p̂_j, policy success rate on the mode (lower is harder)")
    hardness_n: int
    importance: float = Field(description="w_j, moving average of success after minus before training")
    visits: int
    in_band: bool
    last_round: int | None


class ModeDetail(ModeSummary):
    history: list[dict[str, Any]]
    created_round: int | None
    diagnoses: list[str] = Field(description="ids of member diagnoses (up to 50)")
    generation_programs: int
    training_programs: int


class DiagnosisRecorded(BaseModel):
    diagnosis_id: str
    mode_id: str
    created_mode: bool = Field(description="the diagnosis founded a new candidate mode")
    mode: ModeSummary


class DiagnosisHit(BaseModel):
    similarity: float = Field(description="cosine similarity of the causes")
    diagnosis: dict[str, Any]


class AllocationResult(BaseModel):
    budget: int
    novel: int
    replay: int
    targeted: int
    per_mode: dict[str, int] = Field(description="targeted units per mode id")
    replay_per_mode: dict[str, int]
    scores: dict[str, float] = Field(description="UCB score per targeted-eligible mode")
    visits_recorded: bool


class MemoryStatus(BaseModel):
    store: str = Field(description="where the memory lives")
    rows: dict[str, int] = Field(description="rows per table")
    vector_index: bool = Field(description="the diagnosis vector index exists (built from 10,000 diagnoses)")


class ExportResult(BaseModel):
    directory: str = Field(description="export directory, relative to the run directory")
    rows: dict[str, int]


def check_band(band: tuple[float, float]) -> None:
    """The success band (band_low, band_high) of allocate_budget and update_hardness: low ≤ high."""
    if band[0] > band[1]:
        raise ValueError(f"band_low must not exceed band_high, got {band}")


def mode_summary(m: Mode) -> ModeSummary:
    return ModeSummary(**m.model_dump(include=set(ModeSummary.model_fields)))


def without_vectors(record: Record) -> dict[str, Any]:
    return record.model_dump(mode="json", exclude={"embedding", "centroid"})


class MemoryService:
    """The memory of one run (`run_dir/memory`, or any LanceDB URI shared by several machines); one per server
    process."""

    def __init__(self, run_dir: Path, embedder=None, uri: str | None = None):
        self.run_dir = Path(run_dir).resolve()
        self.store = MemoryStore.open(uri or self.run_dir / "memory", embedder=embedder)
        self._lock = threading.RLock()
        self._indexed = any("embedding" in i.columns for i in self.store.table("diagnoses").list_indices())

    # --- writes -------------------------------------------------------------------------------------------

    def put(self, records: list[Record]) -> Written:
        res = self.store.put_many(records)
        table = next(iter(res.by_table), "") if res.by_table else ""
        return Written(table=table, ids=[r.id for r in records], inserted=res.inserted, updated=res.updated)

    def record_scene(self, scene: SceneRecord) -> Written:
        """Store a scene record; a scene stored by the sim server (same id) fills spec_json and spec_hash, and a
        missing family or program (a `SceneRecord` subclass may leave them None)."""
        from sim.scene_store import SceneStore

        spec = None
        if scene.spec_json in ("", "{}") or scene.family is None or scene.program is None:
            try:
                spec = SceneStore(self.run_dir).spec(scene.id)
            except (ValueError, LookupError):
                spec = None
        if spec is None and (scene.family is None or scene.program is None):
            missing = " and ".join(k for k in ("family", "program") if getattr(scene, k) is None)
            raise ValueError(f"scene {scene.id!r} is not in the run's scene store, so {missing} must be given")
        update: dict = {}
        if spec is not None:
            from sim.scene import to_program

            if scene.spec_json in ("", "{}"):
                update.update(spec_json=spec.model_dump_json(), spec_hash=spec.spec_hash())
            if scene.family is None:
                update["family"] = spec.family
            if scene.program is None:
                update["program"] = to_program(spec)
        record = SceneRecord.model_validate({**scene.model_dump(), **update})
        return self.put([record])

    def record_diagnosis(self, d: Diagnosis, key: str = DEFAULT_MODE_KEY) -> DiagnosisRecorded:
        """Store a diagnosis and cluster it into a difficulty mode (new or existing) in its round; `key`: what it
        must share with a mode to join it (`memory_store.modes.MODE_KEYS`)."""
        with self._lock:
            diag, mode, created = mode_ops.record_diagnosis(self.store, d, round_=d.round, key=key)
            if not self._indexed and self.store.count("diagnoses") >= VECTOR_INDEX_MIN_ROWS:
                self.store.create_indexes()
                self._indexed = True
        return DiagnosisRecorded(diagnosis_id=diag.id, mode_id=mode.id, created_mode=created, mode=mode_summary(mode))

    def _update_mode(self, mode_id: str, change) -> Mode:
        with self._lock, self.store.lock("modes"):
            mode = self.mode(mode_id)
            change(mode)
            self.store.put(mode)
            return mode

    def set_status(self, mode_id: str, status: str, reason: str = "", round_: int | None = None) -> ModeSummary:
        return mode_summary(self._update_mode(mode_id, lambda m: mode_ops.set_status(m, status, round_, reason)))

    def learning_progress(self, mode_id: str, before: float, after: float, round_: int | None = None,
                          training_program_id: str | None = None, updates: int = 0) -> ModeSummary:
        """Fold a training outcome into the mode's importance (and into its training program's evidence). Both are
        checked before either is written: a call that fails changes nothing."""
        with self._lock, self.store.lock("modes"):
            mode = self.mode(mode_id)
            program = None
            if training_program_id is not None:
                program = self.store.get("training_programs", training_program_id)
                if program is None:
                    raise LookupError(f"unknown training_program_id {training_program_id!r}; store it with "
                                      "put_training_program first")
                if program.mode_id != mode_id:
                    raise ValueError(f"training_program_id {training_program_id!r} trains mode {program.mode_id!r}, "
                                     f"not mode_id {mode_id!r}")
            mode_ops.observe_training(mode, before, after, round_)
            if program is not None:
                self.store.put(record_outcome(program, before, after, updates))
            self.store.put(mode)
            return mode_summary(mode)

    def hardness(self, mode_id: str, successes: int | None, n: int | None, policy_id: str | None = None,
                 round_: int | None = None, band: tuple[float, float] = DEFAULT_BAND) -> ModeSummary:
        """Set p̂_j from given counts, or from the stored rollouts on the mode's scenes when counts are omitted."""
        check_band(band)
        if (successes is None) != (n is None):
            raise ValueError("give both successes and n, or neither (then they are counted from stored rollouts)")
        if successes is None:
            successes, n = mode_ops.hardness_from_store(self.store, mode_id, policy_id)
            if n == 0:
                raise ValueError(f"mode {mode_id!r} has no stored rollouts on its scenes; pass successes and n")
        return mode_summary(self._update_mode(
            mode_id, lambda m: mode_ops.observe_hardness(m, successes, n, round_, band)))

    def allocate(self, budget: int, eps_novel: float = EPS_NOVEL, eps_replay: float = EPS_REPLAY,
                 band: tuple[float, float] = DEFAULT_BAND, c: float = UCB_C, round_: int | None = None,
                 record_visits: bool = True) -> AllocationResult:
        """Split a round's budget over the modes; optionally count the units as visits of each mode."""
        check_band(band)
        with self._lock, self.store.lock("modes"):
            modes = self.store.records("modes")
            plan = allocate(modes, budget, eps_novel=eps_novel, eps_replay=eps_replay, c=c, band=band)
            if record_visits:
                units = {**plan.replay_per_mode}
                for mid, n in plan.per_mode.items():
                    units[mid] = units.get(mid, 0) + n
                changed = [mode_ops.visit(m, units[m.id], round_) for m in modes if units.get(m.id)]
                if changed:
                    self.store.put_many(changed)
        return AllocationResult(**plan.to_dict(), visits_recorded=record_visits)

    def export(self, directory: str) -> ExportResult:
        """Export into a subfolder of the run directory that no server owns (files there are replaced)."""
        target = confine(self.run_dir, directory, "directory")
        if target == self.run_dir:
            raise ValueError(f"directory {directory!r} is the run directory itself; export into a subfolder, "
                             "e.g. 'exports/memory'")
        top = target.relative_to(self.run_dir).parts[0]
        store_dir = self.store.local_dir
        if top in SERVER_DIRS:
            raise ValueError(f"directory {directory!r} is inside {top}/, a folder the servers own; export into "
                             "another subfolder, e.g. 'exports/memory'")
        if store_dir is not None and (target.is_relative_to(store_dir) or store_dir.is_relative_to(target)):
            raise ValueError(f"directory {directory!r} overlaps the memory store at {store_dir}; export into "
                             "another subfolder, e.g. 'exports/memory'")
        try:
            manifest = self.store.export(target)
        except OSError as exc:  # a file where a folder goes, or the reverse: nothing was written
            raise ValueError(f"directory {directory!r}: {exc.strerror or exc}") from None
        return ExportResult(directory=str(target.relative_to(self.run_dir)),
                            rows={n: t["rows"] for n, t in manifest["tables"].items()})

    # --- reads --------------------------------------------------------------------------------------------

    def mode(self, mode_id: str) -> Mode:
        if not re.fullmatch(RECORD_ID_PATTERN, mode_id):
            raise ValueError(f"mode_id {mode_id!r} is not a valid id (pattern {RECORD_ID_PATTERN})")
        mode = self.store.get("modes", mode_id)
        if mode is None:
            raise LookupError(f"unknown mode_id {mode_id!r}; list modes with list_modes")
        return mode

    def mode_detail(self, mode_id: str) -> ModeDetail:
        m = self.mode(mode_id)
        where = where_eq(mode_id=mode_id)
        return ModeDetail(
            **mode_summary(m).model_dump(),
            history=[e.model_dump(mode="json") for e in m.history],
            created_round=m.created_round,
            diagnoses=[d.id for d in self.store.records("diagnoses", where, limit=50)],
            generation_programs=self.store.count("generation_programs", where),
            training_programs=self.store.count("training_programs", where),
        )

    def list_modes(self, status: str | None = None, factor: str | None = None, phase: str | None = None,
                   offset: int = 0, limit: int = 50) -> list[ModeSummary]:
        """Modes, hardest first (unmeasured count as 0.5), then by id."""
        modes = self.store.records("modes", where_eq(status=status, factor=factor, phase=phase))
        modes.sort(key=lambda m: (m.hardness if m.hardness is not None else 0.5, m.id))
        return [mode_summary(m) for m in modes[offset : offset + limit]]

    def search(self, query: str, k: int = 10, factor: str | None = None, phase: str | None = None,
               mode_id: str | None = None) -> list[DiagnosisHit]:
        hits = self.store.search_diagnoses(query, k, factor=factor, phase=phase, mode_id=mode_id)
        return [DiagnosisHit(similarity=round(float(s), 6), diagnosis=without_vectors(d)) for d, s in hits]

    def generation_programs(self, mode_id: str, in_pool_only: bool = True, limit: int = 50) -> list[GenerationProgram]:
        return generation_programs(self.store, mode_id, in_pool_only=in_pool_only)[:limit]

    def training_programs(self, mode_id: str | None, phase: str | None, improved: bool | None,
                          limit: int = 50) -> list[TrainingProgram]:
        return training_programs(self.store, mode_id=mode_id, phase=phase, improved=improved)[:limit]

    def status(self) -> MemoryStatus:
        return MemoryStatus(store=self.store.uri, rows=self.store.counts(), vector_index=self._indexed)
