"""Rollout evidence: from a replayable trace, the phase timeline, contact and grasp events, goal distances,
predicate terms over time, scene facts against the training ranges, and keyframes. Read by the failure critic."""

from sim.evidence.models import Evidence
from sim.evidence.ranges import TrainingRanges
from sim.evidence.timeline import build_evidence

__all__ = ["Evidence", "TrainingRanges", "build_evidence", "extract_evidence"]


def extract_evidence(trace, keyframes: bool = False, rollout_id: str = "") -> Evidence:
    """Evidence of one rollout trace (keyframes rendered when asked and rendering is available)."""
    return build_evidence(trace, render=keyframes, rollout_id=rollout_id)
