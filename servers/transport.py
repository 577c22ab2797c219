"""Running a server: stdio, or streamable HTTP bound to 127.0.0.1 with Host/Origin checks and an optional bearer token.

    serve(build_server(run_dir), HttpOptions(port=8731, token="s3cret"))     # http://127.0.0.1:8731/mcp
    serve(build_server(run_dir))                                             # stdio

Security of the HTTP transport (issue 10):
- binds 127.0.0.1 unless told otherwise; a non-loopback address is refused without a token;
- DNS-rebinding protection: requests whose Host (or Origin) is not exactly the bound address, localhost or [::1]
  with the bound port, or an explicitly allowed host, are refused (421 / 403) by the SDK's transport security
  (exact matches only: no port wildcards, so `127.0.0.1:8731@evil.example` is refused);
- with a token, every request needs `Authorization: Bearer <token>` (401 otherwise, constant-time compare);
  without one, `serve` warns on stderr that any local process can call every tool;
- request bodies over `max_body_bytes` are refused (413).
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field

from mcp.server.mcpserver import MCPServer

log = logging.getLogger(__name__)

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
TOKEN_ENV = "CODA_MCP_TOKEN"
"""environment variable `coda serve` reads the bearer token from"""
MAX_BODY_BYTES = 2 * 1024 * 1024
"""largest HTTP request body accepted (a 100 kB program is far below)"""


@dataclass(frozen=True)
class HttpOptions:
    """How to serve streamable HTTP."""

    host: str = "127.0.0.1"
    """address to bind; loopback by default"""
    port: int = 8731
    token: str | None = None
    """bearer token every request must carry (required when binding a non-loopback address)"""
    allowed_hosts: tuple[str, ...] = field(default_factory=tuple)
    """extra Host header values accepted, exactly as given, besides the bound address and localhost with the bound
    port (e.g. 'myhost:8731')"""
    path: str = "/mcp"
    max_body_bytes: int = MAX_BODY_BYTES

    def __post_init__(self) -> None:
        if not 0 < self.port < 65536:
            raise ValueError(f"port must be in 1..65535, got {self.port}")
        for h in self.allowed_hosts:
            if not h or any(c in h for c in "*@/ \t\r\n"):
                raise ValueError(f"allowed host {h!r} must be a plain HOST or HOST:PORT (matched exactly, no "
                                 "wildcards)")
        if self.token is not None and len(self.token) < 8:
            raise ValueError("the bearer token must have at least 8 characters")
        if not is_loopback(self.host) and not self.token:
            raise ValueError(
                f"refusing to serve on {self.host!r} without a bearer token: anyone who can reach the port could "
                "run tools; pass --token (or CODA_MCP_TOKEN), or bind 127.0.0.1"
            )

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{self.path}"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def security_settings(options: HttpOptions):
    """Host/Origin allow-lists for the SDK's DNS-rebinding protection: exact values only (the SDK treats a
    trailing ':*' as a prefix match, which let `127.0.0.1:8731@evil.example` through), each with the bound port."""
    from mcp.server.transport_security import TransportSecuritySettings

    hosts = {"127.0.0.1", "localhost", "[::1]", f"[{options.host}]" if ":" in options.host else options.host}
    allowed = sorted(f"{h}:{options.port}" for h in hosts)
    if options.port == 80:  # clients leave out the default port
        allowed += sorted(hosts)
    allowed += [h for h in options.allowed_hosts if h not in allowed]
    origins = [f"http://{h}" for h in allowed]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=allowed, allowed_origins=origins)


def no_token_warning(server_name: str, options: HttpOptions) -> str | None:
    """The warning `serve` prints when HTTP runs without a bearer token (None with a token)."""
    if options.token:
        return None
    return (f"WARNING: {server_name} serves {options.url} without a bearer token: any local process can call every "
            f"tool. Set one with --token TOKEN or {TOKEN_ENV}=TOKEN (at least 8 characters; clients send "
            "'Authorization: Bearer TOKEN').")


class BearerTokenMiddleware:
    """ASGI middleware: HTTP requests must carry `Authorization: Bearer <token>`."""

    def __init__(self, app, token: str):
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        given = dict(scope.get("headers") or ()).get(b"authorization", b"")
        if hmac.compare_digest(given, self._expected):
            return await self.app(scope, receive, send)
        from starlette.responses import PlainTextResponse

        response = PlainTextResponse(
            "missing or wrong bearer token (send 'Authorization: Bearer <token>')",
            status_code=401,
            headers={"WWW-Authenticate": "Bearer"},
        )
        await response(scope, receive, send)


def http_app(server: MCPServer, options: HttpOptions):
    """The ASGI app serving `server` at `options.path`, with host checks and the token check."""
    app = server.streamable_http_app(
        streamable_http_path=options.path,
        host=options.host,
        transport_security=security_settings(options),
        max_request_body_size=options.max_body_bytes,
    )
    return BearerTokenMiddleware(app, options.token) if options.token else app


def serve(server: MCPServer, http: HttpOptions | None = None) -> None:
    """Serve over stdio (http=None) or streamable HTTP; returns when the transport closes (stdin reaches its end —
    the client closed it or died —, or the HTTP server was stopped) after `end_jobs`."""
    if http is None:
        try:
            server.run("stdio")
        except* BrokenPipeError:  # the client closed or died while an answer was being written: nothing to tell
            pass
        finally:
            end_jobs(server.name)
        return
    import anyio
    import uvicorn

    config = uvicorn.Config(
        http_app(server, http), host=http.host, port=http.port, log_level="warning", access_log=False
    )
    log.warning("serving %s at %s%s", server.name, http.url, " (bearer token required)" if http.token else "")
    warning = no_token_warning(server.name, http)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    try:
        anyio.run(uvicorn.Server(config).serve)
    finally:
        end_jobs(server.name)


def listen_problem(http: HttpOptions) -> str | None:
    """Why the HTTP server could not listen on its address (an unknown host, a port in use or not allowed), or None:
    checked before anything is made for the server (a port taken in the moment after still fails in uvicorn)."""
    try:
        infos = socket.getaddrinfo(http.host, http.port, type=socket.SOCK_STREAM)
    except OSError as exc:
        return f"unknown host ({exc.strerror or exc})"
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: a port in TIME_WAIT is free
        try:
            s.bind(address)
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


JOB_GRACE_S = 5.0
"""how long a closing server waits for its cancelled jobs to stop"""


def end_jobs(name: str, grace_s: float = JOB_GRACE_S) -> None:
    """The transport closed: cancel the server's jobs (their results would reach no one) and give them `grace_s`
    to stop; a job still running then ends with the process (`os._exit`) instead of keeping an orphan server busy
    for the rest of its run. Its status file stays `running`, which the next server on the run directory reports
    as `interrupted`."""
    from servers.jobs import stop_all_jobs

    left = stop_all_jobs(grace_s)
    if left:
        log.warning("%s: the client is gone; ending with %d job(s) still running: %s", name, len(left),
                    ", ".join(left))
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


# --- helpers for tests and benchmarks ---------------------------------------------------------------------


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def wait_for_port(proc: subprocess.Popen, host: str, port: int, timeout_s: float = 60.0) -> None:
    """Poll until `proc` accepts TCP connections on (host, port); raise if it exits or the time runs out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with code {proc.returncode} before listening on {host}:{port}")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"server did not listen on {host}:{port} within {timeout_s:.0f} s")
