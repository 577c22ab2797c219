"""Procedural tier: generation programs Ω and training programs Φ indexed by mode, and role binding.

Role binding transfers a generation program to a new scene (possibly of another task family): its symbolic
roles (`sim.constants.ROLES`) are bound to the scene's objects.

    bind_roles(["target", "receptacle"], [{"predicate": "inside", "roles": ["target", "receptacle"]}],
               [{"name": "mug_1", "role": "target", "category": "mug"},
                {"name": "bowl_1", "role": "receptacle", "category": "bowl", "tags": ["container"]}])
    -> [{"target": "mug_1", "receptacle": "bowl_1"}]

An object is compatible with a role when its own `role` is that role, or when its category or one of its
`tags` is the role name or one of `role_tags[role]` (default `DEFAULT_ROLE_TAGS`). A relation may require
tags of the objects bound to some of its roles (`requires`). Objects are distinct across roles; at most
`MAX_BINDINGS` bindings are returned, in a deterministic order (per role: exact role matches first, then
by object name; bindings in lexicographic order of those candidate lists).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from memory_store.schema import GenerationProgram, Relation, TrainingProgram
from memory_store.store import MemoryStore, where_eq
from sim.constants import ROLES

MAX_BINDINGS = 3

DEFAULT_ROLE_TAGS: dict[str, frozenset[str]] = {
    "target": frozenset({"graspable", "movable"}),
    "receptacle": frozenset({"container", "bowl", "basket", "box", "bin", "tray", "plate"}),
    "support": frozenset({"surface", "platform", "tray", "plate", "shelf"}),
    "occluder": frozenset({"occluder", "tall", "large"}),
    "distractor": frozenset(),
    "articulated": frozenset({"drawer", "cabinet", "door", "hinged", "sliding"}),
    "handle": frozenset({"knob", "grip"}),
    "tool": frozenset({"spatula", "hook", "stick"}),
}
"""category names / tags that qualify an object for a role besides the role name itself"""


def _tags(obj: Mapping[str, Any]) -> set[str]:
    tags = {str(t) for t in obj.get("tags", ()) or ()}
    if obj.get("category"):
        tags.add(str(obj["category"]))
    return tags


def compatible(
    obj: Mapping[str, Any], role: str, role_tags: Mapping[str, Iterable[str]] = DEFAULT_ROLE_TAGS
) -> bool:
    if obj.get("role") == role:
        return True
    return bool(_tags(obj) & ({role} | set(role_tags.get(role, ()))))


def bind_roles(
    required_roles: Sequence[str],
    relations: Sequence[Relation | Mapping[str, Any]],
    objects: Sequence[Mapping[str, Any]],
    max_bindings: int = MAX_BINDINGS,
    *,
    role_tags: Mapping[str, Iterable[str]] = DEFAULT_ROLE_TAGS,
) -> list[dict[str, str]]:
    """Up to `max_bindings` (≤ 3) assignments {role: object name} of distinct compatible objects."""
    if not 1 <= max_bindings <= MAX_BINDINGS:
        raise ValueError(f"max_bindings must be in 1..{MAX_BINDINGS}, got {max_bindings}")
    roles = list(required_roles)
    for role in roles:
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}; valid roles: {', '.join(ROLES)}")
    if len(set(roles)) != len(roles):
        raise ValueError(f"required roles must be distinct, got {roles}")
    rels = [r if isinstance(r, Relation) else Relation.model_validate(r) for r in relations]
    for rel in rels:
        missing = [r for r in rel.roles if r not in roles]
        if missing:
            raise ValueError(
                f"relation {rel.predicate}{tuple(rel.roles)} uses roles {missing} not in required roles {roles}"
            )
    names = [o.get("name") for o in objects]
    if any(not n for n in names) or len(set(names)) != len(names):
        raise ValueError("every object needs a distinct non-empty 'name'")

    requires: dict[str, set[str]] = {}
    for rel in rels:
        for role, tags in rel.requires.items():
            requires.setdefault(role, set()).update(tags)

    def candidates(role: str) -> list[str]:
        ok = [
            o
            for o in objects
            if compatible(o, role, role_tags) and requires.get(role, set()) <= (_tags(o) | {o.get("role")})
        ]
        return [o["name"] for o in sorted(ok, key=lambda o: (o.get("role") != role, o["name"]))]

    options = [candidates(role) for role in roles]
    bindings: list[dict[str, str]] = []

    def search(i: int, chosen: dict[str, str]) -> None:
        if len(bindings) >= max_bindings:
            return
        if i == len(roles):
            bindings.append(dict(chosen))
            return
        for name in options[i]:
            if name not in chosen.values():
                chosen[roles[i]] = name
                if _matchable(options[i + 1:], set(chosen.values())):  # else no binding below: never entered
                    search(i + 1, chosen)
                del chosen[roles[i]]

    if _matchable(options, set()):
        search(0, {})
    return bindings


def _matchable(options: Sequence[Sequence[str]], used: set[str]) -> bool:
    """Whether every role (its candidate names in `options`) can get a distinct object outside `used` (a bipartite
    matching by augmenting paths). `bind_roles` enters only branches that pass, so it finds each binding in
    polynomial time instead of trying every partial assignment of a role nothing can fill."""
    owner: dict[str, int] = {}

    def augment(i: int, seen: set[str]) -> bool:
        for name in options[i]:
            if name in used or name in seen:
                continue
            seen.add(name)
            if name not in owner or augment(owner[name], seen):
                owner[name] = i
                return True
        return False

    return all(augment(i, set()) for i in range(len(options)))


# --- generation programs Ω ------------------------------------------------------------------------


def compiles(program: GenerationProgram) -> bool:
    """All compile checks passed (and there is at least one)."""
    return bool(program.compile_checks) and all(c.ok for c in program.compile_checks)


def generation_programs(
    store: MemoryStore, mode_id: str, *, in_pool_only: bool = True
) -> list[GenerationProgram]:
    """Generation programs of a mode (by default only those in the pool), oldest first."""
    where = where_eq(mode_id=mode_id)
    if in_pool_only:
        where += " AND in_pool = true"
    return sorted(store.records("generation_programs", where), key=lambda p: (p.created_at, p.id))


def bind_program(
    program: GenerationProgram, objects: Sequence[Mapping[str, Any]], max_bindings: int = MAX_BINDINGS
) -> list[dict[str, str]]:
    """Bind a generation program's roles to a new scene's objects."""
    return bind_roles(program.roles, program.required_relations, objects, max_bindings)


# --- training programs Φ --------------------------------------------------------------------------


def training_programs(
    store: MemoryStore, *, mode_id: str | None = None, phase: str | None = None, improved: bool | None = None
) -> list[TrainingProgram]:
    """Training programs filtered by mode, phase and outcome (for retrieval as compiler examples)."""
    where = where_eq(mode_id=mode_id, phase=phase)
    if improved is not None:
        clause = f"improved = {'true' if improved else 'false'}"
        where = f"{where} AND {clause}" if where else clause
    return sorted(store.records("training_programs", where), key=lambda p: (p.created_at, p.id))


def record_outcome(program: TrainingProgram, before: float, after: float, updates: int) -> TrainingProgram:
    """Attach the evidence of a training run: success before/after and the number of updates."""
    program.evidence = {**program.evidence, "before": before, "after": after, "updates": updates}
    program.improved = after > before
    return program
