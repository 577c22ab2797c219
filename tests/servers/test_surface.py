"""What the four servers show an MCP client (issue 21): titled tools, described and typed arguments all the way down,
lean schemas, one prompt per server with described arguments, and the logging capability."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from mcp import Client

from memory_store.embed import HashingEmbedder
from memory_store.schema import BATCHES
from servers import memory, sim, trainer, verifier
from sim.constants import DIAGNOSIS_FACTORS, PHASES

PROMPT_OF = {"sim": "engine", "verifier": "compiler", "memory": "critic", "trainer": "round"}


@pytest.fixture(scope="module")
def listed(tmp_path_factory):
    """Per server: its tools, prompts and capabilities as a client lists them."""
    run_dir = tmp_path_factory.mktemp("surface")
    servers = {"sim": sim.build_server(run_dir), "verifier": verifier.build_server(run_dir),
               "memory": memory.build_server(run_dir, embedder=HashingEmbedder()),
               "trainer": trainer.build_server(run_dir)}

    async def main():
        out = {}
        for name, server in servers.items():
            async with Client(server) as c:
                out[name] = {"tools": (await c.list_tools()).tools, "prompts": (await c.list_prompts()).prompts,
                             "capabilities": c.server_capabilities}
        return out

    return asyncio.run(main())


def test_the_readme_lists_every_tool_of_every_server(listed):
    """The README's server table names exactly the tools each server lists (a newcomer found three missing)."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    for name, got in listed.items():
        row = re.search(rf"^\| `{name}` \| (.+) \|$", readme, re.M)
        assert row, f"no README row for the {name} server"
        documented = set(re.findall(r"\b[a-z]+(?:_[a-z]+)+\b|\b(?:evaluate|sdk_reference)\b", row.group(1)))
        assert {t.name for t in got["tools"]} <= documented, f"{name}: missing from the README"
        assert documented <= {t.name for t in got["tools"]}, f"{name}: the README names tools the server lacks"


def undocumented(schema: dict) -> list[str]:
    """Paths of the properties without a description, nested objects, list items and `$defs` included."""
    defs, out = schema.get("$defs", {}), []

    def walk(node, path: str) -> None:
        if not isinstance(node, dict):
            return
        if "$ref" in node:
            walk(defs[node["$ref"].rsplit("/", 1)[-1]], path)
        for name, prop in (node.get("properties") or {}).items():
            if not prop.get("description"):
                out.append(f"{path}.{name}")
            walk(prop, f"{path}.{name}")
        for key in ("items", "additionalProperties"):
            walk(node.get(key), f"{path}[]")
        for alt in node.get("anyOf", []):
            walk(alt, path)

    walk(schema, "")
    return out


def test_every_tool_has_a_title_and_documented_arguments(listed):
    for server, got in listed.items():
        for t in got["tools"]:
            assert t.title and t.annotations.title == t.title, (server, t.name)
            assert undocumented(t.input_schema) == [], (server, t.name)
            assert '"title"' not in json.dumps(t.input_schema), (server, t.name)  # pydantic's restated names
    assert {t.name: t.title for t in listed["sim"]["tools"]}["sdk_reference"] == "SDK reference"


def test_memory_vocabularies_are_enums_shared_by_their_fields(listed):
    tools = {t.name: t.input_schema for t in listed["memory"]["tools"]}
    diagnosis = tools["record_diagnosis"]["properties"]["diagnosis"]["properties"]
    assert diagnosis["factor"]["enum"] == list(DIAGNOSIS_FACTORS) and diagnosis["phase"]["enum"] == list(PHASES)
    assert tools["record_scene"]["properties"]["scene"]["properties"]["batch"]["enum"] == list(BATCHES)
    assert tools["search_diagnoses"]["properties"]["phase"]["enum"] == [*PHASES, None]
    binding = tools["bind_roles"]  # roles appear twice (the roles and each relation's roles): one shared schema
    assert binding["properties"]["roles"]["items"] == {"$ref": "#/$defs/Role"} and "enum" in binding["$defs"]["Role"]
    assert "created_at" not in json.dumps(tools)  # the server sets it
    assert "record_rollout" not in tools  # record_rollouts takes one or many


def test_each_server_serves_its_own_prompt_with_described_arguments(listed):
    for server, got in listed.items():
        [prompt] = got["prompts"]
        assert prompt.name == PROMPT_OF[server] and prompt.description, server
        for arg in prompt.arguments:
            assert arg.description and "value for" not in arg.description, (server, arg.name)
    required = {a.name for a in listed["trainer"]["prompts"][0].arguments if a.required}
    assert required == {"rounds", "families", "max_turns", "demos_per_family", "sft_updates", "budget",
                        "max_diagnoses"}
    assert not any(a.required for a in listed["sim"]["prompts"][0].arguments)  # filled in by the server


def test_round_prompt_names_tools_as_the_servers_expose_them(listed):
    from prompts import load_prompt

    text = load_prompt("round")
    assert not re.search(r"\b(sim|verifier|memory|trainer)__\w+", text)
    exposed = {(server, t.name) for server, got in listed.items() for t in got["tools"]}
    named = set(re.findall(r"`(sim|verifier|memory|trainer): (\w+)`", text))
    assert ("trainer", "wait_job") in named and named <= exposed, named - exposed


def test_prompt_errors_name_the_argument(tmp_path):
    from mcp.shared.exceptions import MCPError

    async def main():
        async with Client(trainer.build_server(tmp_path)) as c:
            with pytest.raises(MCPError, match="prompt 'round' needs argument.*families") as missing:
                await c.get_prompt("round", {"rounds": "1"})
            assert missing.value.error.code == -32602  # invalid params, not "MCP error 0"
        async with Client(sim.build_server(tmp_path), mode="legacy") as c:
            with pytest.raises(MCPError, match="prompt 'engine' has no argument.*family; its arguments: categories"):
                await c.get_prompt("engine", {"family": "stack"})
            body = (await c.get_prompt("engine", {"context": "two blocks"})).messages[0].content.text
            assert "{{" not in body and "mug" in body and body.endswith("two blocks")  # categories filled in

    asyncio.run(main())


def test_logging_capability_on_every_server(listed):
    assert all(got["capabilities"].logging is not None for got in listed.values())
