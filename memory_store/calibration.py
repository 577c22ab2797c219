"""Calibration of the clustering threshold: paraphrased failure causes grouped by (factor, phase).

    python -m memory_store.calibration        # prints pair statistics and online-clustering quality

Each group is one cause written three ways. A good threshold merges each group into one mode and keeps
groups that share (factor, phase) apart (groups with different (factor, phase) never meet).
"""

from __future__ import annotations

import itertools
import json
import sys

import numpy as np

from memory_store.embed import Embedder, MiniLMEmbedder
from memory_store.modes import assign
from memory_store.schema import Diagnosis

GROUPS: dict[tuple[str, str, str], list[str]] = {
    ("spatial", "approach", "rim"): [
        "the gripper collides with the bowl rim while approaching the mug",
        "during approach the fingers hit the bowl's edge next to the mug",
        "on the way to the mug the hand bumps into the rim of the nearby bowl",
    ],
    ("spatial", "approach", "knock"): [
        "the arm knocks the cup over while moving towards it",
        "approaching the cup, the arm tips it over",
        "the cup is pushed over by the gripper before it can be grasped",
    ],
    ("spatial", "approach", "reach"): [
        "the cube lies outside the reachable workspace",
        "the block is placed too far away for the arm to reach",
        "the target object is beyond the robot's reach",
    ],
    ("execution", "grasp", "early"): [
        "the gripper closes too early and misses the cube",
        "fingers shut before reaching the block so the grasp misses",
        "the grasp is triggered before the gripper surrounds the cube",
    ],
    ("execution", "grasp", "offcenter"): [
        "the grasp is off-center and the object rotates in the fingers",
        "the fingers grab the object near its edge so it twists in the gripper",
        "an off-center grasp makes the item spin between the fingers",
    ],
    ("attribute", "lift", "heavy"): [
        "the mug slips out of the gripper during lift because it is heavy",
        "the heavy mug falls from the fingers while lifting",
        "while lifting, the weight of the mug makes it slide out of the grasp",
    ],
    ("attribute", "lift", "slippery"): [
        "the slippery plate slides away when lifted",
        "low friction makes the plate slip out as the arm lifts it",
        "the plate's smooth surface lets it slide from the fingers during the lift",
    ],
    ("task", "place", "wrong_bowl"): [
        "the policy places the apple in the wrong bowl",
        "the apple is put into the other bowl instead of the target one",
        "the apple ends up in a bowl that the instruction did not ask for",
    ],
    ("task", "place", "order"): [
        "the blocks are stacked in the wrong order",
        "the stacking order does not match the instruction",
        "the policy stacks the red block on the blue one instead of the reverse",
    ],
    ("spatial", "place", "tilt"): [
        "the box is placed tilted on the shelf edge and falls",
        "the box is set down half over the shelf edge and topples",
        "placing the box partly off the edge of the shelf makes it fall",
    ],
    ("spatial", "place", "dropped"): [
        "the block is released too high above the tower and bounces off",
        "the block dropped from too high over the stack tumbles off",
        "releasing the cube far above the tower makes it fall off the top",
    ],
    ("attribute", "grasp", "small"): [
        "the small bead is too thin for the fingers to hold",
        "the tiny object is narrower than the gripper can pinch",
        "the object is so small that the fingers close on nothing",
    ],
    ("task", "open", "wrong_handle"): [
        "the policy pulls the handle of the wrong drawer",
        "the arm opens the lower drawer instead of the upper one",
        "the wrong drawer is opened because the handles look alike",
    ],
    ("execution", "open", "stuck"): [
        "the drawer jams because the pull direction is not aligned with the rail",
        "pulling at an angle makes the drawer stick",
        "the arm pulls diagonally so the drawer binds and stops",
    ],
}


def _diagnoses(embedder: Embedder) -> list[tuple[tuple[str, str, str], Diagnosis]]:
    items = [(key, text) for key, texts in GROUPS.items() for text in texts]
    # interleave groups (first paraphrases, then second ...) so arrival order does not favor a group
    items.sort(key=lambda kt: GROUPS[kt[0]].index(kt[1]))
    vecs = embedder.encode([t for _, t in items])
    return [
        (key, Diagnosis(id=f"cal-{i}", scene_id="cal", factor=key[0], phase=key[1], cause=text, embedding=v))
        for i, ((key, text), v) in enumerate(zip(items, vecs, strict=True))
    ]


def pair_stats(embedder: Embedder) -> dict:
    """Cosine similarity of paraphrase pairs vs different-cause pairs with the same (factor, phase)."""
    diags = _diagnoses(embedder)
    same, diff = [], []
    for (ka, a), (kb, b) in itertools.combinations(diags, 2):
        if ka[:2] != kb[:2]:
            continue
        sim = float(np.dot(a.embedding, b.embedding))
        (same if ka == kb else diff).append(sim)
    q = lambda xs, p: round(float(np.quantile(xs, p)), 3)  # noqa: E731
    return {
        "paraphrase_pairs": {"n": len(same), "min": q(same, 0), "p10": q(same, 0.1), "median": q(same, 0.5)},
        "different_cause_pairs": {
            "n": len(diff),
            "median": q(diff, 0.5),
            "p90": q(diff, 0.9),
            "max": q(diff, 1),
        },
    }


def clustering_quality(embedder: Embedder, thresholds=(0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7)) -> list[dict]:
    """Online clustering of the set at each threshold: modes made, paraphrase pairs merged, distinct-cause
    pairs (same factor and phase) kept apart."""
    diags = _diagnoses(embedder)
    out = []
    for t in thresholds:
        modes, label = [], {}
        for _key, d in diags:
            d = d.model_copy()
            mode, created, _ = assign(d, modes, threshold=t)
            if created:
                modes.append(mode)
            label[d.id] = mode.id
        merged = apart = n_same = n_diff = 0
        for (ka, a), (kb, b) in itertools.combinations(diags, 2):
            if ka[:2] != kb[:2]:
                continue
            together = label[a.id] == label[b.id]
            if ka == kb:
                n_same, merged = n_same + 1, merged + together
            else:
                n_diff, apart = n_diff + 1, apart + (not together)
        out.append(
            {
                "threshold": t,
                "modes": len(modes),
                "groups": len(GROUPS),
                "paraphrases_merged": round(merged / n_same, 3),
                "distinct_kept_apart": round(apart / n_diff, 3),
            }
        )
    return out


def main() -> int:
    emb = MiniLMEmbedder()
    sys.stdout.write(
        json.dumps({"pairs": pair_stats(emb), "clustering": clustering_quality(emb)}, indent=2) + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
