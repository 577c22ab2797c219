"""Record models of the shared memory: one pydantic model per LanceDB table.

Every record has a unique string `id`, `created_at` (ISO-8601, UTC), `run_id` and `round`. Scalar fields
become typed columns (filterable in `where` clauses); lists, dicts and nested models are stored as JSON
strings; the two vector fields (`Diagnosis.embedding`, `Mode.centroid`) are fixed-size float32 columns of
`EMBED_DIM` values. `TABLES` maps table names to models; `arrow_schema(model)` derives the column layout.
Ids, and the ids a record refers to, match `RECORD_ID_PATTERN`; numbers (float fields and numbers inside JSON
fields) are finite; rates lie in [0, 1], and rounds, counts, steps and seeds are ≥ 0 and at most `MAX_ROUND`,
`MAX_ROLLOUTS`, `MAX_STEPS` and `MAX_SEED` (each fits the int64 column). Nested values refuse keys they do not
define, as records do. The closed vocabularies (phase, factor, family, role, batch, ...) and record ids are named
types (`TypeAliasType`): each is one `$defs` entry of a JSON schema, shared by every field that uses it.
"""

from __future__ import annotations

import datetime
import json
import math
import types
import typing
from collections.abc import Sequence
from typing import Annotated, Any, Literal

import numpy as np
import pyarrow as pa
from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    WithJsonSchema,
    model_validator,
)
from typing_extensions import TypeAliasType

from sim.constants import DIAGNOSIS_FACTORS, FACTORS, FAMILIES, PHASES, ROLES

EMBED_DIM = 384
"""dimension of cause embeddings (all-MiniLM-L6-v2)"""
VECTOR_FIELDS = ("embedding", "centroid")
"""model fields stored as fixed-size float32 vector columns"""

BATCHES = ("seed", "targeted", "control", "novel", "replay")
MODE_STATUSES = ("candidate", "validated", "refuted")
LEARNING_TOOLS = ("bc", "awr_shaped", "reevaluate", "return_to_engine")
RECORD_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$"
"""ids of records and the ids a record refers to (scene, rollout, mode ids): letters, digits, '_', '.', ':', '-';
no slashes, no leading dot, no quotes or spaces (the same pattern as `sim.fileio.RECORD_ID_PATTERN`)"""
MAX_ROUND = 10_000
"""largest co-evolution round a record or tool takes"""
MAX_ROLLOUTS = 1_000_000
"""most rollouts behind one success rate (a scene's n_rollouts, the n of a mode's hardness)"""
MAX_STEPS = 1_000_000
"""most control steps of one rollout (and the largest step index in evidence)"""
MAX_SEED = 2**63 - 1
"""largest seed a rollout record takes (the int64 column's maximum)"""


def now_iso() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="microseconds")


def _one_of(value: str, valid: tuple[str, ...], what: str) -> str:
    if value not in valid:  # the value shortened: a megabyte of it is no help in a one-line error
        raise ValueError(f"unknown {what} {value!r:.80}; valid values: {', '.join(valid)}")
    return value


def _vector(value: Any) -> list[float] | None:
    """Cast to float32 values (what the column stores) so that records round-trip exactly."""
    if value is None:
        return None
    arr = np.asarray(value, dtype=np.float32)
    if arr.shape != (EMBED_DIM,):
        raise ValueError(f"vector must have shape ({EMBED_DIM},), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("vector contains NaN or infinite values")
    return arr.tolist()


def _finite_json(value: Any, where: str = "value") -> Any:
    """Refuse NaN and infinite numbers anywhere in a free-form JSON value (they are not JSON)."""
    stack = [(value, where)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            raise ValueError(f"{path} must be a finite number, got {item}")
        if isinstance(item, dict):
            stack.extend((v, f"{path}[{k!r}]") for k, v in item.items())
        elif isinstance(item, list | tuple):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(item))
    return value


def _enum(name: str, valid: tuple[str, ...], what: str, empty: bool = False) -> TypeAliasType:
    """A string type named `name` that accepts one of `valid` (or "" when `empty`), refusing others with a message
    that lists them, and shows them as a JSON-schema enum."""
    check = (lambda v: v and _one_of(v, valid, what)) if empty else (lambda v: _one_of(v, valid, what))
    shown = ["", *valid] if empty else list(valid)
    return TypeAliasType(name, Annotated[str, AfterValidator(check), WithJsonSchema({"type": "string", "enum": shown})])


Phase = _enum("Phase", PHASES, "phase")
DiagnosisFactor = _enum("DiagnosisFactor", DIAGNOSIS_FACTORS, "diagnosis factor")
SceneFactor = _enum("SceneFactor", FACTORS, "scene factor")
Family = _enum("Family", FAMILIES, "family")
OptionalFamily = _enum("FamilyOrAny", FAMILIES, "family", empty=True)
"""a family or the empty string (not bound to a family)"""
Role = _enum("Role", ROLES, "role")
Batch = _enum("Batch", BATCHES, "batch")
ModeStatus = _enum("ModeStatus", MODE_STATUSES, "status")
LearningTool = _enum("LearningTool", LEARNING_TOOLS, "learning tool")
Vector = Annotated[list[float], BeforeValidator(_vector)]
RecordId = TypeAliasType("RecordId", Annotated[str, Field(pattern=RECORD_ID_PATTERN)])
"""a record id: see `RECORD_ID_PATTERN`"""
OptionalRecordId = Annotated[str, Field(pattern=RECORD_ID_PATTERN.replace("^", "^(?:").replace("$", ")?$"))]
"""a record id or the empty string (no reference)"""
JsonDict = Annotated[dict[str, Any], AfterValidator(_finite_json)]
"""free-form JSON object; numbers must be finite"""


class Record(BaseModel):
    """Fields shared by every table."""

    model_config = ConfigDict(extra="forbid", validate_assignment=False, allow_inf_nan=False)
    """float fields refuse NaN and infinities (they are not JSON and poison averages)"""

    id: RecordId = Field(description="unique id; writing it again replaces the record")
    created_at: str = Field(default_factory=now_iso, description="ISO-8601 UTC creation time (default: now)")
    run_id: str = Field(default="", description="the run that wrote it")
    round: int | None = Field(default=None, ge=0, le=MAX_ROUND, description="co-evolution round")


# --- nested values (stored as JSON) ---------------------------------------------------------------
# Comments, not docstrings: a nested model's docstring would be sent in every tool schema that holds it.


class Nested(BaseModel):  # a nested value refuses keys it does not define (a misspelt key is an error, not lost)
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Violation(Nested):  # a verifier check the scene failed
    check: str = Field(description="the check's name, e.g. collision_free")
    message: str = Field(description="what failed and what to change")
    objects: list[str] = Field(default_factory=list, description="objects involved")


class Repair(Nested):  # an earlier attempt at a scene program
    attempt: int = Field(description="attempt number")
    error: str = Field(description="why it failed")
    program: str = Field("", description="the program tried")


class Evidence(Nested):  # what a diagnosis rests on
    step_indices: list[Annotated[int, Field(ge=0, le=MAX_STEPS)]] = Field(
        default_factory=list, description="control steps that show the failure")
    state_facts: list[str] = Field(default_factory=list, description="short facts relied on")
    keyframe_paths: list[str] = Field(default_factory=list, description="keyframe images")
    extra: JsonDict = Field(default_factory=dict, description="anything else, as a JSON object")


class HistoryEvent(Nested):  # one event in a mode's history
    round: int | None = Field(description="round of the event")
    event: str = Field(description="what happened, e.g. created, visited, status")
    values: JsonDict = Field(default_factory=dict, description="its numbers")


class CompileCheck(Nested):  # one check of a generation program's variants
    ok: bool = Field(description="the check passed")
    message: str = Field("", description="what failed")


class Relation(Nested):  # a predicate the bound objects must allow, e.g. inside(target, receptacle)
    predicate: str = Field(description="predicate name, e.g. inside")
    roles: list[Role] = Field(description="the roles it relates, in argument order")
    requires: dict[str, list[str]] = Field(
        default_factory=dict, description="tags a role's object must carry for this relation, by role"
    )


# --- episodic tier --------------------------------------------------------------------------------


class SceneRecord(Record):
    family: Family = Field(description="task family")
    program: str = Field(description="scene program source")
    spec_json: str = Field("{}", description="the scene spec as JSON")
    spec_hash: str = Field("", description="the spec's hash (the sim server's scene_id)")
    verified: bool = Field(False, description="the scene passed the verifier")
    violations: list[Violation] = Field(default_factory=list, description="the checks it failed")
    repairs: list[Repair] = Field(default_factory=list, description="prior attempts and their errors")
    success_rate: float | None = Field(default=None, ge=0.0, le=1.0, description="p̂(s), success over n_rollouts")
    n_rollouts: int = Field(0, ge=0, le=MAX_ROLLOUTS, description="rollouts behind success_rate")
    learning_progress: float | None = Field(default=None, description="LV(s)")
    mode_id: RecordId | None = Field(None, description="the difficulty mode the scene targets")
    batch: Batch = Field("seed", description="why the scene was made")


class RolloutRecord(Record):
    """One rollout's summary; a row of collect_rollouts' result can be stored as it is."""

    id: RecordId = Field(validation_alias=AliasChoices("id", "rollout_id"),
                         description="unique id (collect_rollouts' rollout_id; either name is accepted)")
    scene_id: RecordId = Field(description="the scene rolled out in")
    policy_id: str | None = Field(None, description="the policy that acted (default: '<run_id>@r<round>', or "
                                                    "run_id without a round)")
    success: bool = Field(description="the task's success predicate held")
    steps: int = Field(ge=0, le=MAX_STEPS, description="control steps")
    episode_return: float | None = Field(None, description="the episode return (default: 1.0 on success, else 0.0)")
    seed: int | None = Field(None, ge=0, le=MAX_SEED, description="the rollout's seed, where known")
    phase_reached: Phase = Field("other", description="furthest phase reached (default: other, not measured)")
    summary: JsonDict = Field(default_factory=dict, description="light summary, no trajectories")

    @model_validator(mode="after")
    def _derived_defaults(self) -> RolloutRecord:
        if self.policy_id is None:
            self.policy_id = self.run_id if self.round is None else f"{self.run_id}@r{self.round}"
        if self.episode_return is None:
            self.episode_return = float(self.success)
        return self


class Diagnosis(Record):
    """ψ = (δ, phase, cause, evidence), linked to a scene and its rollouts."""

    scene_id: RecordId
    rollout_ids: list[RecordId] = Field(default_factory=list, description="the rollouts it explains")
    factor: DiagnosisFactor = Field(description="δ, the scene factor the failure comes from")
    phase: Phase = Field(description="trajectory phase where the failure arose")
    cause: str = Field(min_length=1, description="the cause in words")
    evidence: Evidence = Field(default_factory=Evidence, description="what the diagnosis rests on")
    embedding: Vector | None = Field(default=None, description="cause embedding, EMBED_DIM float32")
    mode_id: RecordId | None = Field(None, description="the mode it was clustered into")


# --- semantic tier --------------------------------------------------------------------------------


class Mode(Record):
    """A difficulty mode K_j: diagnoses clustered by factor (or factor and phase, `memory_store.modes`) and cause
    similarity; `phase` is its founding diagnosis's."""

    factor: DiagnosisFactor
    phase: Phase
    centroid: Vector = Field(description="unit-norm mean of member cause embeddings")
    description: str = Field(description="representative cause (the first member's)")
    members: int = Field(0, description="diagnoses in the mode")
    hardness: float | None = Field(default=None, description="p̂_j, policy success rate (lower is harder)")
    hardness_n: int = Field(default=0, description="rollouts behind the latest p̂_j")
    importance: float = Field(default=0.0, description="w_j, EMA of success after minus before training")
    importance_n: int = Field(default=0, description="training outcomes folded into w_j")
    visits: int = Field(0, description="generation units allocated to it")
    last_round: int | None = Field(default=None, description="round of the latest visit")
    status: ModeStatus = "candidate"
    history: list[HistoryEvent] = Field(default_factory=list)
    created_round: int | None = Field(None, description="round it was founded in")
    in_band: bool = Field(default=True, description="inside the success band (true until measured)")


# --- procedural tier ------------------------------------------------------------------------------


class GenerationProgram(Record):
    """Ω: recreates a mode's difficulty in new scenes by varying one scene factor."""

    mode_id: RecordId = Field(description="the mode whose difficulty it recreates")
    parent_scene_id: OptionalRecordId = Field("", description="the scene it was derived from ('': none)")
    parent_program: str = Field("", description="that scene's program")
    factor: SceneFactor = Field(description="scene factor to vary")
    variants: list[str] = Field(default_factory=list, description="variant programs or spec hashes")
    compile_checks: list[CompileCheck] = Field(default_factory=list, description="checks of the variants")
    required_relations: list[Relation] = Field(default_factory=list,
                                               description="relations the bound objects must allow")
    roles: list[Role] = Field(default_factory=list, description="the roles its objects play")
    family: OptionalFamily = Field("", description="task family ('': any)")
    success_on_variants: float | None = Field(None, ge=0.0, le=1.0, description="policy success on the variants")
    in_pool: bool = Field(default=True, description="inside the success band (true until measured)")


class TrainingProgram(Record):
    """Φ: subgoals, completion predicates, potential code and the learning tool for a mode."""

    mode_id: RecordId = Field(description="the mode it trains")
    phase: Phase = Field(description="the diagnosed phase")
    subgoals: list[str] = Field(default_factory=list, description="subgoals in execution order")
    completion_predicates: list[str] = Field(default_factory=list, description="one per subgoal")
    potential_code: str = Field("", description="the Text2potential program")
    learning_tool: LearningTool = Field("awr_shaped", description="how the mode is learned")
    evidence: JsonDict = Field(default_factory=dict, description="before/after success, updates")
    improved: bool | None = Field(None, description="training with it helped (none: not measured)")


TABLES: dict[str, type[Record]] = {
    "scenes": SceneRecord,
    "rollouts": RolloutRecord,
    "diagnoses": Diagnosis,
    "modes": Mode,
    "generation_programs": GenerationProgram,
    "training_programs": TrainingProgram,
}
TABLE_OF: dict[type[Record], str] = {model: name for name, model in TABLES.items()}

Kind = Literal["scenes", "rollouts", "diagnoses", "modes", "generation_programs", "training_programs"]


def table_name(kind: str | type[Record] | Record) -> str:
    """Table name of a table name, a model class or a record."""
    if isinstance(kind, Record):
        kind = type(kind)
    if isinstance(kind, type):
        if kind not in TABLE_OF:
            raise ValueError(f"{kind.__name__} is not a memory record; valid: {', '.join(TABLES)}")
        return TABLE_OF[kind]
    if kind not in TABLES:
        raise ValueError(f"unknown memory table {kind!r}; valid tables: {', '.join(TABLES)}")
    return kind


# --- arrow conversion -----------------------------------------------------------------------------

_SCALARS = {str: pa.string(), bool: pa.bool_(), int: pa.int64(), float: pa.float64()}


def _column_type(name: str, annotation: Any) -> tuple[pa.DataType, bool]:
    """(arrow type, is_json) of one model field."""
    if name in VECTOR_FIELDS:
        return pa.list_(pa.float32(), EMBED_DIM), False
    if isinstance(annotation, TypeAliasType):  # e.g. `RecordId`, `Phase`: the column type of what it names
        return _column_type(name, annotation.__value__)
    if typing.get_origin(annotation) is Annotated:  # e.g. `RecordId | None`: the column type of the base type
        return _column_type(name, typing.get_args(annotation)[0])
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        non_null = [a for a in args if a is not type(None)]
        if len(non_null) == 1:
            return _column_type(name, non_null[0])
    if annotation in _SCALARS:
        return _SCALARS[annotation], False
    return pa.string(), True


def arrow_schema(model: type[Record]) -> pa.Schema:
    fields = []
    for name, info in model.model_fields.items():
        dtype, _ = _column_type(name, info.annotation)
        fields.append(pa.field(name, dtype, nullable=name != "id"))
    return pa.schema(fields)


def json_fields(model: type[Record]) -> tuple[str, ...]:
    return tuple(n for n, info in model.model_fields.items() if _column_type(n, info.annotation)[1])


def records_to_arrow(model: type[Record], records: Sequence[Record]) -> pa.Table:
    schema = arrow_schema(model)
    jsons = set(json_fields(model))
    vectors = [n for n in VECTOR_FIELDS if n in model.model_fields]
    dumped = [r.model_dump(mode="json", exclude=set(vectors)) for r in records]
    columns = []
    for f in schema:
        if f.name in vectors:
            vals = np.asarray([getattr(r, f.name) for r in records], dtype=np.float32).reshape(-1)
            columns.append(pa.FixedSizeListArray.from_arrays(pa.array(vals), EMBED_DIM))
        elif f.name in jsons:
            columns.append(pa.array([json.dumps(d[f.name], sort_keys=True, allow_nan=False) for d in dumped],
                                    pa.string()))
        else:
            columns.append(pa.array([d[f.name] for d in dumped], f.type))
    return pa.Table.from_arrays(columns, schema=schema)


def rows_to_records(model: type[Record], table: pa.Table) -> list[Record]:
    jsons = json_fields(model)
    names = [n for n in table.column_names if n in model.model_fields]
    out = []
    for row in table.select(names).to_pylist():
        for name in jsons:
            row[name] = json.loads(row[name]) if row[name] is not None else None
        out.append(model.model_validate({k: v for k, v in row.items() if v is not None}))
    return out
