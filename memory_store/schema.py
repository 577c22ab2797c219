"""Record models of the shared memory: one pydantic model per LanceDB table.

Every record has a unique string `id`, `created_at` (ISO-8601, UTC), `run_id` and `round`. Scalar fields
become typed columns (filterable in `where` clauses); lists, dicts and nested models are stored as JSON
strings; the two vector fields (`Diagnosis.embedding`, `Mode.centroid`) are fixed-size float32 columns of
`EMBED_DIM` values. `TABLES` maps table names to models; `arrow_schema(model)` derives the column layout.
Ids, and the ids a record refers to, match `RECORD_ID_PATTERN`; numbers (float fields and numbers inside JSON
fields) are finite.
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
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

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


def now_iso() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="microseconds")


def _one_of(value: str, valid: tuple[str, ...], what: str) -> str:
    if value not in valid:
        raise ValueError(f"unknown {what} {value!r}; valid values: {', '.join(valid)}")
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


def _choice(valid: tuple[str, ...], what: str) -> AfterValidator:
    return AfterValidator(lambda v: _one_of(v, valid, what))


Phase = Annotated[str, _choice(PHASES, "phase")]
DiagnosisFactor = Annotated[str, _choice(DIAGNOSIS_FACTORS, "diagnosis factor")]
SceneFactor = Annotated[str, _choice(FACTORS, "scene factor")]
Family = Annotated[str, _choice(FAMILIES, "family")]
OptionalFamily = Annotated[str, AfterValidator(lambda v: v and _one_of(v, FAMILIES, "family"))]
"""a family or the empty string (not bound to a family)"""
Role = Annotated[str, _choice(ROLES, "role")]
Vector = Annotated[list[float], BeforeValidator(_vector)]
RecordId = Annotated[str, Field(pattern=RECORD_ID_PATTERN)]
"""a record id: see `RECORD_ID_PATTERN`"""
OptionalRecordId = Annotated[str, Field(pattern=RECORD_ID_PATTERN.replace("^", "^(?:").replace("$", ")?$"))]
"""a record id or the empty string (no reference)"""
JsonDict = Annotated[dict[str, Any], AfterValidator(_finite_json)]
"""free-form JSON object; numbers must be finite"""


class Record(BaseModel):
    """Fields shared by every table."""

    model_config = ConfigDict(extra="forbid", validate_assignment=False, allow_inf_nan=False)
    """float fields refuse NaN and infinities (they are not JSON and poison averages)"""

    id: RecordId = Field(description="unique id (RECORD_ID_PATTERN); writing the same id again replaces the row")
    created_at: str = Field(default_factory=now_iso, description="ISO-8601 UTC time of creation")
    run_id: str = Field(default="", description="run that wrote the record")
    round: int | None = Field(default=None, description="co-evolution round, where relevant")


# --- nested values (stored as JSON) ---------------------------------------------------------------


class Violation(BaseModel):
    check: str
    message: str
    objects: list[str] = Field(default_factory=list)


class Repair(BaseModel):
    attempt: int
    error: str
    program: str = ""


class Evidence(BaseModel):
    step_indices: list[int] = Field(default_factory=list)
    state_facts: list[str] = Field(default_factory=list)
    keyframe_paths: list[str] = Field(default_factory=list)
    extra: JsonDict = Field(default_factory=dict)


class HistoryEvent(BaseModel):
    round: int | None
    event: str
    values: JsonDict = Field(default_factory=dict)


class CompileCheck(BaseModel):
    ok: bool
    message: str = ""


class Relation(BaseModel):
    predicate: str
    roles: list[Role]
    requires: dict[str, list[str]] = Field(
        default_factory=dict, description="optional tags a role's object must carry for this relation"
    )


# --- episodic tier --------------------------------------------------------------------------------


class SceneRecord(Record):
    family: Family
    program: str = Field(description="scene program source")
    spec_json: str = "{}"
    spec_hash: str = ""
    verified: bool = False
    violations: list[Violation] = Field(default_factory=list)
    repairs: list[Repair] = Field(default_factory=list, description="prior attempts and their errors")
    success_rate: float | None = Field(default=None, description="p̂(s) over n_rollouts")
    n_rollouts: int = 0
    learning_progress: float | None = Field(default=None, description="LV(s)")
    mode_id: RecordId | None = None
    batch: Annotated[str, _choice(BATCHES, "batch")] = "seed"


class RolloutRecord(Record):
    scene_id: RecordId
    policy_id: str
    success: bool
    steps: int
    episode_return: float = Field(description="the episode return")
    seed: int
    phase_reached: Phase
    summary: JsonDict = Field(default_factory=dict, description="light summary, no trajectories")


class Diagnosis(Record):
    """ψ = (δ, phase, cause, evidence), linked to a scene and its rollouts."""

    scene_id: RecordId
    rollout_ids: list[RecordId] = Field(default_factory=list)
    factor: DiagnosisFactor = Field(description="δ")
    phase: Phase
    cause: str = Field(min_length=1)
    evidence: Evidence = Field(default_factory=Evidence)
    embedding: Vector | None = Field(default=None, description="cause embedding, EMBED_DIM float32")
    mode_id: RecordId | None = None


# --- semantic tier --------------------------------------------------------------------------------


class Mode(Record):
    """A difficulty mode K_j: diagnoses clustered by (factor, phase) and cause similarity."""

    factor: DiagnosisFactor
    phase: Phase
    centroid: Vector = Field(description="unit-norm mean of member cause embeddings")
    description: str = Field(description="representative cause (the first member's)")
    members: int = 0
    hardness: float | None = Field(default=None, description="p̂_j, policy success rate (lower is harder)")
    hardness_n: int = Field(default=0, description="rollouts behind the latest p̂_j")
    importance: float = Field(default=0.0, description="w_j, EMA of success after minus before training")
    importance_n: int = Field(default=0, description="training outcomes folded into w_j")
    visits: int = 0
    last_round: int | None = Field(default=None, description="round of the latest visit")
    status: Annotated[str, _choice(MODE_STATUSES, "status")] = "candidate"
    history: list[HistoryEvent] = Field(default_factory=list)
    created_round: int | None = None
    in_band: bool = Field(default=True, description="inside the success band (true until measured)")


# --- procedural tier ------------------------------------------------------------------------------


class GenerationProgram(Record):
    """Ω: recreates a mode's difficulty in new scenes by varying one scene factor."""

    mode_id: RecordId
    parent_scene_id: OptionalRecordId = ""
    parent_program: str = ""
    factor: SceneFactor = Field(description="scene factor to vary")
    variants: list[str] = Field(default_factory=list, description="variant programs or spec hashes")
    compile_checks: list[CompileCheck] = Field(default_factory=list)
    required_relations: list[Relation] = Field(default_factory=list)
    roles: list[Role] = Field(default_factory=list)
    family: OptionalFamily = ""
    success_on_variants: float | None = None
    in_pool: bool = Field(default=True, description="inside the success band (true until measured)")


class TrainingProgram(Record):
    """Φ: subgoals, completion predicates, potential code and the learning tool for a mode."""

    mode_id: RecordId
    phase: Phase
    subgoals: list[str] = Field(default_factory=list)
    completion_predicates: list[str] = Field(default_factory=list)
    potential_code: str = ""
    learning_tool: Annotated[str, _choice(LEARNING_TOOLS, "learning tool")] = "awr_shaped"
    evidence: JsonDict = Field(default_factory=dict, description="before/after success, updates")
    improved: bool | None = None


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
