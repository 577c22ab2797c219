"""Memory store: add throughput and filtered k-NN search p50/p95 (no index, scalar index, vector index).

    coda bench memory --rows 100000 --json

Diagnoses carry random unit vectors (embedding cost is not part of the store figures); the MiniLM
embedder's throughput is reported on its own (`embed_*`). Each search filters on factor and phase
(1/36 of the rows) and returns k full records. Recall@k of the indexed search is measured against the
exact results of the unindexed search on the same queries.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from memory_store.embed import HashingEmbedder, MiniLMEmbedder
from memory_store.schema import EMBED_DIM, Diagnosis
from memory_store.store import VECTOR_INDEX_MIN_ROWS, MemoryStore
from sim.bench import at_least
from sim.constants import DIAGNOSIS_FACTORS, PHASES

CAUSES = [
    "the gripper collides with the bowl rim while approaching the mug",
    "the mug slips out of the fingers during the lift",
    "the block is released too high above the tower",
    "the policy opens the wrong drawer",
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rows", type=at_least(1), default=10_000, help="diagnoses to write")
    parser.add_argument("--batch", type=at_least(1), default=1000, help="records per put_many call")
    parser.add_argument("--queries", type=at_least(1), default=200, help="search queries per configuration")
    parser.add_argument("--k", type=at_least(1), default=10, help="neighbours per query")
    parser.add_argument("--store", type=_new_store, default=None,
                        help="a new or empty store directory, kept after the run (default: a temporary one, removed)")
    parser.add_argument(
        "--embed-sentences", type=at_least(0), default=256, help="sentences for the embedder figure (0: skip)"
    )
    parser.add_argument("--seed", type=at_least(0), default=0)


def _new_store(text: str) -> str:
    """argparse type for --store: the benchmark writes thousands of synthetic diagnoses, which must never land in
    a store in use, so it must be a new or empty local folder."""
    if "://" in text:
        raise argparse.ArgumentTypeError(f"{text} is a URI; give a new or empty local folder")
    path = Path(text).expanduser()
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        what = "a folder that holds files" if path.is_dir() else "a file"
        raise argparse.ArgumentTypeError(f"{text} is {what}; the benchmark writes synthetic rows, so give a new or "
                                         "empty folder (or leave --store out for a temporary one)")
    return text


def _records(rows: int, rng: np.random.Generator) -> list[Diagnosis]:
    vecs = rng.standard_normal((rows, EMBED_DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    out = []
    for i in range(rows):
        out.append(
            Diagnosis(
                id=f"bench-d{i:07d}",
                scene_id=f"bench-s{i // 8:06d}",
                factor=DIAGNOSIS_FACTORS[i % len(DIAGNOSIS_FACTORS)],
                phase=PHASES[(i // len(DIAGNOSIS_FACTORS)) % len(PHASES)],
                cause=CAUSES[i % len(CAUSES)],
                embedding=vecs[i],
                mode_id=f"bench-m{i % 200:03d}",
            )
        )
    return out


def _percentiles(ms: list[float]) -> dict[str, float]:
    return {"p50": round(float(np.percentile(ms, 50)), 2), "p95": round(float(np.percentile(ms, 95)), 2)}


def _search(store: MemoryStore, queries: np.ndarray, filters: list[tuple[str, str]], k: int):
    times, results = [], []
    store.search_diagnoses(queries[0], k, factor=filters[0][0], phase=filters[0][1])  # warm caches
    for q, (factor, phase) in zip(queries, filters, strict=True):
        t0 = time.perf_counter()
        hits = store.search_diagnoses(q, k, factor=factor, phase=phase)
        times.append((time.perf_counter() - t0) * 1000)
        results.append({d.id for d, _ in hits})
    return times, results


def _embedder_figures(n: int) -> dict:
    if n <= 0:
        return {}
    emb = MiniLMEmbedder()
    t0 = time.perf_counter()
    emb.encode(CAUSES[:1])
    load_s = time.perf_counter() - t0
    texts = [f"{CAUSES[i % len(CAUSES)]} (case {i})" for i in range(n)]
    t0 = time.perf_counter()
    emb.encode(texts)
    return {
        "embed_model": emb.name,
        "embed_load_s": round(load_s, 2),
        "embed_sentences_per_s": round(n / (time.perf_counter() - t0), 1),
    }


def run(args: argparse.Namespace) -> dict:
    rng = np.random.default_rng(args.seed)
    tmp = None
    if args.store is None:
        tmp = tempfile.mkdtemp(prefix="coda-bench-memory-")
    root = Path(args.store or tmp)
    try:
        store = MemoryStore.open(root, embedder=HashingEmbedder())
        t0 = time.perf_counter()
        records = _records(args.rows, rng)
        build_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        for start in range(0, len(records), args.batch):
            store.put_many(records[start : start + args.batch])
        add_s = time.perf_counter() - t0
        again = store.put_many(records[: min(args.batch, len(records))])
        rows = store.count("diagnoses")

        queries = rng.standard_normal((args.queries, EMBED_DIM)).astype(np.float32)
        queries /= np.linalg.norm(queries, axis=1, keepdims=True)
        filters = [
            (DIAGNOSIS_FACTORS[i % len(DIAGNOSIS_FACTORS)], PHASES[(i * 5) % len(PHASES)])
            for i in range(args.queries)
        ]
        flat_ms, exact = _search(store, queries, filters, args.k)

        t0 = time.perf_counter()
        store.create_indexes(vector_min_rows=args.rows + 1)  # scalar indexes only
        scalar_index_s = time.perf_counter() - t0
        scalar_ms, _ = _search(store, queries, filters, args.k)

        result = {
            "rows": rows,
            "batch": args.batch,
            "records_build_s": round(build_s, 2),
            "add_rows_per_s": round(args.rows / add_s, 1),
            "rewrite_same_ids_inserted": again.inserted,
            "search_k": args.k,
            "search_filter": "factor = ? AND phase = ? (1/36 of rows)",
            "search_no_index_ms": _percentiles(flat_ms),
            "search_scalar_index_ms": _percentiles(scalar_ms),
            "scalar_index_build_s": round(scalar_index_s, 2),
        }
        if rows >= VECTOR_INDEX_MIN_ROWS:
            t0 = time.perf_counter()
            store.create_indexes(vector_min_rows=VECTOR_INDEX_MIN_ROWS)
            result["vector_index_build_s"] = round(time.perf_counter() - t0, 2)
            vec_ms, found = _search(store, queries, filters, args.k)
            recall = np.mean([len(a & b) / max(1, len(a)) for a, b in zip(exact, found, strict=True)])
            result["search_vector_index_ms"] = _percentiles(vec_ms)
            result["search_vector_index_recall"] = round(float(recall), 4)
            result["vector_index"] = "IVF_FLAT cosine + bitmap(factor, phase)"
        result.update(_embedder_figures(args.embed_sentences))
        return result
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
