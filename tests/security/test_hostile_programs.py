"""Issue 10, hostile programs: every file of tests/sandbox_corpus/ is rejected with a clear error by the verifier
(directly through `sim.verify.verify_program`, and through the verifier MCP server, which keeps answering after each),
has no effect outside the sandbox, and scene programs that *run* but ask for NaN or negative masses or 10,000 objects
are refused by the SDK (programs) and by the verifier's `spec_valid` check (specs)."""

from __future__ import annotations

import asyncio
import copy
import json
import math
import uuid
from pathlib import Path

import pytest
from mcp import Client

import sim.sandbox as sandbox
from sim.sandbox import SandboxLimits, SandboxPool
from sim.sandbox import isolation as sandbox_os
from sim.verify import verify_program, verify_spec

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "tests" / "sandbox_corpus"
CORPUS_FILES = sorted(p for p in CORPUS.iterdir() if p.suffix in (".py", ".bin"))
GOOD_PROGRAM = (REPO / "examples" / "scenes" / "pick_place.py").read_text()
LIMITS = SandboxLimits(timeout_s=2.0, cpu_s=3, memory_mb=512)  # loops and bombs fail sooner than by default
KINDS = {"encoding", "too_large", "syntax", "forbidden", "timeout", "memory", "recursion", "runtime", "output", "crash"}
# Under the scene finalizer (sim.scene:finalize_program) a program must leave `scene`, not `result`: files whose
# expected kind comes from the generic finalizer's handling of `result` fail as "did not define `scene`" instead.
SCENE_FINALIZER_KIND = {"result_too_large.py": "runtime", "recursion_nested_result.py": "runtime",
                        "meta_huge_int.py": "runtime"}  # a scene's meta is checked as plain JSON in the child

# What the issue asks the corpus to cover, by file name.
REQUIRED = {
    "__import__ escape": "escape_dunder_import.py",
    "__subclasses__ escape": "escape_subclasses.py",
    "open escape": "escape_open_write.py",
    "eval escape": "escape_eval.py",
    "infinite loop": "infinite_loop.py",
    "memory bomb": "memory_bomb_list.py",
    "recursion bomb": "recursion_bomb.py",
    "fork attempt": "fork_via_os.py",
    "fork bomb": "fork_bomb_multiprocessing.py",
    "NaN mass": "scene_nan_mass.py",
    "negative mass": "scene_negative_mass.py",
    "10,000 objects": "scene_10000_objects.py",
    "non-UTF-8 source": "not_utf8.bin",
}
# What a review used to break the sandbox before the OS layers and the data-only SDK: one attacker's program per
# technique, each a chain of spellings that ends in an error carrying what it obtained (see the files' headers).
REVIEW_TECHNIQUES = {
    "pydantic parse_raw(allow_pickle) / model_validate / construct": "pydantic_parse_raw_pickle.py",
    "string annotation on a subclass of an SDK model": "pydantic_string_annotation.py",
    "type(int) and a crafted annotation key exec'd by dataclass": "dataclass_annotation_exec.py",
    "replacing the audit hook's rule function": "audit_hook_rule_swap.py",
    "/proc/<ancestor>/environ (API keys)": "proc_environ_api_key.py",
    "killing the server or zygote (kill, pidfd_send_signal)": "kill_verifier_server.py",
    "a daemon that outlives the sandbox": "daemon_outlives_sandbox.py",
    "sockets to 127.0.0.1, localhost, ::1, unix": "socket_loopback.py",
    "a directory and a symlink outside the scratch dir": "mkdir_symlink_outside.py",
    "/proc/<zygote>/fd/N forged answers": "proc_fd_forge_answer.py",
    "MuJoCo <include file=/etc/passwd>": "mujoco_include_passwd.py",
    "numpy raw buffers (negative offset, object dtype, as_strided, view)": "numpy_raw_buffer.py",
    "run-time format string to the nonce, then a forged frame": "format_string_nonce_forge.py",
    "a 60,000-atom success predicate": "predicate_60000_atoms.py",
    "NaN / Infinity in initial_state": "initial_state_nan.py",
}
REVIEW_FILES = [*REVIEW_TECHNIQUES.values(), "numpy_as_strided_spelled.py", "format_string_previous_request.py",
                "predicate_shared_dag_data.py", "callback_capture_trusted_objects.py"]
REQUIRED.update(REVIEW_TECHNIQUES)


def header(path: Path, key: str) -> str | None:
    """The value of a `# key: value` line at the top of a corpus file."""
    for line in path.read_bytes().split(b"\n")[:3]:
        text = line.decode("ascii", "replace")
        if text.startswith(f"# {key}: "):
            return text.removeprefix(f"# {key}: ").strip()
    return None


def with_marker(path: Path, marker: str) -> bytes:
    """The program with `marker` (a path it may try to create) defined on top; verify_program injects only `seed`."""
    return f"marker = {marker!r}\n".encode() + path.read_bytes()


@pytest.fixture(scope="module")
def pool():
    """A pool with short limits, installed as the process's default pool (what the verifier server uses)."""
    with SandboxPool(size=1, limits=LIMITS) as p, pytest.MonkeyPatch.context() as mp:
        mp.setattr(sandbox, "_default_pool", p)
        yield p


@pytest.fixture
def marker():
    path = f"/tmp/coda-security-escape-{uuid.uuid4().hex}"
    yield path
    assert not Path(path).exists(), f"a sandboxed program created {path}"


def test_corpus_covers_the_issue_list():
    names = {p.name for p in CORPUS_FILES}
    assert len(names) >= 30
    missing = {what: name for what, name in REQUIRED.items() if name not in names}
    assert not missing, f"corpus lacks {missing}"
    for path in CORPUS_FILES:
        assert header(path, "expect") in KINDS, path.name


# --- directly through sim.verify.verify_program ------------------------------------------------------------------

SCENE_FILES = [p for p in CORPUS_FILES if p.name.startswith("scene_")]


@pytest.mark.parametrize("path", SCENE_FILES, ids=lambda p: p.name)
def test_scene_program_with_bad_values_is_rejected_with_a_clear_message(pool, path):
    report = verify_program(path.read_text(), seed=0, pool=pool)
    assert not report.passed and report.spec is None
    check = report.checks[0]
    assert check.name == "executes" and not check.passed
    assert check.message.startswith("runtime: line "), check.message
    assert "SceneError" in check.message and header(path, "message") in check.message, check.message


def test_non_utf8_source_is_rejected_before_running(pool):
    report = verify_program((CORPUS / "not_utf8.bin").read_bytes(), pool=pool)
    assert not report.passed
    assert report.checks[0].message.startswith("encoding: program source is not valid UTF-8 (byte 0xe9")


def _good_spec(pool) -> dict:
    report = verify_program(GOOD_PROGRAM, pool=pool)
    assert report.passed, report.summary()
    return report.spec


@pytest.mark.parametrize(("change", "expected"), [
    ("nan_mass", "mass: Input should be a finite number"),
    ("negative_mass", "mass: Input should be greater than 0"),
    ("inf_friction", "friction: Input should be a finite number"),
    ("nan_x", "x: Input should be a finite number"),
    ("10000_objects", "a scene holds at most 10 objects"),
])
def test_spec_with_bad_values_fails_spec_valid(pool, change, expected):
    """A spec handed to the verifier directly (verify_scene with a spec) is checked by the same validators."""
    spec = copy.deepcopy(_good_spec(pool))
    attrs = spec["attributes"]["objects"]
    if change == "nan_mass":
        attrs[0]["mass"] = math.nan
    elif change == "negative_mass":
        attrs[1]["mass"] = -1.0
    elif change == "inf_friction":
        attrs[0]["friction"] = math.inf
    elif change == "nan_x":
        spec["layout"]["placements"][0]["x"] = math.nan
    else:
        objects, placements = spec["task"]["objects"], spec["layout"]["placements"]
        proto_o, proto_p, proto_a = objects[-1], placements[-1], attrs[-1]
        for i in range(10_000):
            name = f"extra_{i}"
            objects.append({**proto_o, "name": name, "role": "distractor"})
            placements.append({**proto_p, "object": name, "relation": None})
            attrs.append({**proto_a, "object": name})
    report = verify_spec(spec)
    assert not report.passed and [c.name for c in report.checks] == ["spec_valid"]
    assert expected in report.checks[0].message, report.checks[0].message


# --- through the verifier MCP server -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def verifier(tmp_path_factory, pool):
    from servers.verifier import build_server

    run_dir = tmp_path_factory.mktemp("verifier-run")
    return build_server(run_dir), run_dir


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.name)
def test_verifier_server_rejects_corpus_program_and_keeps_answering(verifier, marker, path):
    server, run_dir = verifier
    before = _files(run_dir)
    # Non-UTF-8 bytes cannot travel in a JSON string: they arrive as lone surrogates (what a client that decodes
    # with 'surrogateescape' sends), and the server refuses them at argument validation.
    source = with_marker(path, marker).decode("utf-8", "surrogateescape")
    kind = SCENE_FINALIZER_KIND.get(path.name, header(path, "expect"))

    async def main():
        async with Client(server) as c:
            result = await c.call_tool("verify_program", {"source": source})
            text = " ".join(getattr(b, "text", "") for b in result.content)
            if kind == "encoding":
                assert result.is_error and "source" in text and "valid string" in text, text
            else:
                assert not result.is_error, text
                report = result.structured_content
                assert report["passed"] is False
                check = report["checks"][0]
                assert check["name"] == "executes" and not check["passed"]
                assert check["message"].startswith(f"{kind}: ") and len(check["message"]) > len(kind) + 10, check
                expected = header(path, "message")
                assert expected is None or expected in check["message"], check["message"]
            # still answering, and the sandbox behind it still runs programs
            after = await c.call_tool("verify_program", {"source": "scene = 1\n"})
            assert not after.is_error
            assert "`scene` must be a sim.Scene, got int" in after.structured_content["summary"]

    asyncio.run(main())
    assert _files(run_dir) == before, "verify_program wrote into the run directory"


def test_verifier_server_passes_a_good_program_after_the_corpus(verifier):
    server, _ = verifier

    async def main():
        async with Client(server) as c:
            result = await c.call_tool("verify_program", {"source": GOOD_PROGRAM, "seed": 1})
            assert not result.is_error and result.structured_content["passed"], result.structured_content

    asyncio.run(main())


# --- the review's techniques, with an API key in the environment of the process that owns the pool -----------------

FAKE_KEY = f"sk-coda-fake-{uuid.uuid4().hex}"
KEY_VARIABLES = ("CODA_FAKE_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY")
GOOD_SEED = 3


@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    """A pool and a verifier server started while this process's environment holds a fake API key (what `coda run`
    looks like), and the spec hash a direct `verify_program` of the benign program gives."""
    from servers.verifier import build_server

    run_dir = tmp_path_factory.mktemp("keyed-verifier-run")
    with pytest.MonkeyPatch.context() as mp:
        for name in KEY_VARIABLES:
            mp.setenv(name, FAKE_KEY)
        with SandboxPool(size=1, limits=LIMITS) as p:
            p.worker_info()  # the zygote starts now, with the key in the environment it is started from
            expected = verify_program(GOOD_PROGRAM, seed=GOOD_SEED, pool=p)
            assert expected.passed and expected.spec_hash, expected.summary()
            yield build_server(run_dir), p, run_dir, expected.spec_hash


def _everything(result) -> str:
    """All an MCP client sees of a tool result."""
    texts = [getattr(block, "text", "") for block in result.content]
    return json.dumps([texts, result.structured_content], default=str)


@pytest.mark.parametrize("name", REVIEW_FILES)
def test_review_corpus_technique_obtains_nothing(keyed, marker, monkeypatch, name):
    """Each technique is rejected with its kind, no answer (message, detail, report) carries the API key, nothing
    appears outside the sandbox, and the server then verifies the benign program to the same spec hash as before."""
    server, p, run_dir, good_hash = keyed
    monkeypatch.setattr(sandbox, "_default_pool", p)  # what the verifier server runs its programs on
    path = CORPUS / name
    kind = header(path, "expect")
    before = _files(run_dir)
    for finalizer, expected in (("sim.sandbox:collect_result", kind),
                                ("sim.scene:finalize_program", SCENE_FINALIZER_KIND.get(name, kind))):
        res = p.run(path.read_text(), finalizer=finalizer, inputs={"globals": {"seed": 0, "marker": marker}})
        assert not res.ok and res.error.kind == expected, (finalizer, res.error)
        assert FAKE_KEY not in res.model_dump_json(), f"{name} leaked the API key: {res.error}"

    async def main():
        async with Client(server) as c:
            result = await c.call_tool("verify_program", {"source": with_marker(path, marker).decode()})
            seen = _everything(result)
            assert FAKE_KEY not in seen, f"{name} leaked the API key through the server: {seen[:2000]}"
            assert not result.is_error, seen
            check = result.structured_content["checks"][0]
            assert result.structured_content["passed"] is False and check["name"] == "executes" and not check["passed"]
            assert check["message"].startswith(SCENE_FINALIZER_KIND.get(name, kind) + ": "), check
            good = await c.call_tool("verify_program", {"source": GOOD_PROGRAM, "seed": GOOD_SEED})
            assert not good.is_error and good.structured_content["passed"], _everything(good)
            assert good.structured_content["spec_hash"] == good_hash

    asyncio.run(main())
    assert _files(run_dir) == before, "verify_program wrote into the run directory"


def test_corpus_program_does_not_learn_the_hosts_name_or_kernel(pool):
    """host_identity_uname.py reaches the `platform` module's cached uname through a run-time format string: in
    its own UTS namespace the zygote renamed the node and blanked the release before anything cached it."""
    import platform
    import socket

    res = pool.run((CORPUS / "host_identity_uname.py").read_text())
    assert not res.ok and res.error.kind == "runtime" and "uname_result(" in res.error.message, res.error
    if sandbox_os.capabilities()["namespaces"]:  # without a UTS namespace the node's name cannot be changed
        assert f"node='{socket.gethostname()}'" not in res.error.message, res.error.message
        assert f"node='{sandbox_os.SANDBOX_HOSTNAME}'" in res.error.message, res.error.message
    assert f"release='{platform.release()}'" not in res.error.message, res.error.message


def test_corpus_key_check_would_see_a_leak(keyed):
    """The key is looked for where a leak would show: a program that has it puts it into its error message."""
    _, p, _, _ = keyed
    res = p.run("raise RuntimeError('found ' + key)", inputs={"globals": {"key": FAKE_KEY}})
    assert not res.ok and FAKE_KEY in res.model_dump_json()


def test_corpus_program_cannot_read_the_previous_callers_request(keyed):
    # the zygote drops the last request and answer before it forks the next child (a format string built at run
    # time walks the frames the child inherits: format_string_previous_request.py)
    _, p, _, _ = keyed
    secret = f"other-callers-secret-{uuid.uuid4().hex}"
    assert p.run(f"result = {secret!r}", caller="victim").value == secret
    res = p.run((CORPUS / "format_string_previous_request.py").read_text(), caller="attacker")
    assert not res.ok
    assert secret not in res.model_dump_json(), res.error.message
