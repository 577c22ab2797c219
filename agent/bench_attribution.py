"""Attribution by intervention on a finished run's real failures (`coda bench attribution --run DIR`).

For each round of the run, the failing scenes its critic examined are intervened on again with the policy the
round rolled out (its checkpoint, mean action, the round's seed), once per intervention kind (`Preset.intervention`:
"resample" draws the factor anew, "undo" takes the suspected cause away) and `--draws` times with independent
variant draws. Per kind it reports:

- the attributed factor's distribution (execution = no single factor's change helped), and per scene factor the
  failing scenes with a verified variant of it (`tested`) or with nothing to take away (`absent`, "undo" only);
- test-retest agreement between the first two draws (share of scenes given the same label, and Cohen's kappa):
  an attribution that is a property of the failure repeats, one that comes from which variants happened to be
  drawn does not;
- on the scenes of targeted batches, the share attributed to the factor their mode targeted (the factor part of
  targeting precision: a targeted variant should fail for the reason it was made for).

It works on a copy of the run directory (the run itself is not touched) through the four MCP servers.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path

from agent.presets import INTERVENTIONS

LABELS = ("task", "spatial", "attribute", "execution")


def add_arguments(parser) -> None:
    parser.add_argument("--run", required=True, help="a finished run directory (runs/NAME, or a cell's run folder)")
    parser.add_argument("--rounds", default="", help="comma-separated rounds (default: every round after the first)")
    parser.add_argument("--arms", default=",".join(INTERVENTIONS), help=f"intervention kinds: {', '.join(INTERVENTIONS)}")
    parser.add_argument("--draws", type=int, default=2, help="independent variant draws per kind (>= 2 for a retest)")
    parser.add_argument("--variants", type=int, default=0, help="variants per factor (default: the run's preset)")
    parser.add_argument("--max-scenes", type=int, default=0, help="at most this many failing scenes per round (0: all)")


def mode_factor(mode_id: str | None) -> str | None:
    """The diagnosis factor a mode id names (`memory_store.modes.mode_id_for`: mode-<factor>-<phase>-<digest>)."""
    parts = (mode_id or "").split("-")
    return parts[1] if len(parts) >= 4 and parts[0] == "mode" and parts[1] in LABELS else None


def kappa(a: list[str], b: list[str]) -> float | None:
    """Cohen's kappa of two labelings of the same items (None when chance agreement is 1)."""
    n = len(a)
    if n == 0:
        return None
    agree = sum(x == y for x, y in zip(a, b, strict=True)) / n
    ca, cb = Counter(a), Counter(b)
    chance = sum(ca[k] * cb[k] for k in set(ca) | set(cb)) / (n * n)
    return None if chance >= 1.0 else (agree - chance) / (1.0 - chance)


def label_of(outcome: dict) -> str | None:
    """The diagnosis factor an intervention outcome attributes (execution when none), or None for a scene the
    deterministic policy solves (nothing to attribute)."""
    from agent.roles.critic import Intervention

    inter = Intervention.model_validate(outcome)
    if inter.original_success:
        return None
    return inter.attributed() or "execution"


def summarize_arm(draws: list[dict[str, dict]], targeted: dict[str, str]) -> dict:
    """Figures of one kind from its draws (scene id -> outcome each) and the targeted scenes' mode factors."""
    labels = [{sid: label_of(o) for sid, o in d.items()} for d in draws]
    scenes = [sid for sid, lab in labels[0].items() if lab is not None]
    first = [labels[0][s] for s in scenes]
    tested = Counter(f for s in scenes for f, v in draws[0][s].get("variants", {}).items() if v)
    out = {"failing_scenes": len(scenes), "labels": dict(Counter(first)), "tested": dict(tested),
           "absent": dict(Counter(f for s in scenes for f in draws[0][s].get("absent", []))),
           "attributed_share": round(sum(x != "execution" for x in first) / len(first), 3) if first else None}
    if len(labels) > 1:
        second = [labels[1].get(s) or "execution" for s in scenes]
        same = [x == y for x, y in zip(first, second, strict=True)]
        out["retest_agreement"] = round(sum(same) / len(same), 3) if same else None
        k = kappa(first, second)
        out["retest_kappa"] = None if k is None else round(k, 3)
        named = [(x, y) for x, y in zip(first, second, strict=True) if x != "execution"]
        out["attribution_repeats"] = round(sum(x == y for x, y in named) / len(named), 3) if named else None
    tgt = [s for s in scenes if s in targeted]
    hits = [labels[0][s] == targeted[s] for s in tgt]
    out["targeted_scenes"] = len(tgt)
    out["targeted_factor_match"] = round(sum(hits) / len(hits), 3) if hits else None
    if len(labels) > 1 and tgt:
        out["targeted_factor_match_retest"] = round(sum((labels[1].get(s) or "execution") == targeted[s]
                                                         for s in tgt) / len(tgt), 3)
    return out


def _rounds(state: dict, text: str) -> list[int]:
    have = sorted(int(k[1:].split(".")[0]) for k in state["steps"] if k.startswith("r") and k.endswith(".intervene")
                  and state["steps"][k].get("result"))
    if not have:
        raise ValueError("this run has no interventions (a method without the critic's interventions, or "
                         "intervention_variants 0, or no round finished)")
    if not text:
        return [r for r in have if r > 0] or have
    try:
        want = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--rounds must be comma-separated integers, got {text!r}") from None
    missing = [r for r in want if r not in have]
    if missing:
        raise ValueError(f"rounds {missing} have no interventions in this run; rounds with them: {have or 'none'}")
    return want


def _checkpoint(state: dict, r: int) -> str:
    """The checkpoint round r rolled out: the previous round's training result, the base for round 0."""
    if r == 0:
        return state["steps"]["seed.sft"]["result"].get("shared_base") or "base"
    return state["steps"][f"r{r - 1}.train"]["result"]["checkpoint"]


def evaluate(run: Path, rounds: str = "", arms: tuple[str, ...] = INTERVENTIONS, draws: int = 2, variants: int = 0,
             max_scenes: int = 0) -> dict:
    from dataclasses import replace

    from agent.hub import Hub, stdio_specs
    from agent.loop import CoEvolution
    from agent.methods import get_method
    from agent.presets import Preset
    from agent.roles.factory import make_roles

    run = Path(run).expanduser().resolve()
    if not (run / "state.json").is_file():
        raise ValueError(f"{run} holds no run (no state.json): give a run directory such as runs/NAME")
    unknown = [a for a in arms if a not in INTERVENTIONS]
    if unknown or not arms:
        raise ValueError(f"unknown intervention kind(s) {unknown}; valid: {', '.join(INTERVENTIONS)}")
    if draws < 1 or variants < 0 or max_scenes < 0:
        raise ValueError("--draws must be >= 1, --variants and --max-scenes >= 0")
    state = json.loads((run / "state.json").read_text())
    todo = _rounds(state, rounds)
    preset = Preset.from_dict(state["preset"])
    if variants:
        preset = replace(preset, intervention_variants=variants)
    method = get_method(state.get("method", {}).get("name", "coda"))
    from agent.experiment.common import code_commit

    result: dict = {"run": str(run), "commit": code_commit(), "run_commit": state.get("commit"), "rounds": todo, "draws": draws, "variants": preset.intervention_variants,
                    "arms": {}}
    with tempfile.TemporaryDirectory(prefix="coda-bench-attribution-") as tmp:
        copy = Path(tmp) / "run"
        shutil.copytree(run, copy, ignore=shutil.ignore_patterns("report", "exports", "jobs"))
        with Hub(stdio_specs(copy)) as hub:
            per_arm: dict[str, list[dict[str, dict]]] = {a: [{} for _ in range(draws)] for a in arms}
            seconds: Counter = Counter()
            targeted: dict[str, str] = {}
            for r in todo:
                steps = state["steps"]
                rollouts = steps[f"r{r}.rollouts"]["result"]
                if max_scenes:
                    keep = list(dict.fromkeys(x["scene_id"] for x in rollouts if not x["success"]))[:max_scenes]
                    rollouts = [x for x in rollouts if x["scene_id"] in keep]
                for s in steps[f"r{r}.generate"]["result"]:
                    if s["batch"] == "targeted" and mode_factor(s.get("mode_id")):
                        targeted[f"r{r}/{s['scene_id']}"] = mode_factor(s["mode_id"])
                hub.call("trainer", "load_checkpoint", {"tag": _checkpoint(state, r)})
                for arm in arms:
                    loop = CoEvolution(hub, make_roles("offline"), copy, replace(preset, intervention=arm),
                                       f"bench-{arm}", method=method, seed=state.get("seed", 0), early_stop=False)
                    for d in range(draws):
                        t0 = time.perf_counter()
                        per_arm[arm][d].update({f"r{r}/{k}": v for k, v in loop.intervene(r, rollouts, draw=d).items()})
                        seconds[arm] += time.perf_counter() - t0
            for arm in arms:
                result["arms"][arm] = {**summarize_arm(per_arm[arm], targeted),
                                       "seconds": round(seconds[arm], 1)}
    return result


def run(args) -> dict:
    arms = tuple(a.strip() for a in args.arms.split(",") if a.strip())
    return evaluate(Path(args.run), args.rounds, arms, args.draws, args.variants, args.max_scenes)
