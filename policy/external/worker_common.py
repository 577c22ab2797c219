"""What every external-suite worker script shares: the message loop and MuJoCo model helpers (stdlib + numpy).

A worker (`robosuite_worker.py`, `metaworld_worker.py`) is run by the external venv's python, where this project
is not installed; it puts its own folder on `sys.path` to import this file, `protocol.py` and `control.py`, and
takes it off again before importing its simulator. `serve` answers one message at a time on the real stdout and
sends whatever the simulator prints to stderr, so stdout carries only messages.
"""

from __future__ import annotations

import os
import sys
import traceback

import numpy as np
import protocol  # noqa: E402  (a sibling: the worker has put this folder on sys.path)


def serve(worker, commands: tuple[str, ...]) -> int:
    """Answer messages {"cmd": name, ...} with `getattr(worker, name)(msg)` until "close" or a closed pipe.

    Every command but "make" needs `worker.env`; a failure goes back as {"error", "traceback"}."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # whatever the simulator prints goes to stderr
    sys.stdout = sys.stderr
    inp = sys.stdin.buffer
    protocol.write_message(out, {"ready": True, "pid": os.getpid()})
    while True:
        try:
            msg = protocol.read_message(inp)
        except protocol.ProtocolError:
            return 0  # the adapter closed the pipe
        cmd = msg.get("cmd")
        if cmd == "close":
            protocol.write_message(out, {"closed": True})
            return 0
        try:
            if cmd not in commands:
                raise ValueError(f"unknown command {cmd!r}")
            if cmd != "make" and getattr(worker, "env", None) is None:
                raise RuntimeError("no env yet: send make first")
            answer = getattr(worker, cmd)(msg)
        except Exception as exc:  # noqa: BLE001 - every failure goes back to the adapter as one message
            answer = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
        protocol.write_message(out, answer)


def plain(v):
    """A value the protocol can carry (unknown objects become their repr)."""
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, (np.ndarray, np.generic, int, float, str, bool)) or v is None:
        return v
    return repr(v)


def name_id(mj, m, kind: str, name: str, missing: bool = False) -> int:
    """MuJoCo id of a named body / site / joint / geom; KeyError unless `missing` (then -1)."""
    obj = {"body": mj.mjtObj.mjOBJ_BODY, "site": mj.mjtObj.mjOBJ_SITE, "joint": mj.mjtObj.mjOBJ_JOINT,
           "geom": mj.mjtObj.mjOBJ_GEOM}[kind]
    i = mj.mj_name2id(m, obj, name)
    if i < 0 and not missing:
        raise KeyError(f"the model has no {kind} {name!r}")
    return i


def subtree_box(m, d, root: int) -> tuple[np.ndarray, np.ndarray]:
    """Centre offset and half extents, in the body's frame, of the collision geoms of a body's subtree (all its
    geoms when none collides)."""
    bodies = {root}
    for b in range(m.nbody):  # parents precede children in MuJoCo's body order
        if m.body_parentid[b] in bodies and b != 0:
            bodies.add(b)
    geoms = [g for g in range(m.ngeom) if m.geom_bodyid[g] in bodies]
    solid = [g for g in geoms if m.geom_contype[g] or m.geom_conaffinity[g]] or geoms
    if not solid:
        return np.zeros(3), np.zeros(3)
    R, p = d.xmat[root].reshape(3, 3), d.xpos[root]
    signs = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=np.float64)
    pts = []
    for g in solid:
        c, h = m.geom_aabb[g, :3], m.geom_aabb[g, 3:]
        corners = d.geom_xpos[g] + (c + signs * h) @ d.geom_xmat[g].reshape(3, 3).T
        pts.append((corners - p) @ R)
    pts = np.concatenate(pts)
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    return (lo + hi) / 2, (hi - lo) / 2


def subtree_bodies(m, root: int) -> set[int]:
    """The body ids of a body's subtree (itself included)."""
    bodies = {int(root)}
    for b in range(m.nbody):  # parents precede children in MuJoCo's body order
        if b != 0 and int(m.body_parentid[b]) in bodies:
            bodies.add(b)
    return bodies


def touching(m, d, a: set[int], b: set[int]) -> bool:
    """Whether MuJoCo's current contact list has a contact between a geom of a body in `a` and one in `b`."""
    n = int(d.ncon)
    if n == 0 or not a or not b:
        return False
    b1 = m.geom_bodyid[d.contact.geom1[:n]]
    b2 = m.geom_bodyid[d.contact.geom2[:n]]
    for x, y in zip(b1.tolist(), b2.tolist(), strict=True):
        if (x in a and y in b) or (x in b and y in a):
            return True
    return False
