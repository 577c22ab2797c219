"""The run report: `report.md` with tables and PNG plots, renders of evolved scenes, rollout GIFs."""

from __future__ import annotations

import base64
import io
import logging
from collections import defaultdict
from pathlib import Path

from sim.constants import OOD_SUITES, SUITES

log = logging.getLogger(__name__)


def _table(rows: list[list], header: list[str]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _pct(x: float | None, se: float | None = None) -> str:
    if x is None:
        return "–"
    return f"{100 * x:.1f}" + (f" ± {100 * se:.1f}" if se is not None else "")


def _paired_line(before: list[dict], after: list[dict]) -> str:
    """Mean OOD success after − before, paired scene by scene, with its standard error (`paired_ood`)."""
    from agent.experiment.metrics import paired_ood

    d = paired_ood(before, after)
    if d is None:
        return "Paired OOD difference: – (the evaluations carry no per-scene outcomes)"
    verdict = "more than twice its standard error" if abs(d["points"]) > 2 * d["se"] else "within twice its standard error"
    return (f"Mean OOD success after − before, paired on the same scenes: **{d['points']:+.1f} ± {d['se']:.1f} "
            f"points** over {d['suites']} OOD suites ({verdict}).")


def success_table(before: list[dict], after: list[dict]) -> tuple[str, dict]:
    idx = {(e["family"], e["suite"]): e for e in after}
    rows, ood = [], defaultdict(lambda: [[], []])
    for b in before:
        a = idx.get((b["family"], b["suite"]))
        rows.append([b["family"], b["suite"], _pct(b["success_rate"], b["stderr"]),
                     _pct(a["success_rate"], a["stderr"]) if a else "–", b["n"]])
        if b["suite"] in OOD_SUITES and a:
            ood[b["family"]][0].append(b["success_rate"])
            ood[b["family"]][1].append(a["success_rate"])
    means = {f: (sum(v[0]) / len(v[0]), sum(v[1]) / len(v[1])) for f, v in ood.items() if v[0]}
    return _table(rows, ["family", "suite", "before %", "after %", "n"]), means


def plots(state: dict, out_dir: Path) -> list[str]:
    """success per round per suite; mode hardness and importance; budget allocation. Returns file names."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = state["steps"]
    rounds = sorted({int(k.split(".")[0][1:]) for k in steps if k.startswith("r") and k.endswith(".eval")})
    evals = [("before", steps.get("eval.before", {}).get("result", []))]
    evals += [(f"round {r + 1}", steps[f"r{r}.eval"]["result"]) for r in rounds]
    files = []
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for suite in SUITES:
        ys = [_mean([e["success_rate"] for e in ev if e["suite"] == suite]) for _, ev in evals]
        ax.plot(range(len(evals)), ys, marker="o", label=suite)
    ax.set_xticks(range(len(evals)), [n for n, _ in evals])
    ax.set_ylabel("success (mean over families)")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7)
    ax.set_title("Success per round per suite")
    fig.tight_layout()
    fig.savefig(out_dir / "success_per_round.png", dpi=110)
    plt.close(fig)
    files.append("success_per_round.png")

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(8, 3.2))
    for r in rounds:
        modes = steps.get(f"r{r}.modes", {}).get("result", {}).get("modes", [])
        for m in modes:
            if m.get("hardness") is not None:
                a1.scatter(r + 1, m["hardness"], s=12, c="tab:red" if m["status"] == "validated" else "tab:gray")
            a2.scatter(r + 1, m.get("importance", 0.0), s=12, c="tab:blue")
    a1.set_title("mode hardness p̂ (red: validated)")
    a2.set_title("mode importance w")
    for a in (a1, a2):
        a.set_xlabel("round")
    fig.tight_layout()
    fig.savefig(out_dir / "modes.png", dpi=110)
    plt.close(fig)
    files.append("modes.png")

    fig, ax = plt.subplots(figsize=(6, 3))
    labels, targeted, novel, replay = [], [], [], []
    for r in rounds:
        al = steps.get(f"r{r}.allocate", {}).get("result", {})
        labels.append(f"r{r + 1}")
        targeted.append(al.get("targeted", 0))
        novel.append(al.get("novel", 0))
        replay.append(al.get("replay", 0))
    ax.bar(labels, targeted, label="targeted")
    ax.bar(labels, novel, bottom=targeted, label="novel")
    ax.bar(labels, replay, bottom=[t + n for t, n in zip(targeted, novel, strict=True)], label="replay")
    ax.set_title("Budget allocation per round")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out_dir / "allocation.png", dpi=110)
    plt.close(fig)
    files.append("allocation.png")
    return files


def _mean(xs) -> float:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else 0.0


def run_metrics(state: dict) -> dict:
    """What the run made: scenes and how many passed verification, rollouts and their simulated hours,
    diagnoses, modes and their verdicts, tokens per 1000 accepted scenes. The scripted loop's figures come from
    its step records; autonomous mode writes none, so its figures come from its transcript (`_autonomous_work`)."""
    work = _autonomous_work(state) if state.get("mode") == "autonomous" else _loop_work(state)
    accepted, scenes, verdicts = work["accepted"], work["scenes"], work["verdicts"]
    sim_hours = sum(work["rollout_steps"]) * 0.1 / 3600
    tokens = state.get("tokens", {}).get("total", {})
    per_k = 1000 / accepted if accepted else 0.0
    refuted = verdicts.count("refuted")
    return {
        "scenes": scenes,
        "accepted": accepted,
        "verification_pass_rate": accepted / scenes if scenes else 0.0,
        "rollouts": len(work["rollout_steps"]),
        "diagnoses": work["diagnoses"],
        "modes_found": work["modes_found"],
        "validated": verdicts.count("validated"),
        "refuted": refuted,
        "refutation_rate": refuted / len(verdicts) if verdicts else None,
        "sim_hours": sim_hours,
        "sim_hours_per_1000_accepted": sim_hours * per_k,
        "tokens_per_1000_accepted": (tokens.get("input_tokens", 0) + tokens.get("output_tokens", 0)) * per_k,
        "cost_usd": tokens.get("cost_usd"),
    }


def _loop_work(state: dict) -> dict:
    """The scripted loop's work, from its step records (`rN.generate`, `.rollouts`, `.diagnose`, `.validate`)."""
    steps = state["steps"]
    scenes, rollouts, diagnoses = [], [], []
    for k, v in steps.items():
        if k.endswith(".generate"):
            scenes += v["result"]
        elif k.endswith(".rollouts"):
            rollouts += v["result"]
        elif k.endswith(".diagnose"):
            diagnoses += v["result"]
    verdicts = [v["status"] for k, s in steps.items() if k.endswith(".validate") for v in s["result"].values()]
    return {"scenes": len(scenes), "accepted": sum(1 for s in scenes if s["verified"]),
            "rollout_steps": [x["steps"] for x in rollouts], "diagnoses": len(diagnoses),
            "modes_found": len({d["mode_id"] for d in diagnoses}), "verdicts": verdicts}


SCENE_MAKERS = ("sim__create_scene", "sim__sample_scene", "sim__resample_scene")
"""autonomous-mode tools (as the hub names them) that each store one scene"""


def _autonomous_work(state: dict) -> dict:
    """Autonomous mode's work, from the tool calls that succeeded in its transcript (tool name and arguments; the
    results are not kept): scenes made by the sim tools, scenes recorded as verified, rollouts and diagnoses
    recorded in memory (distinct ids), the latest status set per mode. Which mode a diagnosis joined is in the
    tool's result only, so modes_found is not known (None)."""
    verified: dict[str, bool] = {}
    rollouts: dict[str, int] = {}
    diagnoses: set[str] = set()
    status: dict[str, str] = {}
    scenes = 0
    for call in state.get("transcript", []):
        if call.get("outcome") != "ok":
            continue
        tool, args = call["tool"], call.get("arguments") or {}
        if tool in SCENE_MAKERS:
            scenes += 1
        elif tool == "memory__record_scene":
            scene = args.get("scene", {})
            verified[scene.get("id")] = bool(scene.get("verified"))
        elif tool == "memory__record_rollouts":
            rollouts.update({r.get("id", r.get("rollout_id")): int(r.get("steps", 0)) for r in args.get("rollouts", [])})
        elif tool == "memory__record_diagnosis":
            diagnoses.add(args.get("diagnosis", {}).get("id"))
        elif tool == "memory__set_mode_status":
            status[args.get("mode_id")] = args.get("status")
    return {"scenes": scenes, "accepted": sum(verified.values()), "rollout_steps": list(rollouts.values()),
            "diagnoses": len(diagnoses), "modes_found": None, "verdicts": list(status.values())}


def write_report(state: dict, run_dir: Path, media: dict[str, bytes] | None = None) -> Path:
    run_dir = Path(run_dir)
    (run_dir / "report").mkdir(parents=True, exist_ok=True)
    out = run_dir / "report"
    steps = state["steps"]
    before = steps.get("eval.before", {}).get("result", [])
    after = steps.get("eval.after", {}).get("result", [])
    table, ood = success_table(before, after)
    m = run_metrics(state)
    figs = plots(state, out)
    for name, data in (media or {}).items():
        (out / name).write_bytes(data)
    tokens = state.get("tokens", {})
    lines = [
        f"# CoDA run report — {run_dir.name}",
        "",
        f"Preset `{state.get('preset', {}).get('name')}`, role backend `{state.get('backend')}`, "
        f"wall time {state.get('wall_seconds', 0) / 60:.1f} min "
        f"(of which {state.get('mcp_seconds', 0):.0f} s inside tool calls, trainer jobs included)."
        + _mcp_line(state.get("mcp_overhead")),
        "",
        "## Success before → after (in-distribution and OOD suites)",
        "",
        table,
        "",
        "Mean OOD success per family: "
        + ", ".join(f"{f} {_pct(b)} → {_pct(a)}" for f, (b, a) in ood.items()),
        "",
        _paired_line(before, after),
        "",
        "## Data engine and memory",
        "",
        _table([[k, f"{v:.3f}" if isinstance(v, float) else "–" if v is None else v] for k, v in m.items()],
               ["metric", "value"]),
        "",
        "## Tokens and cost",
        "",
        _table([[role, v.get("calls", 0), v.get("input_tokens", 0), v.get("output_tokens", 0),
                 "–" if v.get("cost_usd") is None else f"{v['cost_usd']:.4f}"]
                for role, v in tokens.get("roles", {}).items()] or [["(offline roles: no LLM tokens)", 0, 0, 0, "0"]],
               ["role", "calls", "input tokens", "output tokens", "cost USD"]),
        "",
        "## Plots",
        "",
        *[f"![{f}]({f})" for f in figs],
        "",
    ]
    if state.get("mode") == "autonomous":
        calls = state.get("transcript", [])
        errors = sum(1 for c in calls if c["outcome"] == "error")
        lines += ["## Autonomous round agent", "",
                  f"{len(calls)} tool calls ({errors} returned errors), stopped by: {state.get('stop_reason')}.", "",
                  "Final answer:", "", "> " + (state.get("final_answer") or "(none)").replace("\n", "\n> "), ""]
    if media:
        lines += ["## Scenes and rollouts", "", *[f"![{n}]({n})" for n in media], ""]
    lines += ["## Step timings (s)", "", _table([[k, v["seconds"]] for k, v in steps.items()], ["step", "seconds"])]
    path = out / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def gif_from_pngs(frames: list[bytes], ms: int = 150) -> bytes:
    from PIL import Image

    images = [Image.open(io.BytesIO(f)).convert("P", palette=Image.ADAPTIVE) for f in frames]
    buf = io.BytesIO()
    images[0].save(buf, format="GIF", save_all=True, append_images=images[1:], duration=ms, loop=0)
    return buf.getvalue()


def image_bytes(content: list) -> bytes | None:
    for c in content:
        if getattr(c, "type", "") == "image":
            return base64.b64decode(c.data)
    return None


def _mcp_line(mcp: dict | None) -> str:
    if not mcp or mcp.get("share_of_wall") is None:
        return ""
    return (f" MCP overhead (transport, JSON, validation): {mcp['overhead_seconds']:.2f} s over {mcp['calls']} "
            f"calls = {100 * mcp['share_of_wall']:.2f}% of the wall time.")
