"""Export a memory store to a directory and import it into another (another run, another policy backbone).

Layout of an export directory:

    manifest.json          {"format": "coda-memory", "format_version": 1, "exported_at", "source_uri",
                            "embedder", "embedding_dim", "tables": {name: {"file", "rows", "sha256"}}}
    <table>.jsonl          one record per line (`model_dump(mode="json")`), sorted by id; standard JSON (no NaN)

Vectors are written as JSON numbers of their float32 values, so an import stores bit-identical vectors.
Import first checks the whole export (manifest, checksums, row counts, every line against its record model), then
merges on id: a bad export changes nothing, and importing twice changes nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from memory_store.schema import EMBED_DIM, TABLES, Record, now_iso
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
    """The manifest of an export folder, checked entry by entry: a malformed one fails with one line naming
    manifest.json and what is valid, before any table file is opened."""
    _check_folder(directory)
    path = directory / "manifest.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found; export a store with `coda memory export DIR` first")
    try:
        manifest = json.loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path} is not a {FORMAT} manifest (UTF-8 JSON): {exc}") from None
    if not isinstance(manifest, dict):
        raise ValueError(f"{path}: expected a JSON object with format, format_version, embedding_dim and tables, "
                         f"got {type(manifest).__name__}")
    if manifest.get("format") != FORMAT or manifest.get("format_version") != FORMAT_VERSION:
        raise ValueError(
            f"{path}: format {manifest.get('format')!r} v{manifest.get('format_version')}; "
            f"expected {FORMAT!r} v{FORMAT_VERSION}"
        )
    if manifest.get("embedding_dim") != EMBED_DIM:
        raise ValueError(
            f"{path}: embedding_dim {manifest.get('embedding_dim')}, this store uses {EMBED_DIM}"
        )
    tables = manifest.get("tables")
    if not isinstance(tables, dict):
        raise ValueError(f"{path}: 'tables' must be an object mapping table names to {{file, rows, sha256}}; "
                         f"{_got(tables)}")
    unknown = set(tables) - set(TABLES)
    if unknown:
        raise ValueError(f"{path}: unknown tables {sorted(unknown)}; valid tables: {', '.join(TABLES)}")
    for name, entry in tables.items():
        _check_entry(path, name, entry)
    return manifest


def _check_folder(directory: Path) -> None:
    if not directory.exists():
        raise FileNotFoundError(f"{directory} does not exist; give the folder `coda memory export DIR` wrote")
    if not directory.is_dir():
        raise NotADirectoryError(f"{directory} is a file, not an export folder (`coda memory export DIR` writes one)")


def _check_entry(manifest_path: Path, name: str, entry) -> None:
    """One `tables` entry: a plain file name inside the export folder (a path such as '../x' would read files
    outside it), a row count and a SHA-256 digest."""
    where = f"{manifest_path}: tables.{name}"
    if not isinstance(entry, dict):
        raise ValueError(f"{where} must be an object {{file, rows, sha256}}; {_got(entry)}")
    file, rows, digest = entry.get("file"), entry.get("rows"), entry.get("sha256")
    if not isinstance(file, str) or file in ("", ".", "..") or Path(file).name != file:
        raise ValueError(f"{where}.file must be a plain file name inside the export folder; {_got(file)}")
    if not isinstance(rows, int) or isinstance(rows, bool) or rows < 0:
        raise ValueError(f"{where}.rows must be an integer >= 0; {_got(rows)}")
    if not isinstance(digest, str) or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
        raise ValueError(f"{where}.sha256 must be 64 lowercase hex digits; {_got(digest)}")


def _got(value) -> str:
    return "it is missing" if value is None else f"got {json.dumps(value)[:80]}"


@dataclass(frozen=True)
class Export:
    """An export folder whose manifest, checksums, row counts and every row were checked (`read_export`)."""

    directory: Path
    manifest: dict


def read_export(directory: Path) -> Export:
    """Check a whole export before anything is written: the manifest, then each table file's checksum, row count
    and every row against its record model. An import that fails here leaves the store (or its absence) as it was,
    instead of merging the tables before the bad one."""
    manifest = read_manifest(directory)
    for name, entry in manifest["tables"].items():
        _check_table(directory, name, entry)
    return Export(directory, manifest)


def _check_table(directory: Path, name: str, entry: dict) -> None:
    path = _table_file(directory, entry)
    h = hashlib.sha256()
    rows = 0
    with path.open("rb") as f:
        for lineno, line in enumerate(f, 1):
            h.update(line)
            _parse_row(TABLES[name], line, f"{path}:{lineno}")
            rows = lineno
    if h.hexdigest() != entry["sha256"]:
        raise ValueError(f"{path}: checksum mismatch with manifest.json (file changed or truncated)")
    if rows != entry["rows"]:
        raise ValueError(f"{path}: {rows} rows, manifest.json says {entry['rows']}")


def _table_file(directory: Path, entry: dict) -> Path:
    path = directory / entry["file"]
    if path.is_symlink() or not path.is_file():
        raise ValueError(f"{path}: named in manifest.json but not a plain file of the export folder")
    return path


def _parse_row(model: type[Record], line: bytes, where: str) -> Record:
    """One JSON line as a record; a validation error becomes one line naming the file, line and first field."""
    try:
        return model.model_validate_json(line)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        field = ".".join(str(part) for part in errors[0]["loc"]) or "the row"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        message = " ".join(str(errors[0]["msg"]).split())
        raise ValueError(f"{where}: invalid {model.__name__}: {field}: {message}{more}") from None


def import_store(store: MemoryStore, directory: Path) -> dict:
    """Merge an export into the store (idempotent); returns {table: {"rows", "inserted", "updated"}}."""
    return merge_export(store, read_export(directory))


def merge_export(store: MemoryStore, export: Export) -> dict:
    """Write a checked export into the store in batches of `IMPORT_BATCH` rows (merge on id, so importing twice
    changes nothing); returns {table: {"rows", "inserted", "updated"}}. All or nothing: the tables it writes are
    locked for the whole import, and a write that fails midway (a full disk, Ctrl-C) restores every table to the
    version it had before the import began, then re-raises."""
    source_embedder = export.manifest.get("embedder")
    own = getattr(store.embedder, "name", None)
    if source_embedder and own and source_embedder != own:
        log.warning("import: embeddings made by %s, this store embeds with %s", source_embedder, own)
    names = list(export.manifest["tables"])
    with contextlib.ExitStack() as locks:
        for name in names:
            locks.enter_context(store.lock(name))
        before = {name: store.table(name).version for name in names}
        try:
            return {name: _merge_table(store, export, name) for name in names}
        except BaseException:
            _restore(store, before)
            raise


def _merge_table(store: MemoryStore, export: Export, name: str) -> dict:
    path = _table_file(export.directory, export.manifest["tables"][name])
    inserted = updated = rows = 0
    with path.open("rb") as f:
        numbered = enumerate(f, 1)
        while chunk := list(islice(numbered, IMPORT_BATCH)):
            batch = [_parse_row(TABLES[name], line, f"{path}:{n}") for n, line in chunk]
            res = store.put_many(batch)
            inserted, updated, rows = inserted + res.inserted, updated + res.updated, rows + len(batch)
    return {"rows": rows, "inserted": inserted, "updated": updated}


def _restore(store: MemoryStore, versions: dict[str, int]) -> None:
    """Put each table back at its version (a new version holding the old rows); a table that cannot be restored
    is logged with the version to restore by hand (`coda memory` keeps every version)."""
    for name, version in versions.items():
        table = store.table(name)
        try:
            table.checkout_latest()
            if table.version != version:
                table.restore(version)
        except Exception as exc:  # noqa: BLE001 - the import's own error is the one to raise
            log.error("import: could not restore table %s to version %d: %s", name, version, exc)
