"""The vocabulary of Text2potential programs that the agent and the servers share: the learning tools a program may
route to and the potential checker's report. `sim.potential` re-exports both; this module imports no simulator."""

from __future__ import annotations

from pydantic import BaseModel, Field

LEARNING_TOOLS = ("bc", "awr_shaped", "reevaluate", "return_to_engine")
"""kept equal to memory_store.schema.LEARNING_TOOLS (sim imports no other package)"""


class PotentialReport(BaseModel):
    ok: bool
    errors: list[str] = Field(default_factory=list)
    subgoals: list[str] = Field(default_factory=list)
    learning_tool: str | None = None
    states_checked: int = 0
    ms_per_state: float | None = None
    max_ms: float | None = None
    rank_correlation: list[float] = Field(default_factory=list)
    """Spearman ρ(Φ, t) per demonstration"""
    demo_phi: list[list[float]] = Field(default_factory=list)
