"""MCP server `coda-memory`: the shared memory (scenes, rollouts, diagnoses, difficulty modes, generation and
training programs, budget allocation). Typed tool adapters over `memory_store.service.MemoryService`, the only
writer of `run_dir/memory` while it runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model
from pydantic.fields import FieldInfo
from pydantic.json_schema import SkipJsonSchema

from memory_store.allocate import UCB_C
from memory_store.allocate import allocate_evenly as even_allocation
from memory_store.programs import MAX_BINDINGS
from memory_store.programs import bind_roles as bind_program_roles
from memory_store.schema import (
    MAX_ROLLOUTS,
    MAX_ROUND,
    CompileCheck,
    Diagnosis,
    DiagnosisFactor,
    Evidence,
    Family,
    GenerationProgram,
    JsonDict,
    ModeStatus,
    Phase,
    Record,
    RecordId,
    Relation,
    Repair,
    Role,
    RolloutRecord,
    SceneRecord,
    TrainingProgram,
    Violation,
    now_iso,
)
from memory_store.service import (
    AllocationResult,
    DiagnosisHit,
    DiagnosisRecorded,
    ExportResult,
    MemoryService,
    MemoryStatus,
    ModeDetail,
    ModeSummary,
    Written,
)
from servers.common import (
    OVERWRITES,
    READ_ONLY,
    WRITES,
    WRITES_IDEMPOTENT,
    add_completions,
    load_prompts,
    new_server,
    resource,
    to_json,
    tool,
)
from servers.contract import (
    MAX_BATCH,
    MAX_BUDGET,
    MAX_ITEMS,
    MAX_JSON_CHARS,
    MAX_K,
    MAX_NAME_CHARS,
    MAX_PAGE,
    MAX_RECORD_CHARS,
    MAX_SOURCE_CHARS,
    MAX_TEXT_CHARS,
)
from sim.constants import (
    DEFAULT_MODE_KEY,
    DIAGNOSIS_FACTORS,
    EPS_NOVEL,
    EPS_REPLAY,
    PHASES,
    ROLES,
    SUCCESS_BAND,
    ModeKey,
)
from sim.scene_store import scene_ids

INSTRUCTIONS = """Shared memory of a CoDA run. Record scenes, rollouts and failure diagnoses (diagnoses are clustered
into difficulty modes); search diagnoses by cause; list and inspect modes (hardness p̂, importance w, visits, status);
allocate a round's generation budget over modes; store and retrieve generation programs (Ω) and training programs (Φ)
per mode; bind a generation program's roles to a new scene's objects; update hardness and learning progress; export the memory. Writes are idempotent by record id unless the
tool says otherwise."""

ModeId = Annotated[RecordId, Field(description="difficulty mode id (from record_diagnosis or list_modes)")]
Round = Annotated[int | None, Field(description="co-evolution round", ge=0, le=MAX_ROUND)]
Fraction = Annotated[float, Field(ge=0.0, le=1.0)]
Limit = Annotated[int, Field(description="most items returned", ge=1, le=MAX_PAGE)]
POLICY_ID_CHARS = MAX_NAME_CHARS + 8
"""longest policy id: a derived '<run_id>@r<round>' fits"""

# --- record arguments: the records of `memory_store.schema` within the contract's size limits ----------------
Name = Annotated[str, Field(max_length=MAX_NAME_CHARS)]
Text = Annotated[str, Field(max_length=MAX_TEXT_CHARS)]
Source = Annotated[str, Field(max_length=MAX_SOURCE_CHARS)]
Tag = Annotated[str, Field(max_length=64)]


def _json_within(value: dict) -> dict:
    try:
        size = len(json.dumps(value, allow_nan=False))
    except RecursionError:
        raise ValueError("nested too deeply to store as JSON") from None
    if size > MAX_JSON_CHARS:
        raise ValueError(f"at most {MAX_JSON_CHARS} characters as JSON, got {size}")
    return value


JsonArg = Annotated[JsonDict, AfterValidator(_json_within)]
"""a free-form JSON object of at most MAX_JSON_CHARS characters"""


def limited(model: type[BaseModel], created_at: bool = False, **limits: FieldInfo | tuple[Any, FieldInfo]
            ) -> type[BaseModel]:
    """`model` as a tool argument, its fields within limits: each keyword names a field and gives extra constraints
    (`Field(max_length=...)`) or (a type, constraints) to also narrow its type (e.g. to a limited nested model);
    the field keeps its default and description. created_at: the model is a record whose `created_at` is the
    server's to set, so it is not shown to clients."""
    fields: dict[str, Any] = {}
    for name, limit in limits.items():
        info = model.model_fields[name]
        annotation, extra = limit if isinstance(limit, tuple) else (info.annotation, limit)
        fields[name] = (annotation, FieldInfo.merge_field_infos(info, extra))
    if created_at:
        fields["created_at"] = (SkipJsonSchema[str], Field(default_factory=now_iso))
    return create_model(model.__name__, __base__=model, __doc__=model.__doc__, **fields)


def as_input(model: type[Record], **limits: FieldInfo | tuple[Any, FieldInfo]) -> type[Record]:
    """A record model as a tool argument: `created_at` is the server's to set (not shown), the run id is a name,
    and the fields in `limits` are limited as `limited` says."""
    return limited(model, created_at=True, run_id=Field(max_length=MAX_NAME_CHARS), **limits)


ViolationIn = limited(Violation, check=Field(max_length=MAX_NAME_CHARS), message=Field(max_length=MAX_TEXT_CHARS),
                      objects=(list[Name], Field(max_length=MAX_ITEMS)))
RepairIn = limited(Repair, error=Field(max_length=MAX_TEXT_CHARS), program=Field(max_length=MAX_SOURCE_CHARS))
EvidenceIn = limited(Evidence, step_indices=Field(max_length=MAX_ITEMS),
                     state_facts=(list[Text], Field(max_length=MAX_ITEMS)),
                     keyframe_paths=(list[Annotated[str, Field(max_length=1024)]], Field(max_length=MAX_ITEMS)),
                     extra=(JsonArg, Field()))
CompileCheckIn = limited(CompileCheck, message=Field(max_length=MAX_TEXT_CHARS))
RelationIn = limited(Relation, predicate=Field(max_length=64), roles=Field(max_length=len(ROLES)),
                     requires=(dict[Annotated[str, Field(max_length=32)], Annotated[list[Tag], Field(max_length=64)]],
                               Field(max_length=len(ROLES))))


def within_record_limit(record: Record) -> Record:
    """The record, if its JSON has at most MAX_RECORD_CHARS characters (a page of them stays readable)."""
    size = len(record.model_dump_json())
    if size > MAX_RECORD_CHARS:
        raise ValueError(f"program: {size:,} characters as JSON, at most {MAX_RECORD_CHARS:,} for one record (all "
                         "its sources together); store fewer or shorter variants")
    return record


class BindingObject(BaseModel):  # a role-binding candidate, as the sim server's scene_objects lists it
    name: str = Field(description="object name, distinct within the scene", max_length=128)
    role: str | None = Field(None, description="the object's own role in its scene (an exact match binds first)",
                             max_length=32)
    category: str | None = Field(None, description="asset category (counts as a tag)", max_length=64)
    tags: list[Annotated[str, Field(max_length=64)]] = Field(
        default_factory=list, description="the category's tags and kinds (container, surface, graspable, ...)",
        max_length=64)


class DiagnosisIn(BaseModel):
    """A failure diagnosis ψ = (δ factor, phase, cause, evidence) of a scene's rollouts."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    """the embedding and the mode are the server's to compute: a client cannot set them (nor misspell a key)"""

    id: RecordId = Field(description="unique id; recording the same id again is a no-op")
    scene_id: RecordId = Field(description="the diagnosed scene: recorded with record_scene, or a sim scene_id")
    rollout_ids: list[RecordId] = Field(default_factory=list, max_length=MAX_BATCH,
                                        description="the failed rollouts it explains")
    factor: DiagnosisFactor = Field(description="δ, the scene factor the failure comes from")
    phase: Phase = Field(description="trajectory phase where the failure arose")
    cause: str = Field(min_length=1, max_length=MAX_TEXT_CHARS, description="the cause in words")
    evidence: EvidenceIn = Field(default_factory=EvidenceIn, description="what the diagnosis rests on")
    run_id: str = Field("", description="the run that wrote it", max_length=MAX_NAME_CHARS)
    round: int | None = Field(None, description="co-evolution round", ge=0, le=MAX_ROUND)


RolloutIn = as_input(RolloutRecord, policy_id=Field(max_length=POLICY_ID_CHARS), summary=(JsonArg, Field()))
GenerationProgramIn = as_input(
    GenerationProgram, parent_program=Field(max_length=MAX_SOURCE_CHARS),
    variants=(list[Source], Field(max_length=MAX_ITEMS)), compile_checks=(list[CompileCheckIn], Field(max_length=MAX_ITEMS)),
    required_relations=(list[RelationIn], Field(max_length=16)), roles=Field(max_length=len(ROLES)))
TrainingProgramIn = as_input(
    TrainingProgram, subgoals=(list[Text], Field(max_length=MAX_ITEMS)),
    completion_predicates=(list[Text], Field(max_length=MAX_ITEMS)), potential_code=Field(max_length=MAX_SOURCE_CHARS),
    evidence=(JsonArg, Field()))
SceneRecordIn = as_input(
    SceneRecord, spec_json=Field(max_length=MAX_JSON_CHARS), spec_hash=Field(max_length=MAX_NAME_CHARS),
    violations=(list[ViolationIn], Field(max_length=MAX_ITEMS)), repairs=(list[RepairIn], Field(max_length=16)))


class SceneIn(SceneRecordIn):
    """A scene record; for a scene the sim server stored (same id), family, program and spec may be left out."""

    family: Family | None = Field(None, description="task family (default: the stored scene's)")
    program: str | None = Field(None, description="scene program source (default: the stored scene's program)",
                                max_length=MAX_SOURCE_CHARS)


def build_server(run_dir: Path, embedder: Any = None, memory_uri: str | None = None) -> MCPServer:
    """The memory server over `run_dir/memory` or `memory_uri` (a LanceDB URI: a shared path, s3://...);
    embedder: None = offline MiniLM, or e.g. HashingEmbedder()."""
    svc = MemoryService(run_dir, embedder=embedder, uri=memory_uri)
    mcp = new_server("coda-memory", INSTRUCTIONS)

    @tool(mcp, WRITES_IDEMPOTENT)
    def record_scene(scene: Annotated[SceneIn, Field(description="scene record (id = scene_id)")]) -> Written:
        """Store a scene with its verifier result (by id); for a scene of the run's store, family, program and spec
        are filled in from it."""
        return svc.record_scene(scene)

    def unknown_scenes(ids: list[str]) -> list[str]:
        """Those of `ids` that are neither scenes of the run's scene store nor of this memory, in order."""
        stored = set(scene_ids(run_dir))
        rest = [i for i in dict.fromkeys(ids) if i not in stored]
        known = svc.store.existing_ids("scenes", rest) if rest else set()
        return [i for i in rest if i not in known]

    @tool(mcp, WRITES_IDEMPOTENT)
    def record_rollouts(
        rollouts: Annotated[list[RolloutIn], Field(description="rollout summaries, e.g. collect_rollouts' result "
                                                   "rows as they are; ids distinct, scenes known (the sim server's "
                                                   "or recorded)", min_length=1, max_length=MAX_BATCH)],
    ) -> Written:
        """Store rollout summaries (by id, one commit): all of them, or none when one is refused."""
        first: dict[str, int] = {}
        repeated = []
        for i, r in enumerate(rollouts):
            if r.id in first:
                repeated.append(f"rollouts[{i}].id: {r.id!r} repeats rollouts[{first[r.id]}].id")
            first.setdefault(r.id, i)
        if repeated:
            raise ValueError(f"{'; '.join(repeated[:5])}; give each rollout id once per call (nothing was stored)")
        unknown = unknown_scenes([r.scene_id for r in rollouts])
        if unknown:
            at = {sid: next(i for i, r in enumerate(rollouts) if r.scene_id == sid) for sid in unknown[:5]}
            named = "; ".join(f"rollouts[{i}].scene_id: unknown scene {sid!r}" for sid, i in at.items())
            raise LookupError(f"{named}{'; and more' if len(unknown) > 5 else ''}; record a scene with record_scene "
                              "first, or give a scene_id of the sim server (nothing was stored)")
        return svc.put([RolloutRecord.model_validate(r.model_dump()) for r in rollouts])

    @tool(mcp, WRITES_IDEMPOTENT)
    def record_diagnosis(
        diagnosis: DiagnosisIn,
        cluster_by: Annotated[ModeKey, Field(
            description="what the diagnosis must share with a mode to join it: its factor alone (default; the "
                        "phase is the mode's founding attribute), or its factor and phase; keep one per memory")
                              ] = DEFAULT_MODE_KEY,
    ) -> DiagnosisRecorded:
        """Store a failure diagnosis and cluster it into a difficulty mode (new or existing)."""
        if unknown_scenes([diagnosis.scene_id]):
            raise LookupError(f"diagnosis.scene_id: unknown scene {diagnosis.scene_id!r}; record it with "
                              "record_scene first, or give a scene_id of the sim server")
        return svc.record_diagnosis(Diagnosis(**diagnosis.model_dump()), key=cluster_by)

    def known_mode(mode_id: str) -> None:
        """Refuse a program of a mode this memory does not hold (it would be stored as an orphan)."""
        if not svc.store.existing_ids("modes", [mode_id]):
            raise LookupError(f"program.mode_id: unknown mode {mode_id!r}; modes come from record_diagnosis (see "
                              "list_modes)")

    @tool(mcp, READ_ONLY)
    def search_diagnoses(
        query: Annotated[str, Field(description="a cause in words", min_length=1, max_length=MAX_TEXT_CHARS)],
        k: Annotated[int, Field(description="results wanted", ge=1, le=MAX_K)] = 10,
        factor: Annotated[DiagnosisFactor | None, Field(description="only this factor δ")] = None,
        phase: Annotated[Phase | None, Field(description="only this phase")] = None,
        mode_id: Annotated[RecordId | None, Field(description="only this mode")] = None,
    ) -> list[DiagnosisHit]:
        """The k diagnoses whose causes are most similar to the query (filtered)."""
        return svc.search(query, k, factor, phase, mode_id)

    @tool(mcp, READ_ONLY)
    def list_modes(
        status: Annotated[ModeStatus | None, Field(description="only this status")] = None,
        factor: Annotated[DiagnosisFactor | None, Field(description="only this factor δ")] = None,
        phase: Annotated[Phase | None, Field(description="only this phase")] = None,
        offset: Annotated[int, Field(description="first item of the page", ge=0)] = 0,
        limit: Limit = 50,
    ) -> list[ModeSummary]:
        """Difficulty modes, hardest first."""
        return svc.list_modes(status, factor, phase, offset, limit)

    @tool(mcp, READ_ONLY)
    def get_mode(mode_id: ModeId) -> ModeDetail:
        """One mode with its history, member diagnoses and program counts."""
        return svc.mode_detail(mode_id)

    @tool(mcp, WRITES)
    def allocate_budget(
        budget: Annotated[int, Field(description="generation units this round", ge=0, le=MAX_BUDGET)],
        eps_novel: Annotated[Fraction, Field(description="share for novel environments")] = EPS_NOVEL,
        eps_replay: Annotated[Fraction, Field(description="share for replay of seen modes")] = EPS_REPLAY,
        band_low: Annotated[Fraction, Field(description="success band: lower bound")] = SUCCESS_BAND[0],
        band_high: Annotated[Fraction, Field(description="success band: upper bound")] = SUCCESS_BAND[1],
        c: Annotated[float, Field(description="UCB exploration weight", ge=0.0, le=10.0)] = UCB_C,
        round: Round = None,
        record_visits: Annotated[bool, Field(description="count the allocated units as visits (false: preview)")
                                 ] = True,
    ) -> AllocationResult:
        """Split a round's budget: novel, replay, and targeted units per mode (UCB on hardness and progress)."""
        return svc.allocate(budget, eps_novel, eps_replay, (band_low, band_high), c, round, record_visits)

    @tool(mcp, READ_ONLY)
    def allocate_evenly(
        budget: Annotated[int, Field(description="generation units this round", ge=0, le=MAX_BUDGET)],
        mode_ids: Annotated[list[RecordId], Field(
            description="the modes to target (e.g. those diagnosed last round); none: the whole budget is novel",
            max_length=MAX_BATCH)],
        eps_novel: Annotated[Fraction, Field(description="share for novel environments")] = EPS_NOVEL,
    ) -> AllocationResult:
        """Split a round's budget without the memory's scores: the novel share as in allocate_budget (no replay)
        and the targeted units evenly over the given modes. Reads and records nothing (no visits)."""
        plan = even_allocation(mode_ids, budget, eps_novel=eps_novel)
        return AllocationResult(**plan.to_dict(), visits_recorded=False)

    @tool(mcp, WRITES_IDEMPOTENT, title="Store generation program")
    def put_generation_program(program: GenerationProgramIn) -> Written:
        """Store a generation program Ω of a mode (by id); the mode must exist."""
        known_mode(program.mode_id)
        return svc.put([within_record_limit(GenerationProgram.model_validate(program.model_dump()))])

    @tool(mcp, READ_ONLY)
    def get_generation_programs(
        mode_id: ModeId,
        in_pool_only: Annotated[bool, Field(description="only programs inside the success band")] = True,
        limit: Limit = 50,
    ) -> list[GenerationProgram]:
        """Generation programs of a mode, oldest first."""
        return svc.generation_programs(mode_id, in_pool_only, limit)

    @tool(mcp, READ_ONLY)
    def bind_roles(
        roles: Annotated[list[Role], Field(description="the program's roles, distinct", max_length=len(ROLES))],
        objects: Annotated[list[BindingObject], Field(description="the new scene's objects (sim: scene_objects)",
                                                      max_length=MAX_BATCH)],
        relations: Annotated[list[RelationIn], Field(description="relations the bound objects must allow (the "
                                                   "program's 'required_relations')", max_length=16)] = [],  # noqa: B006 - pydantic copies defaults
        max_bindings: Annotated[int, Field(description="most bindings returned", ge=1,
                                           le=MAX_BINDINGS)] = MAX_BINDINGS,
    ) -> list[dict[str, str]]:
        """Bind a generation program's roles to a new scene's objects: up to max_bindings {role: object} maps of
        distinct compatible objects, in a fixed order (exact role matches first). Reads and records nothing."""
        return bind_program_roles(roles, relations, [o.model_dump(exclude_unset=True) for o in objects], max_bindings)

    @tool(mcp, WRITES_IDEMPOTENT, title="Store training program")
    def put_training_program(program: TrainingProgramIn) -> Written:
        """Store a training program Φ of a mode (by id); the mode must exist."""
        known_mode(program.mode_id)
        return svc.put([within_record_limit(TrainingProgram.model_validate(program.model_dump()))])

    @tool(mcp, READ_ONLY)
    def get_training_programs(
        mode_id: Annotated[RecordId | None, Field(description="only this mode")] = None,
        phase: Annotated[Phase | None, Field(description="only this phase")] = None,
        improved: Annotated[bool | None, Field(description="only programs that did (or did not) help")] = None,
        limit: Limit = 50,
    ) -> list[TrainingProgram]:
        """Training programs filtered by mode, phase and outcome, oldest first."""
        return svc.training_programs(mode_id, phase, improved, limit)

    @tool(mcp, WRITES)
    def update_learning_progress(
        mode_id: ModeId,
        before: Annotated[Fraction, Field(description="success rate on the mode before training")],
        after: Annotated[Fraction, Field(description="success rate after training")],
        round: Round = None,
        training_program_id: Annotated[RecordId | None, Field(
            description="training program used (records its outcome)")] = None,
        updates: Annotated[int, Field(description="policy updates made", ge=0, le=10**9)] = 0,
    ) -> ModeSummary:
        """Fold a training outcome (after − before) into the mode's importance w."""
        return svc.learning_progress(mode_id, before, after, round, training_program_id, updates)

    @tool(mcp, WRITES)
    def update_hardness(
        mode_id: ModeId,
        successes: Annotated[int | None, Field(description="successful rollouts (omit to count stored ones)", ge=0,
                                               le=MAX_ROLLOUTS)] = None,
        n: Annotated[int | None, Field(description="rollouts in all (omit to count stored ones)", ge=1,
                                       le=MAX_ROLLOUTS)] = None,
        policy_id: Annotated[str | None, Field(description="count only this policy's stored rollouts",
                                               max_length=POLICY_ID_CHARS)] = None,
        round: Round = None,
        band_low: Annotated[Fraction, Field(description="success band: lower bound")] = SUCCESS_BAND[0],
        band_high: Annotated[Fraction, Field(description="success band: upper bound")] = SUCCESS_BAND[1],
    ) -> ModeSummary:
        """Set a mode's hardness p̂ (success rate) and its success-band membership (band_low ≤ band_high)."""
        return svc.hardness(mode_id, successes, n, policy_id, round, (band_low, band_high))

    @tool(mcp, OVERWRITES)
    def set_mode_status(
        mode_id: ModeId,
        status: Annotated[ModeStatus, Field(description="new status")],
        reason: Annotated[str, Field(description="why (kept in the mode's history)", max_length=MAX_TEXT_CHARS)] = "",
        round: Round = None,
    ) -> ModeSummary:
        """Set a mode's validation status (e.g. after the targeted-vs-control test)."""
        return svc.set_status(mode_id, status, reason, round)

    @tool(mcp, OVERWRITES)
    def export_memory(
        directory: Annotated[str, Field(description="subfolder of the run directory, not the run directory itself "
                                        "nor a folder the servers own (files are replaced)",
                                        min_length=1, max_length=256)] = "exports/memory",
    ) -> ExportResult:
        """Write every memory table to a subfolder of the run directory (JSON lines + manifest)."""
        return svc.export(directory)

    @tool(mcp, READ_ONLY)
    def memory_status() -> MemoryStatus:
        """Rows per table, the store location and whether the vector index exists."""
        return svc.status()

    @resource(mcp, "memory://modes", name="modes", description="difficulty modes, hardest first",
              mime_type="application/json")
    def modes_resource() -> str:
        return to_json([m.model_dump() for m in svc.list_modes(limit=10_000)])

    @resource(mcp, "memory://modes/{mode_id}", name="mode", description="one difficulty mode",
              mime_type="application/json")
    def mode_resource(mode_id: str) -> str:
        return to_json(svc.mode_detail(mode_id))

    load_prompts(mcp, only=("critic",), defaults={"factors": lambda: ", ".join(DIAGNOSIS_FACTORS),
                                                  "phases": lambda: ", ".join(PHASES)})
    add_completions(mcp, {"mode_id": lambda: [m.id for m in svc.list_modes(limit=10_000)],
                          "scene_id": lambda: scene_ids(run_dir)})
    return mcp
