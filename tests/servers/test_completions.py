"""completion/complete on every server (issue 21): resource-template parameters (`scene_id`, `mode_id`) complete
to stored ids, prompt arguments (`families`, `factors`, `phases`, `categories`) to the vocabulary, by prefix."""

from __future__ import annotations

import asyncio

from mcp import Client
from mcp.types import PromptReference, ResourceTemplateReference

from memory_store.embed import HashingEmbedder
from servers import memory, sim, trainer, verifier
from sim.constants import FAMILIES, PHASES
from sim.scene_store import SceneStore


def test_completions_of_ids_and_vocabulary(tmp_path):
    store = SceneStore(tmp_path)
    ids = sorted({store.sample("stack", s).scene_id for s in range(3)})

    async def main():
        servers = {"sim": sim.build_server(tmp_path), "verifier": verifier.build_server(tmp_path),
                   "memory": memory.build_server(tmp_path, embedder=HashingEmbedder()),
                   "trainer": trainer.build_server(tmp_path)}
        for name, server in servers.items():
            async with Client(server) as c:
                assert c.server_capabilities.completions is not None, name
                got = await c.complete(ResourceTemplateReference(uri="sim://scenes/{scene_id}"),
                                       {"name": "scene_id", "value": ""})
                assert got.completion.values == ids and got.completion.total == 3, name
                one = await c.complete(ResourceTemplateReference(uri="sim://scenes/{scene_id}"),
                                       {"name": "scene_id", "value": ids[1][:10]})
                assert one.completion.values == [ids[1]], name
                # prompt arguments complete only on the server that serves the prompt (round: trainer)
                fam = await c.complete(PromptReference(name="round"), {"name": "families", "value": "p"})
                want = sorted(f for f in FAMILIES if f.startswith("p")) if name == "trainer" else []
                assert fam.completion.values == want, name
                none = await c.complete(PromptReference(name="round"), {"name": "max_turns", "value": "1"})
                assert none.completion.values == [], name
        async with Client(servers["memory"]) as c:
            await c.call_tool("record_diagnosis", {"diagnosis": {
                "id": "d1", "scene_id": ids[0], "factor": "spatial", "phase": "grasp",
                "cause": "a crate stands next to the mug on its grasp side", "round": 0}})
            modes = await c.complete(ResourceTemplateReference(uri="memory://modes/{mode_id}"),
                                     {"name": "mode_id", "value": "mode-"})
            assert len(modes.completion.values) == 1 and modes.completion.values[0].startswith("mode-spatial-grasp")
            phases = await c.complete(PromptReference(name="critic"), {"name": "phases", "value": "gr"})
            assert phases.completion.values == [p for p in sorted(PHASES) if p.startswith("gr")]
            cats = await c.complete(PromptReference(name="engine"), {"name": "categories", "value": "mu"})
            assert cats.completion.values == []  # the engine prompt is the sim server's
        async with Client(servers["sim"]) as c:
            cats = await c.complete(PromptReference(name="engine"), {"name": "categories", "value": "mu"})
            assert "mug" in cats.completion.values

    asyncio.run(main())
