"""The agent roles: data engine G, failure critic C and Text2potential compiler R_hone, each with an offline
backend and LLM backends (Anthropic, OpenAI and OpenAI-compatible endpoints).

    roles = make_roles("offline")                       # or make_roles("openai", base_url=..., model=...)
    diagnosis = roles.critic.diagnose(trace)             # ψ = (δ, phase, cause, evidence)
    program = roles.compiler.compile(CompileRequest(diagnosis, spec, rollouts=[trace], demos=[demo]))
    targeted, control = roles.engine.batches(spec, diagnosis.factor, diagnosis.phase, n=8)
"""

from agent.roles.compiler import CompiledProgram, CompileError, CompileRequest, LLMCompiler, OfflineCompiler
from agent.roles.critic import CriticContext, CriticDiagnosis, LLMCritic, OfflineCritic
from agent.roles.engine import EngineProgram, LLMEngine, OfflineEngine, WriteRequest
from agent.roles.factory import Roles, make_roles
from sim.evidence.models import Evidence
from sim.evidence.timeline import build_evidence

__all__ = [
    "CompileError",
    "CompileRequest",
    "CompiledProgram",
    "CriticContext",
    "CriticDiagnosis",
    "EngineProgram",
    "Evidence",
    "LLMCompiler",
    "LLMCritic",
    "LLMEngine",
    "OfflineCompiler",
    "OfflineCritic",
    "OfflineEngine",
    "Roles",
    "WriteRequest",
    "build_evidence",
    "make_roles",
]
