"""Token and cost accounting per role (engine, critic, compiler, round) and per model."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any

from agent.llm.base import Usage

PRICES_AS_OF = "2026-11"
# USD per 1M tokens (input, output): standard list prices (no cache, batch or long-context tiers) from the
# providers' model pages as of PRICES_AS_OF. Dated snapshots ("...-20250929", "...-2025-04-14"), "@date" and a
# leading "provider/" resolve to the base name; any other model (local servers) has no price: cost None.
# Anthropic cache reads/writes are counted as input tokens at the input rate (an upper-bound estimate).
MODEL_PRICES_USD_PER_1M: dict[str, tuple[float, float]] = {
    "claude-fable-5-2": (8.0, 40.0),
    "claude-fable-5-1": (10.0, 50.0),
    "claude-opus-5-5": (4.0, 20.0),
    "claude-sonnet-5-5": (2.0, 10.0),
    "claude-sonnet-5": (2.0, 10.0),
    "claude-opus-4-8": (5.0, 25.0),
    "claude-opus-4-6": (5.0, 25.0),
    "claude-sonnet-4-6": (3.0, 15.0),
    "claude-opus-4-5": (5.0, 25.0),
    "claude-sonnet-4-5": (3.0, 15.0),
    "claude-haiku-4-5": (1.0, 5.0),
    "gpt-6.1-sol": (2.0, 10.0),
    "gpt-6-sol": (2.0, 10.0),
    "gpt-5.5": (5.0, 30.0),
    "gpt-5.4": (2.5, 15.0),
    "gpt-5.1": (1.25, 10.0),
    "gpt-5": (1.25, 10.0),
    "gpt-5-mini": (0.25, 2.0),
    "gpt-5-nano": (0.05, 0.4),
    "gpt-4.1": (2.0, 8.0),
    "gpt-4.1-mini": (0.4, 1.6),
    "gpt-4.1-nano": (0.1, 0.4),
    "gpt-4o": (2.5, 10.0),
    "gpt-4o-mini": (0.15, 0.6),
    "o3": (2.0, 8.0),
    "o3-mini": (1.1, 4.4),
    "o4-mini": (1.1, 4.4),
}
_SNAPSHOT_SUFFIX = re.compile(r"(-\d{4}-\d{2}-\d{2}|-\d{8}|@\d{8}|-latest)$")

ROLE_ENGINE = "engine"
ROLE_CRITIC = "critic"
ROLE_COMPILER = "compiler"
ROLE_ROUND = "round"


def price_for(model: str, prices: dict[str, tuple[float, float]] | None = None) -> tuple[float, float] | None:
    """(input, output) USD per 1M tokens for ``model``, or None when it is not in the table."""
    table = MODEL_PRICES_USD_PER_1M if prices is None else prices
    name = model.rsplit("/", 1)[-1]
    return table.get(model) or table.get(name) or table.get(_SNAPSHOT_SUFFIX.sub("", name))


@dataclass
class _Entry:
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0

    def add(self, calls: int, input_tokens: int, output_tokens: int, cost: float | None) -> None:
        self.calls += calls
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        self.cost_usd = None if cost is None or self.cost_usd is None else self.cost_usd + cost

    def as_dict(self) -> dict[str, Any]:
        cost = None if self.cost_usd is None else round(self.cost_usd, 6)
        return {
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "total_tokens": self.input_tokens + self.output_tokens,
            "cost_usd": cost,
        }


class TokenLedger:
    """Thread-safe counter of LLM calls, tokens and cost, kept per (role, model).

    A cost of None means at least one counted call used a model with no known price (tokens are still
    counted).
    """

    def __init__(self, prices: dict[str, tuple[float, float]] | None = None):
        self.prices = dict(MODEL_PRICES_USD_PER_1M if prices is None else prices)
        self._entries: dict[tuple[str, str], _Entry] = {}
        self._lock = threading.Lock()

    def cost(self, model: str, input_tokens: int, output_tokens: int) -> float | None:
        price = price_for(model, self.prices)
        if price is None:
            return None
        return (input_tokens * price[0] + output_tokens * price[1]) / 1e6

    def record(self, role: str, model: str, usage: Usage, *, calls: int = 1) -> None:
        if not role:
            raise ValueError("role must be a non-empty string (e.g. 'engine', 'critic', 'compiler', 'round')")
        cost = self.cost(model, usage.input_tokens, usage.output_tokens)
        with self._lock:
            entry = self._entries.setdefault((role, model), _Entry())
            entry.add(calls, usage.input_tokens, usage.output_tokens, cost)

    def merge(self, other: TokenLedger) -> None:
        """Add another ledger's counts into this one (costs are recomputed with this ledger's prices)."""
        with other._lock:
            items = [(key, _Entry(**vars(e))) for key, e in other._entries.items()]
        for (role, model), entry in items:
            usage = Usage(input_tokens=entry.input_tokens, output_tokens=entry.output_tokens)
            self.record(role, model, usage, calls=entry.calls)

    def _aggregate(self, key_index: int | None) -> dict[str, _Entry]:
        out: dict[str, _Entry] = {}
        with self._lock:
            for key, e in self._entries.items():
                name = "total" if key_index is None else key[key_index]
                out.setdefault(name, _Entry()).add(e.calls, e.input_tokens, e.output_tokens, e.cost_usd)
        return out

    def role(self, role: str) -> dict[str, Any]:
        """Totals for one role (zeros when the role made no calls)."""
        return self._aggregate(0).get(role, _Entry()).as_dict()

    def total(self) -> dict[str, Any]:
        return self._aggregate(None).get("total", _Entry()).as_dict()

    def to_dict(self) -> dict[str, Any]:
        with self._lock:
            entries = [{"role": r, "model": m, **e.as_dict()} for (r, m), e in sorted(self._entries.items())]
        return {
            "roles": {name: e.as_dict() for name, e in sorted(self._aggregate(0).items())},
            "models": {name: e.as_dict() for name, e in sorted(self._aggregate(1).items())},
            "total": self.total(),
            "entries": entries,
        }

    @classmethod
    def from_dict(
        cls, data: dict[str, Any], prices: dict[str, tuple[float, float]] | None = None
    ) -> TokenLedger:
        """Rebuild a ledger from ``to_dict()`` output (e.g. when resuming a run)."""
        ledger = cls(prices)
        for e in data.get("entries", []):
            usage = Usage(input_tokens=e["input_tokens"], output_tokens=e["output_tokens"])
            ledger.record(e["role"], e["model"], usage, calls=e["calls"])
        return ledger

    def per_1000(self, accepted_envs: int) -> dict[str, Any]:
        """Tokens and cost per 1,000 accepted environments (values None when none were accepted)."""
        if accepted_envs < 0:
            raise ValueError(f"accepted_envs must be ≥ 0, got {accepted_envs}")
        total = self.total()
        scale = 1000.0 / accepted_envs if accepted_envs else None

        def per(value: float | None) -> float | None:
            return None if scale is None or value is None else value * scale

        return {
            "accepted_envs": accepted_envs,
            "input_tokens": per(total["input_tokens"]),
            "output_tokens": per(total["output_tokens"]),
            "total_tokens": per(total["total_tokens"]),
            "cost_usd": per(total["cost_usd"]),
        }
