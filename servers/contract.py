"""What the servers promise their clients, without the MCP SDK: the stats resource and the input limits.

Clients (the orchestrator) import these to stay inside the limits; the servers enforce them in their tool
signatures. Nothing here imports `mcp`, so importing it starts no server machinery.
"""

from __future__ import annotations

STATS_URI = "coda://stats"
"""resource of every server: tool calls served and seconds spent inside tool functions (JSON)"""

# --- limits (issue 10: hostile inputs are rejected before any work) ----------------------------------------
MAX_SOURCE_CHARS = 100_000
"""longest accepted program (scene program, potential program), characters"""
MAX_TEXT_CHARS = 4_000
"""longest free-text field (queries, causes, reasons)"""
MAX_JSON_CHARS = 200_000
"""longest JSON document accepted as an argument (a scene spec)"""
MAX_IMAGE_PX = 480
"""largest rendered image side, pixels (per camera): the scenes' offscreen framebuffer is 640 × 480 (sim/compile.py)"""
MAX_IMAGE_BYTES = 1_000_000
"""largest image returned to a client"""
MAX_K = 100
"""most search results per call"""
MAX_PAGE = 200
"""most items per listing page"""
MAX_BATCH = 256
"""most records written per call"""
MAX_BUDGET = 100_000
"""largest generation budget accepted by the allocator"""
MAX_NAME_CHARS = 256
"""longest name inside a record: run id, policy id, spec hash, check name (a run id is a runs/ folder name)"""
MAX_ITEMS = 256
"""most items of a list inside a record (variants, subgoals, facts, violations, compile checks)"""
MAX_RECORD_CHARS = 400_000
"""largest generation or training program record as JSON, all its sources together (four programs of the longest
kind): each field within its own limit still summed to 25 MB, and reading a page of those took gigabytes"""
MAX_VERIFICATIONS = 64
"""most verifier runs one vary_scene call makes (verify=true): a scene every draw of which fails verification
cost 200 variants × 16 operators × 16 tries = 51,200 runs (≈ 30 CPU minutes) in one call"""
MAX_POTENTIALS_CHARS = 1_000_000
"""most characters of potential programs in one start_training call, all together (a round's 256 scenes with the
compiler's 2–3 KB programs fit): their static checks run before the call returns, ≈ 1.3 s per 100,000 characters"""
