"""The sim server over streamable HTTP (`coda serve sim --transport http`): tools, bearer token, host checks."""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import urllib.error
import urllib.request

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_testing import FAULTY_PROGRAM, REPO, SCENE_PROGRAM, err, ok, serve_args

from servers.sim import build_server
from servers.transport import HttpOptions, free_port, security_settings, wait_for_port

TOKEN = "test-token-0123456789"


def _post(url: str, headers: dict[str, str]) -> int:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "0"}}}).encode()
    req = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.fixture
def http_server(tmp_path):
    port = free_port()
    proc = subprocess.Popen([sys.executable, *serve_args("sim", tmp_path, "--transport", "http", "--port", str(port),
                                                         "--token", TOKEN)],
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for_port(proc, "127.0.0.1", port)
        yield f"http://127.0.0.1:{port}/mcp", port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.integration
def test_tools_over_http_with_token(http_server, tmp_path):
    url, port = http_server

    async def main():
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as http:
            async with Client(streamable_http_client(url, http_client=http)) as c:
                listed = {t.name for t in (await c.list_tools()).tools}
                async with Client(build_server(tmp_path / "in_process")) as local:  # the same tools as in process
                    assert listed == {t.name for t in (await local.list_tools()).tools}
                assert {"list_assets", "create_scene", "render_scene", "run_planner"} <= listed
                assert (await ok(c, "list_assets", {"kind": "articulated"}))["total"] == 4
                assert "ZeroDivisionError" in await err(c, "create_scene", {"source": FAULTY_PROGRAM})
                made = await ok(c, "create_scene", {"source": SCENE_PROGRAM})
                image = await c.call_tool("render_scene", {"scene_id": made["scene_id"], "size": 64})
                assert image.content[0].mime_type == "image/png"
                assert (await ok(c, "run_planner", {"scene_id": made["scene_id"]}))["steps"] > 0

    asyncio.run(main())
    assert _post(url, {}) == 401  # no token
    assert _post(url, {"Authorization": "Bearer wrong-token-000"}) == 401
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert _post(url, {**auth, "Host": "evil.example:80"}) == 421  # DNS rebinding: foreign Host refused
    assert _post(url, {**auth, "Host": f"127.0.0.1:{port}@evil.example"}) == 421  # no prefix matches
    assert _post(url, {**auth, "Host": f"localhost:{port + 1}"}) == 421  # the bound port only
    assert _post(url, {**auth, "Origin": "http://evil.example"}) == 403
    assert _post(url, {**auth, "Host": f"localhost:{port}"}) == 200


def test_http_options_refuse_unsafe_binds():
    assert HttpOptions().host == "127.0.0.1"
    with pytest.raises(ValueError, match="without a bearer token"):
        HttpOptions(host="0.0.0.0")
    with pytest.raises(ValueError, match="at least 8"):
        HttpOptions(token="short")
    opened = HttpOptions(host="0.0.0.0", token=TOKEN, allowed_hosts=("myhost:8731",))
    settings = security_settings(opened)
    assert "myhost:8731" in settings.allowed_hosts and "localhost:8731" in settings.allowed_hosts
    assert "evil.example:*" not in settings.allowed_hosts


def test_serve_refuses_public_bind_without_token(tmp_path, monkeypatch, capsys):
    from coda.commands import serve

    monkeypatch.delenv(serve.TOKEN_ENV, raising=False)
    args = argparse.Namespace(server="sim", transport="http", host="0.0.0.0", port=None, run_dir=str(tmp_path),
                              token=None, allow_host=[], embedder=None)
    assert serve.run(args) == 2
    assert "bearer token" in capsys.readouterr().err


def test_host_and_origin_checks_are_exact_with_the_port():
    """Issue 17: the Host check matched by prefix with any port (`127.0.0.1:18790@evil.example` was accepted)."""
    from mcp.server.transport_security import TransportSecurityMiddleware

    port = 18790
    check = TransportSecurityMiddleware(security_settings(HttpOptions(port=port, allowed_hosts=("myhost:9000",))))
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "myhost:9000"):
        assert check._validate_host(host), host
    for host in (f"127.0.0.1:{port}@evil.example", f"localhost:{port}.evil.example", f"127.0.0.1:{port + 1}",
                 f"localhost:{port}0", "localhost:1", "127.0.0.1", f"evil.example:{port}", "myhost:9000x",
                 "myhost:9001", "myhost", ""):
        assert not check._validate_host(host), host
    assert check._validate_origin(f"http://localhost:{port}") and check._validate_origin("http://myhost:9000")
    for origin in (f"http://localhost:{port}@evil.example", f"http://127.0.0.1:{port}.evil.example",
                   f"http://localhost:{port + 1}", "http://evil.example"):
        assert not check._validate_origin(origin), origin
    public = security_settings(HttpOptions(host="0.0.0.0", port=port, token=TOKEN))
    assert f"0.0.0.0:{port}" in public.allowed_hosts and not any("*" in h for h in public.allowed_hosts)
    with pytest.raises(ValueError, match="exactly"):
        HttpOptions(allowed_hosts=("myhost:*",))


def test_http_without_token_warns_once(monkeypatch, capsys):
    """Issue 17: serving HTTP without a token said nothing; it now warns that any local process can call every tool."""
    import uvicorn

    from servers.common import new_server
    from servers.transport import serve

    async def no_serve(self, sockets=None):
        return None

    monkeypatch.setattr(uvicorn.Server, "serve", no_serve)
    server = new_server("coda-probe", "probe")
    serve(server, HttpOptions(port=free_port()))
    err = capsys.readouterr().err
    assert err.count("without a bearer token") == 1 and "any local process can call every tool" in err
    assert "--token" in err and "CODA_MCP_TOKEN" in err
    serve(server, HttpOptions(port=free_port(), token=TOKEN))
    assert "without a bearer token" not in capsys.readouterr().err
