"""Weight average v1 (issue 22): each final CoDA policy (F) against the uniform average of its last two round ends
(T), and each seed's soup of its two training replicates (S), on robosuite Lift and Stack (seed group 3, never a
loop's evaluation or probe episodes) and this simulator's in-distribution suites. PROTOCOL.md fixes the design.

    OMP_NUM_THREADS=1 .venv/bin/python experiments/weight_average_v1/run.py [--extension]

Resumable: an evaluation whose JSON exists is not rerun. Checkpoints it makes go to runs/ (not committed; their
sha256 are in checkpoints.json)."""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXP = HERE.parent
ROOT = EXP.parent
OUT = HERE / "evals"
CKPT = HERE / "runs"
SEEDS = (9, 10, 11)
PRIMARY = {"A": "external_target_v3/runs/coda-s{s}", "Ar": "external_replicate_v1/runs/coda-s{s}"}
EXTENSION = {"B": ("novel_uniform_v1/runs/coda-s{s}", SEEDS),
             "G": ("external_target_v3b/runs/success_guided-s{s}", SEEDS),
             "Gr": ("external_replicate_v1/sg/runs/success_guided-s{s}", (9, 10))}
EXTERNAL = ["--external", "robosuite:Lift,Stack", "--n", "50", "--first-group", "3", "--workers", "2"]
FAMILIES = ("pick_place", "stack", "articulated", "prep")


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def checkpoints(extension: bool) -> dict[str, Path]:
    """name → checkpoint: POLICY-sS-F (final), POLICY-sS-T (rounds 2 and 3 averaged), soup-sS-S."""
    from policy.checkpoint import average_checkpoints

    runs = {(k, s): v.format(s=s) for k, v in PRIMARY.items() for s in SEEDS}
    if extension:
        runs |= {(k, s): v.format(s=s) for k, (v, seeds) in EXTENSION.items() for s in seeds}
    out = {}
    for (k, s), run in runs.items():
        c = EXP / run / "checkpoints"
        out[f"{k}-s{s}-F"] = c / "step009000.pt"
        t = CKPT / f"{k}-s{s}-T.pt"
        if not t.exists():
            average_checkpoints([c / "step008000.pt", c / "step009000.pt"], t)
        out[f"{k}-s{s}-T"] = t
    for s in SEEDS:
        soup = CKPT / f"soup-s{s}-S.pt"
        if not soup.exists():
            average_checkpoints([out[f"A-s{s}-F"], out[f"Ar-s{s}-F"]], soup)
        out[f"soup-s{s}-S"] = soup
    return out


def evaluate(name: str, path: Path, what: str) -> None:
    dest = OUT / f"{name}-{what}.json"
    if dest.exists():
        return
    if what == "robosuite":
        argv = EXTERNAL
    else:
        argv = ["--family", what, "--suite", "in", "--n", "64", "--workers", "2"]
    t0 = time.time()
    proc = subprocess.run([sys.executable, "-m", "coda.cli", "eval", "--policy", str(path), *argv, "--json"],
                          capture_output=True, text=True, cwd=ROOT)
    if proc.returncode:
        raise SystemExit(f"{name} {what}: {proc.stderr.strip().splitlines()[-1:]}")
    result = json.loads(proc.stdout)
    result["checkpoint"], result["sha256"], result["wall_s"] = str(path), sha(path), round(time.time() - t0, 1)
    dest.write_text(json.dumps(result, indent=1))
    print(f"{time.strftime('%H:%M:%S')} {name} {what} {time.time() - t0:.0f} s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--extension", action="store_true", help="also the B, G and G′ policies (after the primary)")
    args = ap.parse_args()
    OUT.mkdir(exist_ok=True)
    ckpts = checkpoints(args.extension)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    (HERE / "checkpoints.json").write_text(json.dumps(
        {"commit": commit, "checkpoints": {n: {"path": str(p.relative_to(EXP)), "sha256": sha(p)}
                                           for n, p in ckpts.items()}}, indent=1))
    primary = [n for n in ckpts if n.split("-")[0] in ("A", "Ar")]
    soups = [n for n in ckpts if n.startswith("soup")]
    rest = [n for n in ckpts if n not in primary and n not in soups]
    for name in primary:
        evaluate(name, ckpts[name], "robosuite")
    for name in primary:
        for family in FAMILIES:
            evaluate(name, ckpts[name], family)
    for name in soups + rest:
        evaluate(name, ckpts[name], "robosuite")


if __name__ == "__main__":
    main()
