"""CoDA shared memory in LanceDB: episodic traces and diagnoses, difficulty modes, program stores, allocation.

    from memory_store import MemoryStore, record_diagnosis, allocate
    store = MemoryStore.open("/abs/path/memory")
    diagnosis, mode, created = record_diagnosis(store, Diagnosis(...))
    plan = allocate(store.records("modes"), budget=64)

Modules: schema (record models), store (tables, idempotent writes, versions, search), transfer (export /
import), embed (MiniLM and hashing embedders), modes (clustering and mode statistics), allocate (UCB budget,
ε novel / replay, success band), programs (Ω / Φ stores, role binding), calibration, bench.
"""

from memory_store.allocate import Allocation, allocate, update_band
from memory_store.modes import record_diagnosis
from memory_store.programs import bind_roles
from memory_store.schema import (
    Diagnosis,
    GenerationProgram,
    Mode,
    RolloutRecord,
    SceneRecord,
    TrainingProgram,
)
from memory_store.store import MemoryStore

__all__ = [
    "Allocation",
    "Diagnosis",
    "GenerationProgram",
    "MemoryStore",
    "Mode",
    "RolloutRecord",
    "SceneRecord",
    "TrainingProgram",
    "allocate",
    "bind_roles",
    "record_diagnosis",
    "update_band",
]
