"""Where `coda serve` keeps its files without --run-dir: never the working directory an MCP client chose."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CODA_RUN_DIR", "XDG_DATA_HOME")}
    return {**env, **extra}


def test_serve_without_run_dir_uses_the_user_data_dir_not_the_cwd(tmp_path):
    cwd, data = tmp_path / "cwd", tmp_path / "data"
    cwd.mkdir()
    proc = subprocess.run([sys.executable, "-m", "coda.cli", "serve", "verifier"], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=120, cwd=cwd, env=_env(XDG_DATA_HOME=str(data)))
    where = data / "coda" / "runs" / "default"
    assert proc.returncode == 0, proc.stderr
    assert list(cwd.iterdir()) == []  # nothing in the working directory
    assert where.is_dir()
    assert f"keeps its files in {where}" in proc.stderr
    assert proc.stdout == ""  # stdout is the stdio transport's


def test_coda_run_dir_env_wins_and_mcp_config_names_the_same_dir(tmp_path):
    cwd, chosen = tmp_path / "cwd", tmp_path / "shared" / "run"
    cwd.mkdir()
    env = _env(CODA_RUN_DIR=str(chosen), XDG_DATA_HOME=str(tmp_path / "data"))
    proc = subprocess.run([sys.executable, "-m", "coda.cli", "serve", "verifier"], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=120, cwd=cwd, env=env)
    assert proc.returncode == 0, proc.stderr
    assert chosen.is_dir() and not (tmp_path / "data").exists() and list(cwd.iterdir()) == []
    cfg = subprocess.run([sys.executable, "-m", "coda.cli", "mcp-config"], capture_output=True, text=True,
                         timeout=120, cwd=cwd, env=env)
    args = json.loads(cfg.stdout)["mcpServers"]["coda-sim"]["args"]
    assert args[args.index("--run-dir") + 1] == str(chosen)


def test_the_trainer_trains_on_its_torch_threads_unless_told_and_refuses_a_bad_count():
    from coda.commands.serve import train_threads

    assert train_threads(None, 1) == 1 and train_threads(None, 3) == 3 and train_threads(2, 1) == 2
    proc = subprocess.run([sys.executable, "-m", "coda.cli", "serve", "trainer", "--train-threads", "0"],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, env=_env())
    assert proc.returncode == 2 and "--train-threads must be >= 1, got 0" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_experiment_cells_train_on_one_thread():
    """Every protocol so far ran its cells' updates on one thread: cells stay comparable with them."""
    from agent.experiment.cells import server_args

    args = server_args({"checkpoint": "/x/base/transformer-s0/base.pt"})["trainer"]
    assert args[args.index("--train-threads") + 1] == "1"


def test_a_server_that_cannot_start_leaves_no_run_directory(tmp_path):
    """Session 37 (red team): an HTTP server refused for its token or host, or unable to bind its port, had already
    made its --run-dir (with scenes/ and traces/ when the bind failed); bad --workers and --import-checkpoints were
    accepted. Each is now one line, exit 2, before anything is made."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        cases = {
            "token": (["sim", "--transport", "http", "--token", "abc"], "at least 8 characters"),
            "host": (["sim", "--transport", "http", "--host", "999.999.1.1", "--token", "abcdefghij"], "unknown host"),
            "port": (["sim", "--transport", "http", "--port", port], f"cannot listen on 127.0.0.1:{port}"),
            "workers": (["trainer", "--workers", "-5"], "--workers must be >= 1, got -5"),
            "import": (["trainer", "--import-checkpoints", str(tmp_path / "none")], "is not a directory"),
        }
        for name, (argv, words) in cases.items():
            run_dir = tmp_path / name / "run"
            proc = subprocess.run([sys.executable, "-m", "coda.cli", "serve", *argv, "--run-dir", str(run_dir)],
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, env=_env())
            assert proc.returncode == 2 and words in proc.stderr, (name, proc.stderr)
            assert len(proc.stderr.strip().splitlines()) == 1, (name, proc.stderr)
            assert not (tmp_path / name).exists(), name


def test_coda_run_checks_name_server_urls_and_workers_before_making_anything(tmp_path):
    """Session 37 (red team): `--server-url bogus` failed with a dict-update message after run.log was written,
    an unknown server name was ignored, `--name /abs` or `../x` put the run outside --runs-dir, `--workers 0`
    started a run; `coda mcp-config --run-dir ""` named the working directory."""
    runs = tmp_path / "runs"
    cases = {
        "--server-url bogus": "must be NAME=URL",
        "--server-url nosuch=http://127.0.0.1:1/mcp": "must be NAME=URL",
        f"--name {tmp_path / 'abs'}": "must be a plain folder name",
        "--name ../x": "must be a plain folder name",
        "--workers 0": "--workers must be >= 1, got 0",
    }
    for argv, words in cases.items():
        proc = subprocess.run([sys.executable, "-m", "coda.cli", "run", "--runs-dir", str(runs), *argv.split()],
                              capture_output=True, text=True, timeout=120, cwd=tmp_path, env=_env())
        assert proc.returncode == 2 and words in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, \
            (argv, proc.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    cfg = subprocess.run([sys.executable, "-m", "coda.cli", "mcp-config", "--run-dir", ""], capture_output=True,
                         text=True, timeout=120, env=_env())
    assert cfg.returncode == 2 and "--run-dir is empty" in cfg.stderr and cfg.stdout == ""
