"""MuJoCo's warnings go to Python logging (logger `sim.mujoco`), never to a file or to stdout.

MuJoCo's default C handler appends every warning (e.g. "Nan, Inf or huge value in QACC ... The simulation is
unstable") to `MUJOCO_LOG.TXT` in the current directory and prints it on stdout, which is the JSON-RPC channel of a
stdio MCP server. A spec from an untrusted client or program can make the trusted side's simulation warn, so
`install()` turns the file and console output off (`mujoco.MjLogConfig`) and routes the warnings through
`mujoco.set_mju_user_warning` to logging instead. MuJoCo's errors already raise `mujoco.FatalError` in Python (the
bindings install their own error handler).

`sim.compile.compile_scene` calls `install()` (the trusted side builds every scene model there); it is idempotent
and does nothing inside a sandbox zygote or child (`python -m sim.sandbox.worker`), whose default handler cannot
open a file anyway and whose stderr is not logging's.
"""

from __future__ import annotations

import logging
import sys
import threading

log = logging.getLogger("sim.mujoco")

MAX_MESSAGE_CHARS = 500
_lock = threading.Lock()
_installed = False


def _warning(message: str) -> None:
    log.warning("MuJoCo: %s", str(message)[:MAX_MESSAGE_CHARS])


def in_sandbox_process() -> bool:
    """True in a sandbox zygote and the children it forks (they run `python -m sim.sandbox.worker`)."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    return getattr(spec, "name", None) in ("sim.sandbox.worker", "sim.sandbox.child")


def install() -> bool:
    """Route MuJoCo's warnings to logging and turn its log file and console output off, once per process.
    Returns whether the handlers are installed (False in a sandbox process)."""
    global _installed
    if _installed:
        return True
    if in_sandbox_process():
        return False
    import mujoco

    with _lock:
        if not _installed:
            config = mujoco.MjLogConfig.get()
            config.logto_file = False
            config.logto_console = False
            config.set()
            mujoco.set_mju_user_warning(_warning)
            _installed = True
    return True
