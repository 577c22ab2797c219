"""Files of a run directory: ids that are safe file names, paths confined to the run directory, atomic writes.

Shared by every package that keeps files in a run directory (the scene store, the memory service, the servers'
job files):

    confine(run_dir, "exports/memory", "directory")     # run_dir/exports/memory, or ValueError
    write_atomic(run_dir / "scenes" / "x.json", text)   # readers see the old or the new file, never half of it
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

SCENE_ID_PATTERN = r"^[0-9a-f]{16}$"
"""scene ids are spec hashes: 16 lowercase hex digits"""
RECORD_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$"
"""ids of traces, memory records and jobs: no slashes, no leading dot"""


def confine(run_dir: Path, relative: str, what: str = "path") -> Path:
    """`run_dir / relative`, refusing absolute paths, `..` components and symlinks that leave run_dir."""
    if not relative or "\x00" in relative:
        raise ValueError(f"{what} must be a non-empty relative path inside the run directory")
    rel = Path(relative)
    if rel.is_absolute() or relative.startswith(("~", "\\")):
        raise ValueError(f"{what} {relative!r} is absolute; give a path relative to the run directory")
    if ".." in rel.parts:
        raise ValueError(f"{what} {relative!r} contains '..'; give a path inside the run directory")
    root = run_dir.resolve()
    target = (root / rel).resolve()
    if not target.is_relative_to(root):
        raise ValueError(f"{what} {relative!r} leaves the run directory (through a symlink)")
    return target


def _staged(path: Path, data: bytes | str) -> Path:
    """`data` written to a temporary file beside `path` (same directory, so a rename or link is atomic)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    tmp.write_bytes(data.encode() if isinstance(data, str) else data)
    return tmp


def outermost_missing(folder: Path) -> Path | None:
    """The outermost folder that `folder.mkdir(parents=True)` would make (None when `folder` exists): what a
    command that fails after making it removes again, so it leaves nothing behind."""
    if folder.exists():
        return None
    return next((p for p in (folder, *folder.parents) if p.parent.exists()), None)


def write_atomic(path: Path, data: bytes | str) -> None:
    """Write a file so that readers see the old or the new content, never a partial one."""
    _staged(path, data).replace(path)


def write_new(path: Path, data: bytes | str) -> bool:
    """Write a file only if it does not exist yet (the first writer wins, atomically: readers never see a partial
    file, and of two concurrent writers exactly one lands). True when this call wrote it."""
    tmp = _staged(path, data)
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)
