"""Export a memory store to a directory and import it into another (another run, another policy backbone).

Layout of an export directory:

    manifest.json          {"format": "coda-memory", "format_version": 1, "exported_at", "source_uri",
                            "embedder", "embedding_dim", "tables": {name: {"file", "rows", "sha256"}}}
    <table>.jsonl          one record per line (`model_dump(mode="json")`), sorted by id; standard JSON (no NaN)

Vectors are written as JSON numbers of their float32 values, so an import stores bit-identical vectors.
Import validates every line against the record model and merges on id: importing twice changes nothing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from memory_store.schema import EMBED_DIM, TABLES, now_iso
from sim.fileio import outermost_missing

if TYPE_CHECKING:
    from memory_store.store import MemoryStore

log = logging.getLogger(__name__)

FORMAT = "coda-memory"
FORMAT_VERSION = 1
IMPORT_BATCH = 2000


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def export_store(store: MemoryStore, directory: Path) -> dict:
    """Write every table to `<table>.jsonl` plus `manifest.json`; returns the manifest. The files are written into a
    scratch folder beside `directory` and moved into place at the end, after a check that each can be (an export
    that fails leaves neither half an export nor new folders behind); other files in `directory` stay."""
    names = [f"{name}.jsonl" for name in TABLES] + ["manifest.json"]
    if directory.exists() and not directory.is_dir():
        raise NotADirectoryError(f"{directory} exists and is not a folder")
    blocked = [n for n in names if (directory / n).exists() and not (directory / n).is_file()]
    if blocked:
        raise IsADirectoryError(f"{directory / blocked[0]} exists and is not a file; export into another folder")
    made = outermost_missing(directory)  # removed again when the export fails
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f".{directory.name}.", dir=directory.parent) as scratch:
            manifest = _write_export(store, Path(scratch))
            for n in names:
                os.replace(Path(scratch) / n, directory / n)
    except BaseException:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)
        raise
    log.info("exported %s to %s", {n: t["rows"] for n, t in manifest["tables"].items()}, directory)
    return manifest


def _write_export(store: MemoryStore, directory: Path) -> dict:
    tables = {}
    for name in TABLES:
        records = sorted(store.records(name), key=lambda r: r.id)
        path = directory / f"{name}.jsonl"
        with path.open("w", encoding="utf-8") as f:
            for rec in records:
                f.write(json.dumps(rec.model_dump(mode="json"), sort_keys=True, ensure_ascii=False, allow_nan=False)
                        + "\n")
        tables[name] = {"file": path.name, "rows": len(records), "sha256": _sha256(path)}
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "exported_at": now_iso(),
        "source_uri": store.uri,
        "embedder": getattr(store.embedder, "name", type(store.embedder).__name__),
        "embedding_dim": EMBED_DIM,
        "tables": tables,
    }
    (directory / "manifest.json").write_text(json.dumps(manifest, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    return manifest


def read_manifest(directory: Path) -> dict:
    path = directory / "manifest.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found; export a store with `coda memory export DIR` first")
    manifest = json.loads(path.read_text(encoding="utf-8"))
    if manifest.get("format") != FORMAT or manifest.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"{path}: format {manifest.get('format')!r} v{manifest.get('format_version')}; "
            f"expected {FORMAT!r} v{FORMAT_VERSION}"
        )
    if manifest.get("embedding_dim") != EMBED_DIM:
        raise ValueError(
            f"{path}: embedding_dim {manifest.get('embedding_dim')}, this store uses {EMBED_DIM}"
        )
    unknown = set(manifest["tables"]) - set(TABLES)
    if unknown:
        raise ValueError(f"{path}: unknown tables {sorted(unknown)}; valid tables: {', '.join(TABLES)}")
    return manifest


def import_store(store: MemoryStore, directory: Path) -> dict:
    """Merge an export into the store (idempotent); returns {table: {"rows", "inserted", "updated"}}."""
    manifest = read_manifest(directory)
    source_embedder = manifest.get("embedder")
    own = getattr(store.embedder, "name", None)
    if source_embedder and own and source_embedder != own:
        log.warning("import: embeddings made by %s, this store embeds with %s", source_embedder, own)
    # verify every file before writing anything
    for entry in manifest["tables"].values():
        path = directory / entry["file"]
        if _sha256(path) != entry["sha256"]:
            raise ValueError(f"{path}: checksum mismatch with manifest.json (file changed or truncated)")
    summary = {}
    for name, entry in manifest["tables"].items():
        model = TABLES[name]
        inserted = updated = rows = 0
        batch = []
        with (directory / entry["file"]).open(encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                try:
                    batch.append(model.model_validate_json(line))
                except ValueError as exc:
                    raise ValueError(f"{entry['file']}:{lineno}: invalid {model.__name__}: {exc}") from exc
                if len(batch) >= IMPORT_BATCH:
                    res = store.put_many(batch)
                    inserted, updated, rows = (
                        inserted + res.inserted,
                        updated + res.updated,
                        rows + len(batch),
                    )
                    batch = []
        if batch:
            res = store.put_many(batch)
            inserted, updated, rows = inserted + res.inserted, updated + res.updated, rows + len(batch)
        if rows != entry["rows"]:
            raise ValueError(f"{entry['file']}: {rows} rows, manifest says {entry['rows']}")
        summary[name] = {"rows": rows, "inserted": inserted, "updated": updated}
    return summary
