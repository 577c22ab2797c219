"""The agent roles: data engine G, failure critic C and Text2potential compiler R_hone, each with an offline
backend and LLM backends (Anthropic, OpenAI and OpenAI-compatible endpoints).

    roles = make_roles("offline").connect(hub)          # or make_roles("openai", base_url=..., model=...)
    diagnosis = roles.critic.diagnose(evidence)          # ψ = (δ, phase, cause, evidence)

    def check(source):                                   # the verifier server checks Φ on the scene's states
        got = hub.call("verifier", "check_potential", {"source": source, "scene_id": scene_id,
                                                       "trace_ids": [rollout_id]}).data
        return PotentialReport.model_validate({**got["report"], "ok": got["ok"], "errors": got["errors"]})

    program = roles.compiler.compile(CompileRequest(diagnosis, spec, check, has_demo=True))
    targeted, control = roles.engine.batches(spec, diagnosis.factor, diagnosis.phase, n=8)

`hub` is the MCP hub of the servers (`agent.hub.Hub`), `PotentialReport` is `sim.potential_schema.PotentialReport`.
"""

from agent.roles.compiler import CompiledProgram, CompileError, CompileRequest, LLMCompiler, OfflineCompiler
from agent.roles.critic import CriticDiagnosis, LLMCritic, OfflineCritic
from agent.roles.engine import EngineProgram, LLMEngine, OfflineEngine, WriteRequest
from agent.roles.factory import Roles, make_roles
from sim.evidence.models import Evidence

__all__ = [
    "CompileError",
    "CompileRequest",
    "CompiledProgram",
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
    "make_roles",
]
