"""MemoryStore: the shared memory's tables in LanceDB, with idempotent writes, versions and export/import.

    store = MemoryStore.open("/abs/path/memory")       # or any LanceDB URI, e.g. "s3://bucket/memory"
    store.put(SceneRecord(id="s1", family="pick_place", program="..."))
    store.put(SceneRecord(id="s1", ...))                # same id: still one row (merge on id)
    store.search_diagnoses("gripper hits the rim", k=5, factor="spatial", phase="approach")
    store.tag_round(3); store.checkout("modes", "round-3").records()
    store.export("/tmp/mem-export"); MemoryStore.open(other).import_("/tmp/mem-export")

Durability: every write is a `merge_insert` on `id` (insert new ids, replace known ones), so writing a record
twice stores it once. On a local directory each table has one writer at a time (an `fcntl.flock` on
`.locks/<table>.lock`, re-entrant within a thread); on any store, commit conflicts are retried with
exponential backoff. A LanceDB commit is atomic, so a killed writer leaves the last committed version.
Reads see other processes' commits at once (`read_consistency_interval=0`).
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import fcntl
import logging
import os
import random
import re
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lancedb
import numpy as np

from memory_store.embed import Embedder, default_embedder
from memory_store.schema import (
    TABLES,
    Diagnosis,
    Record,
    arrow_schema,
    records_to_arrow,
    rows_to_records,
    table_name,
)

log = logging.getLogger(__name__)

DEFAULT_URI = "runs/default/memory"
"""local store used when no URI is given (resolved to an absolute path)"""
VECTOR_INDEX_MIN_ROWS = 10_000
"""`create_indexes` builds the diagnosis vector index from this many rows (below, flat search is fast)"""
DEFAULT_NPROBES = 50
"""IVF partitions probed by `search_diagnoses` when a vector index exists (recall 1.0 in `coda bench memory`)"""


def sql_str(value: str) -> str:
    """A SQL string literal for LanceDB `where` clauses."""
    return "'" + str(value).replace("'", "''") + "'"


def where_eq(**columns: Any) -> str | None:
    """`a = 'x' AND b = 'y'` for the columns whose value is not None."""
    parts = [f"{k} = {sql_str(v)}" for k, v in columns.items() if v is not None]
    return " AND ".join(parts) or None


def round_tag(round_: int) -> str:
    return f"round-{round_}"


def resolve_uri(uri: str | os.PathLike | None, create: bool = True) -> tuple[str, Path | None]:
    """(URI for lancedb, local directory or None). Local paths become absolute (a relative path starting
    with 'db' would otherwise be read as a cloud URI by LanceDB); the directory is made when `create`, and must
    exist otherwise."""
    text = str(uri if uri is not None else DEFAULT_URI)
    if "://" in text and not text.startswith("file://"):
        return text, None
    path = Path(text.removeprefix("file://")).expanduser().resolve()
    if create:
        path.mkdir(parents=True, exist_ok=True)
    elif not path.exists():
        raise FileNotFoundError(f"no memory store at {path}: the directory does not exist")
    elif not path.is_dir():
        raise NotADirectoryError(f"no memory store at {path}: it is a file, not a store directory")
    return str(path), path


def _lance_reason(exc: Exception, limit: int = 300) -> str:
    """The first line of a Lance error without its prefix and Rust source location, cut to `limit` characters (a
    cloud error can carry a whole retry record): what a user can act on, on one line."""
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    text = re.sub(r",?\s*\S+\.rs:\d+:\d+$", "", text)
    text = re.sub(r"^lance error: (LanceError\(\w+\): )?", "", text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class WriteResult:
    inserted: int = 0
    updated: int = 0
    by_table: dict[str, dict[str, int]] = field(default_factory=dict)


def _is_conflict(exc: Exception) -> bool:
    text = str(exc).lower()
    return "conflict" in text or "retryable" in text


def _io_error(what: str, exc: Exception) -> OSError | None:
    """Lance reports a failed file write (full disk, read-only file system) as a RuntimeError carrying the OS
    error and a Rust source location; as an OSError with the plain cause it reaches clients as a readable error."""
    text = str(exc)
    if isinstance(exc, OSError) or "LanceError(IO)" not in text:
        return None
    found = re.search(r"\(os error (\d+)\)", text)
    code = int(found.group(1)) if found else errno.EIO
    return OSError(code, f"memory store: {what} failed: {os.strerror(code)}; the write was not committed "
                         "(the table keeps its previous version)")


class Snapshot:
    """Read-only view of one table at one version (see `MemoryStore.checkout`)."""

    def __init__(self, table, model: type[Record], version: int):
        self._table = table
        self.model = model
        self.version = version

    def records(self, where: str | None = None, limit: int | None = None) -> list[Record]:
        return _read(self._table, self.model, where, limit)

    def count(self, where: str | None = None) -> int:
        return self._table.count_rows(where)

    def get(self, id: str) -> Record | None:
        rows = self.records(f"id = {sql_str(id)}", limit=1)
        return rows[0] if rows else None


def _read(table, model: type[Record], where: str | None, limit: int | None) -> list[Record]:
    query = table.search()
    if where:
        query = query.where(where)
    if limit is not None:
        query = query.limit(limit)
    return rows_to_records(model, query.to_arrow())


class MemoryStore:
    """The six memory tables (`schema.TABLES`) in one LanceDB database."""

    def __init__(self, db, uri: str, local_dir: Path | None, embedder: Embedder, retries: int = 8):
        self.db = db
        self.uri = uri
        self.local_dir = local_dir
        self.embedder = embedder
        self.retries = retries
        self._tables: dict[str, Any] = {}
        self._thread_locks = {name: threading.RLock() for name in [*TABLES, "_store"]}
        self._held = threading.local()

    @classmethod
    def open(
        cls,
        uri: str | os.PathLike | None = None,
        *,
        embedder: Embedder | None = None,
        storage_options: dict[str, str] | None = None,
        retries: int = 8,
        create: bool = True,
    ) -> MemoryStore:
        """Open (creating tables as needed) the store at a local path (default `runs/default/memory`) or
        any LanceDB URI. The embedder (default: offline MiniLM, loaded on first use) embeds diagnosis
        causes written without an embedding and text queries. With `create=False` nothing is created: a
        missing directory, a file or a location without the memory tables raises `OSError` (for read-only use)."""
        resolved, local_dir = resolve_uri(uri, create=create)
        try:
            db = lancedb.connect(
                resolved,
                read_consistency_interval=datetime.timedelta(0),
                storage_options=storage_options,
            )
            store = cls(db, resolved, local_dir, embedder or default_embedder(), retries)
            if create:
                store._open_tables()
            else:
                store._open_existing_tables()
        except (RuntimeError, ValueError) as exc:  # Lance: an unknown scheme, missing credentials, a damaged table
            raise OSError(f"cannot open the memory store {resolved}: {_lance_reason(exc)}") from exc
        return store

    def _open_existing_tables(self) -> None:
        """Open the tables of an existing store without creating (or locking) anything."""
        existing = set(self.db.list_tables().tables)
        missing = [name for name in TABLES if name not in existing]
        if len(missing) == len(TABLES):
            raise FileNotFoundError(f"no memory store at {self.uri}: it holds none of the memory tables")
        if missing:
            raise FileNotFoundError(f"{self.uri} is not a complete memory store: tables {', '.join(missing)} "
                                    "are missing")
        for name in TABLES:
            self._tables[name] = self.db.open_table(name)

    def _open_tables(self) -> None:
        with self.lock("_store"):
            existing = set(self.db.list_tables().tables)
            for name, model in TABLES.items():
                if name in existing:
                    self._tables[name] = self.db.open_table(name)
                else:
                    self._tables[name] = self.db.create_table(name, schema=arrow_schema(model), exist_ok=True)

    def table(self, kind) -> Any:
        """The LanceDB table handle of a table name, model class or record."""
        return self._tables[table_name(kind)]

    # --- locking and retries ------------------------------------------------------------------

    @contextlib.contextmanager
    def lock(self, kind) -> Iterator[None]:
        """Exclusive writer lock on one table (re-entrant within a thread; a no-op on remote URIs)."""
        name = kind if kind == "_store" else table_name(kind)
        held = getattr(self._held, "tables", None)
        if held is None:
            held = self._held.tables = set()
        if name in held:
            yield
            return
        with self._thread_locks[name]:
            fd = None
            if self.local_dir is not None:
                lock_dir = self.local_dir / ".locks"
                lock_dir.mkdir(exist_ok=True)
                fd = os.open(lock_dir / f"{name}.lock", os.O_CREAT | os.O_RDWR, 0o644)
                fcntl.flock(fd, fcntl.LOCK_EX)
            held.add(name)
            try:
                yield
            finally:
                held.discard(name)
                if fd is not None:
                    fcntl.flock(fd, fcntl.LOCK_UN)
                    os.close(fd)

    def _retry(self, what: str, fn):
        for attempt in range(self.retries + 1):
            try:
                return fn()
            except Exception as exc:  # lancedb raises plain RuntimeError/OSError on commit conflicts
                if not _is_conflict(exc) or attempt == self.retries:
                    io_error = _io_error(what, exc)
                    if io_error is not None:
                        raise io_error from exc
                    raise
                delay = 0.02 * 2**attempt * (1.0 + random.random())
                log.warning("%s: commit conflict (attempt %d), retrying in %.2fs", what, attempt + 1, delay)
                time.sleep(delay)

    # --- writes -------------------------------------------------------------------------------

    def put(self, record: Record) -> WriteResult:
        """Insert or replace one record (by id)."""
        return self.put_many([record])

    def put_many(self, records: Iterable[Record]) -> WriteResult:
        """Insert or replace records by id, one commit per table; the last of duplicate ids wins."""
        groups: dict[str, dict[str, Record]] = {}
        for r in records:
            groups.setdefault(table_name(r), {})[r.id] = r
        result = WriteResult()
        for name, by_id in groups.items():
            rows = list(by_id.values())
            if name == "diagnoses":
                rows = self._with_embeddings(rows)
            data = records_to_arrow(TABLES[name], rows)
            table = self._tables[name]
            with self.lock(name):
                merged = self._retry(
                    f"write {name}",
                    lambda t=table, d=data: (
                        t.merge_insert("id")
                        .when_matched_update_all()
                        .when_not_matched_insert_all()
                        .execute(d)
                    ),
                )
            counts = {"inserted": merged.num_inserted_rows, "updated": merged.num_updated_rows}
            result.by_table[name] = counts
            result.inserted += counts["inserted"]
            result.updated += counts["updated"]
        return result

    def _with_embeddings(self, rows: list[Diagnosis]) -> list[Diagnosis]:
        missing = [r for r in rows if r.embedding is None]
        if not missing:
            return rows
        vecs = self.embedder.encode([r.cause for r in missing])
        filled = {
            r.id: r.model_copy(update={"embedding": v.tolist()}) for r, v in zip(missing, vecs, strict=True)
        }
        return [filled.get(r.id, r) for r in rows]

    # --- reads --------------------------------------------------------------------------------

    def get(self, kind, id: str) -> Record | None:
        rows = self.records(kind, f"id = {sql_str(id)}", limit=1)
        return rows[0] if rows else None

    def existing_ids(self, kind, ids: Iterable[str]) -> set[str]:
        """Those of `ids` that the table holds (reads the id column only)."""
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return set()
        where = f"id IN ({', '.join(sql_str(i) for i in wanted)})"
        query = self.table(kind).search().where(where).select(["id"]).limit(len(wanted))
        return set(query.to_arrow().column("id").to_pylist())

    def records(self, kind, where: str | None = None, *, limit: int | None = None) -> list[Record]:
        """Records of a table (latest version), optionally filtered by a SQL `where` clause."""
        name = table_name(kind)
        return _read(self._tables[name], TABLES[name], where, limit)

    def count(self, kind, where: str | None = None) -> int:
        return self.table(kind).count_rows(where)

    def counts(self) -> dict[str, int]:
        return {name: t.count_rows() for name, t in self._tables.items()}

    def find(self, id: str) -> tuple[str, Record] | None:
        """(table, record) of an id in any table."""
        for name in TABLES:
            rec = self.get(name, id)
            if rec is not None:
                return name, rec
        return None

    def search_diagnoses(
        self,
        query: str | Sequence[float] | np.ndarray,
        k: int = 10,
        *,
        factor: str | None = None,
        phase: str | None = None,
        mode_id: str | None = None,
        where: str | None = None,
        nprobes: int = DEFAULT_NPROBES,
    ) -> list[tuple[Diagnosis, float]]:
        """k nearest diagnoses by cause (cosine), prefiltered on factor / phase / mode and `where`.

        Returns (diagnosis, cosine similarity) pairs, most similar first."""
        if isinstance(query, str):
            vec = self.embedder.encode([query])[0]
        else:
            vec = np.asarray(query, dtype=np.float32)
        clauses = [c for c in (where_eq(factor=factor, phase=phase, mode_id=mode_id), where) if c]
        q = self.table("diagnoses").search(vec, vector_column_name="embedding").distance_type("cosine")
        if clauses:
            q = q.where(" AND ".join(f"({c})" for c in clauses), prefilter=True)
        result = q.nprobes(nprobes).limit(k).to_arrow()
        sims = [1.0 - d for d in result["_distance"].to_pylist()]
        return list(zip(rows_to_records(Diagnosis, result), sims, strict=True))

    # --- maintenance --------------------------------------------------------------------------

    def create_indexes(self, *, vector_min_rows: int = VECTOR_INDEX_MIN_ROWS) -> dict[str, list[str]]:
        """Scalar indexes on ids and filter columns; an IVF_FLAT cosine index on diagnosis embeddings
        once the table has `vector_min_rows` rows. Rows added later are searched exactly until
        `optimize()` folds them into the index."""
        from lancedb.index import Bitmap, BTree, IvfFlat

        plan = {
            "scenes": [("mode_id", BTree())],
            "rollouts": [("scene_id", BTree())],
            "diagnoses": [
                ("factor", Bitmap()),
                ("phase", Bitmap()),
                ("mode_id", BTree()),
                ("scene_id", BTree()),
            ],
            "modes": [("factor", Bitmap()), ("phase", Bitmap())],
        }
        built: dict[str, list[str]] = {}
        for name, table in self._tables.items():
            rows = table.count_rows()
            if rows == 0:
                continue
            with self.lock(name):
                for column, config in [("id", BTree()), *plan.get(name, [])]:
                    self._retry(
                        f"index {name}.{column}",
                        lambda t=table, c=column, k=config: t.create_index(c, config=k),
                    )
                    built.setdefault(name, []).append(column)
                if name == "diagnoses" and rows >= vector_min_rows:
                    self._retry(
                        "index diagnoses.embedding",
                        lambda t=table: t.create_index("embedding", config=IvfFlat(distance_type="cosine")),
                    )
                    built[name].append("embedding")
        return built

    def optimize(self) -> None:
        """Compact fragments and fold new rows into existing indexes (tagged versions are kept)."""
        for name, table in self._tables.items():
            with self.lock(name):
                self._retry(f"optimize {name}", table.optimize)

    # --- versions -----------------------------------------------------------------------------

    def versions(self, kind) -> list[dict]:
        """[{version, timestamp}] of a table, oldest first."""
        return [
            {"version": v["version"], "timestamp": v["timestamp"]} for v in self.table(kind).list_versions()
        ]

    def checkout(self, kind, version: int | str) -> Snapshot:
        """Read-only view of a table at a version number or tag (e.g. `round_tag(3)`)."""
        name = table_name(kind)
        table = self.db.open_table(name)
        try:
            table.checkout(version)
        except ValueError as exc:
            versions = [v["version"] for v in table.list_versions()]
            raise ValueError(
                f"table {name} has no version {version!r}: versions {versions[0]}..{versions[-1]}, "
                f"tags {sorted(table.tags.list()) or 'none'} (tag rounds with tag_round)"
            ) from exc
        return Snapshot(table, TABLES[name], table.version)

    def tag_round(self, round_: int) -> dict[str, int]:
        """Tag every table's current version as `round-N` (moving the tag if it exists)."""
        tag = round_tag(round_)
        versions = {}
        for name, table in self._tables.items():
            with self.lock(name):
                version = table.version
                if tag in table.tags.list():
                    table.tags.update(tag, version)
                else:
                    table.tags.create(tag, version)
                versions[name] = version
        return versions

    def round_versions(self, round_: int) -> dict[str, int]:
        """Version of each table tagged for a round (tables without the tag are left out)."""
        tag = round_tag(round_)
        out = {}
        for name, table in self._tables.items():
            tags = table.tags.list()
            if tag in tags:
                out[name] = tags[tag]["version"]
        return out

    # --- export / import ----------------------------------------------------------------------

    def export(self, directory: str | os.PathLike) -> dict:
        from memory_store.transfer import export_store

        return export_store(self, Path(directory))

    def import_(self, directory: str | os.PathLike) -> dict:
        from memory_store.transfer import import_store

        return import_store(self, Path(directory))
