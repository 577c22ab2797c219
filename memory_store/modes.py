"""Semantic tier: online clustering of diagnoses into difficulty modes, and the per-mode statistics.

Clustering. A diagnosis joins the most similar mode of its factor δ (the default key, `DEFAULT_MODE_KEY`; with
the key "factor_phase", of its factor and phase) when the cosine similarity between its cause embedding and the
mode centroid is at least `threshold`; otherwise it founds a new candidate mode. Under the factor key the phase is
the founding diagnosis' attribute: two failures of one scene that the critic places in different phases share a
mode (experiments/modekey_v1: critic consistency 0.39–0.63 → 0.89, targeting precision 2.4–4.5× higher). The centroid is the running mean of member embeddings, renormalized to unit length:
c ← normalize(n·c + v) with n the members before the update.

Threshold. `DEFAULT_THRESHOLD = 0.6`, calibrated with all-MiniLM-L6-v2 on `memory_store.calibration`
(14 causes × 3 paraphrases, grouped by (δ, phase)): paraphrase pairs have median cosine 0.70 (p10 0.49),
different causes sharing (δ, phase) median 0.43 (p90 0.58, max 0.69). Online clustering of that set at 0.6
keeps every pair of distinct causes apart and merges 79% of paraphrase pairs (19 modes for 14 causes);
0.55 merges 83% but fuses 14% of distinct pairs, 0.5 fuses 29%; 0.65 / 0.7 merge only 71% / 57%.
Fusing distinct causes corrupts a mode (its generation and training programs target the wrong thing),
an extra split only delays pooling, so the smallest threshold with no fusion was chosen.
`python -m memory_store.calibration` prints these figures.

Statistics (pure functions on `Mode`, each appends to `mode.history`):
- hardness p̂_j: the current policy's success rate on the mode's scenes, from the latest evaluation
  (`observe_hardness`; `hardness_from_store` computes it from stored rollouts); it also updates the
  success-band flag.
- importance w_j: exponential moving average of (success after training − success before) with
  `IMPORTANCE_ALPHA = 0.5` (the first outcome sets w_j directly): w ← (1 − α)·w + α·Δ.
- visits: budget units allocated to the mode (`visit`).
- status: candidate → validated | refuted by the targeted-vs-control test (`validate`), or `set_status`.
"""

from __future__ import annotations

import hashlib
import logging
from typing import TYPE_CHECKING

import numpy as np

from memory_store.allocate import DEFAULT_BAND, update_band
from memory_store.schema import MODE_STATUSES, Diagnosis, HistoryEvent, Mode
from memory_store.store import sql_str, where_eq
from sim.constants import DEFAULT_MODE_KEY, MODE_KEYS

if TYPE_CHECKING:
    from memory_store.store import MemoryStore

log = logging.getLogger(__name__)

DEFAULT_THRESHOLD = 0.6
"""cosine similarity to a mode centroid at or above which a diagnosis joins the mode"""
IMPORTANCE_ALPHA = 0.5
"""weight of the newest training outcome in the importance EMA"""


def _unit(v) -> np.ndarray:
    v = np.asarray(v, dtype=np.float32)
    n = float(np.linalg.norm(v))
    if n == 0.0:
        raise ValueError("cannot normalize a zero vector")
    return v / n


def _event(mode: Mode, round_: int | None, event: str, **values) -> None:
    mode.history.append(HistoryEvent(round=round_, event=event, values=values))


def mode_id_for(diagnosis: Diagnosis) -> str:
    """Deterministic id of the mode a diagnosis founds (re-running the same diagnosis reuses it)."""
    digest = hashlib.sha1(diagnosis.id.encode()).hexdigest()[:12]
    return f"mode-{diagnosis.factor}-{diagnosis.phase}-{digest}"


def nearest_mode(vector, factor: str, phase: str | None, modes: list[Mode]) -> tuple[Mode | None, float]:
    """Most similar mode with the same (factor, phase) — the same factor when `phase` is None — and its cosine
    similarity (ties: smaller id)."""
    v = _unit(vector)
    best, best_sim = None, -2.0
    for mode in sorted(modes, key=lambda m: m.id):
        if mode.factor != factor or (phase is not None and mode.phase != phase):
            continue
        sim = float(np.dot(v, _unit(mode.centroid)))
        if sim > best_sim:
            best, best_sim = mode, sim
    return best, (best_sim if best is not None else 0.0)


def new_mode(diagnosis: Diagnosis, round_: int | None = None) -> Mode:
    if diagnosis.embedding is None:
        raise ValueError(f"diagnosis {diagnosis.id} has no embedding; embed its cause first")
    mode = Mode(
        id=mode_id_for(diagnosis),
        run_id=diagnosis.run_id,
        round=round_,
        factor=diagnosis.factor,
        phase=diagnosis.phase,
        centroid=_unit(diagnosis.embedding).tolist(),
        description=diagnosis.cause,
        members=1,
        created_round=round_,
    )
    _event(mode, round_, "created", diagnosis=diagnosis.id)
    return mode


def add_member(mode: Mode, vector, round_: int | None = None, diagnosis_id: str = "") -> Mode:
    """Fold one member embedding into the centroid: c ← normalize(n·c + v)."""
    c = _unit(mode.centroid) * mode.members + _unit(vector)
    mode.centroid = _unit(c).tolist()
    mode.members += 1
    _event(mode, round_, "member", diagnosis=diagnosis_id, members=mode.members)
    return mode


def assign(
    diagnosis: Diagnosis,
    modes: list[Mode],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    round_: int | None = None,
    key: str = DEFAULT_MODE_KEY,
) -> tuple[Mode, bool, float]:
    """Cluster one embedded diagnosis into `modes` (pure): returns (mode, created, similarity).

    Joins the nearest mode with the same key (`MODE_KEYS`) when similarity ≥ threshold (the mode is updated in
    place), else returns a new candidate mode. Sets `diagnosis.mode_id`."""
    if diagnosis.embedding is None:
        raise ValueError(f"diagnosis {diagnosis.id} has no embedding; embed its cause first")
    if key not in MODE_KEYS:
        raise ValueError(f"mode key must be one of {', '.join(MODE_KEYS)}, got {key!r}")
    phase = diagnosis.phase if key == "factor_phase" else None
    mode, sim = nearest_mode(diagnosis.embedding, diagnosis.factor, phase, modes)
    if mode is not None and sim >= threshold:
        add_member(mode, diagnosis.embedding, round_, diagnosis.id)
        created = False
    else:
        mode, created = new_mode(diagnosis, round_), True
        sim = 1.0
    diagnosis.mode_id = mode.id
    return mode, created, sim


def record_diagnosis(
    store: MemoryStore,
    diagnosis: Diagnosis,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    round_: int | None = None,
    key: str = DEFAULT_MODE_KEY,
) -> tuple[Diagnosis, Mode, bool]:
    """Embed (if needed), cluster (by `key`, see `assign`) and store a diagnosis and its mode; returns
    (diagnosis, mode, created).

    Idempotent: a diagnosis already folded into its stored mode is returned unchanged. Holds the modes-table lock
    for the read-modify-write, so concurrent callers on one local store do not race."""
    with store.lock("modes"):
        stored = store.get("diagnoses", diagnosis.id)
        if stored is not None and stored.mode_id is not None:
            mode = store.get("modes", stored.mode_id)
            if mode is not None and any(e.values.get("diagnosis") == diagnosis.id for e in mode.history):
                return stored, mode, False
        if diagnosis.embedding is None:
            diagnosis = diagnosis.model_copy(
                update={"embedding": store.embedder.encode([diagnosis.cause])[0].tolist()}
            )
        else:
            diagnosis = diagnosis.model_copy()
        same = {"factor": diagnosis.factor} if key == "factor" else {"factor": diagnosis.factor, "phase": diagnosis.phase}
        candidates = store.records("modes", where_eq(**same))
        mode, created, sim = assign(diagnosis, candidates, threshold=threshold, round_=round_, key=key)
        log.debug("diagnosis %s -> %s (created=%s, cos=%.3f)", diagnosis.id, mode.id, created, sim)
        store.put(diagnosis)  # diagnosis first: a retry after a crash between the two re-derives the mode
        store.put(mode)
    return diagnosis, mode, created


# --- statistics -----------------------------------------------------------------------------------


def observe_hardness(
    mode: Mode, successes: int, n: int, round_: int | None = None, band: tuple[float, float] = DEFAULT_BAND
) -> Mode:
    """Set p̂_j = successes / n from the current policy's rollouts on the mode's scenes."""
    if n <= 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 ≤ successes ≤ n and n ≥ 1, got successes={successes}, n={n}")
    mode.hardness = successes / n
    mode.hardness_n = n
    _event(mode, round_, "hardness", hardness=mode.hardness, n=n)
    update_band(mode, mode.hardness, band=band, round_=round_)
    return mode


def hardness_from_store(store: MemoryStore, mode_id: str, policy_id: str | None = None) -> tuple[int, int]:
    """(successes, rollouts) over stored rollouts on scenes of a mode (optionally of one policy)."""
    scene_ids = [s.id for s in store.records("scenes", where_eq(mode_id=mode_id))]
    if not scene_ids:
        return 0, 0
    where = f"scene_id IN ({', '.join(sql_str(s) for s in scene_ids)})"
    if policy_id is not None:
        where += f" AND policy_id = {sql_str(policy_id)}"
    rollouts = store.records("rollouts", where)
    return sum(r.success for r in rollouts), len(rollouts)


def observe_training(
    mode: Mode, before: float, after: float, round_: int | None = None, alpha: float = IMPORTANCE_ALPHA
) -> Mode:
    """Fold a training outcome Δ = after − before into w_j (EMA; the first outcome sets w_j)."""
    if not 0 < alpha <= 1:
        raise ValueError(f"alpha must be in (0, 1], got {alpha}")
    delta = after - before
    mode.importance = delta if mode.importance_n == 0 else (1 - alpha) * mode.importance + alpha * delta
    mode.importance_n += 1
    _event(mode, round_, "training", before=before, after=after, delta=delta, importance=mode.importance)
    return mode


def visit(mode: Mode, units: int = 1, round_: int | None = None) -> Mode:
    """Count budget units spent on the mode in a round."""
    if units < 0:
        raise ValueError(f"units must be ≥ 0, got {units}")
    mode.visits += units
    mode.last_round = round_ if round_ is not None else mode.last_round
    _event(mode, round_, "visit", units=units, visits=mode.visits)
    return mode


def set_status(mode: Mode, status: str, round_: int | None = None, reason: str = "") -> Mode:
    if status not in MODE_STATUSES:
        raise ValueError(f"unknown status {status!r}; valid values: {', '.join(MODE_STATUSES)}")
    if status != mode.status:
        _event(mode, round_, "status", old=mode.status, new=status, reason=reason)
        mode.status = status
    return mode


def validate(mode: Mode, targeted_success: float, control_success: float, round_: int | None = None) -> Mode:
    """Validated when the targeted batch is harder than the control batch (lower success), else refuted."""
    status = "validated" if targeted_success < control_success else "refuted"
    reason = f"targeted {targeted_success:.3f} vs control {control_success:.3f}"
    return set_status(mode, status, round_, reason)


def refutation_rate(modes: list[Mode]) -> float | None:
    """Refuted / (validated + refuted) over decided modes; None if none is decided."""
    decided = [m for m in modes if m.status != "candidate"]
    return sum(m.status == "refuted" for m in decided) / len(decided) if decided else None
