"""`make_roles`: the three roles (engine, critic, compiler) with one backend: offline, anthropic or openai."""

from __future__ import annotations

from dataclasses import dataclass

from agent.choices import ROLE_BACKENDS
from agent.llm import TokenLedger, make_backend
from agent.roles.compiler import Compiler, LLMCompiler, OfflineCompiler
from agent.roles.critic import Critic, LLMCritic, OfflineCritic
from agent.roles.engine import LLMEngine, OfflineEngine


@dataclass
class Roles:
    engine: OfflineEngine | LLMEngine
    critic: Critic
    compiler: Compiler
    ledger: TokenLedger
    backend: str

    def connect(self, hub) -> Roles:
        """Give the roles the MCP hub of the servers: whatever they need of the simulator goes through its tools."""
        for role in (self.engine, self.critic, self.compiler):
            if hasattr(role, "connect"):
                role.connect(hub)
        return self


def make_roles(backend: str = "offline", model: str | None = None, base_url: str | None = None,
               ledger: TokenLedger | None = None, *, api_key: str | None = None, temperature: float | None = None,
               max_attempts: int = 3, images: bool = True, **backend_opts) -> Roles:
    """Engine, critic and compiler sharing one backend and one token ledger (tokens are counted per role).

    `backend="offline"` needs no network or key; `"openai"` with `base_url` reaches any OpenAI-compatible server.
    """
    ledger = ledger if ledger is not None else TokenLedger()
    if backend == "offline":
        return Roles(OfflineEngine(), OfflineCritic(), OfflineCompiler(), ledger, backend)
    if backend not in ROLE_BACKENDS:
        raise ValueError(f"unknown role backend {backend!r}; valid backends: {', '.join(ROLE_BACKENDS)}")
    llm = make_backend(backend, model=model, base_url=base_url, api_key=api_key, **backend_opts)
    opts = {"max_attempts": max_attempts, "temperature": temperature}
    return Roles(
        engine=LLMEngine(llm, ledger, **opts),
        critic=LLMCritic(llm, ledger, images=images, **opts),
        compiler=LLMCompiler(llm, ledger, **opts),
        ledger=ledger,
        backend=backend,
    )
