"""Shared fixtures for the policy tests: small networks, the hash embedder, synthetic observations, a tiny round
benchmark."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest
import torch

from policy.bench import synthetic_observations, synthetic_transitions
from policy.config import PolicyConfig
from policy.text import get_embedder


@pytest.fixture
def embedder():
    return get_embedder("hash")


@pytest.fixture
def small_config():
    def make(backbone: str = "transformer", **kw) -> PolicyConfig:
        return PolicyConfig(backbone=backbone, **{"d_model": 32, "n_layers": 2, "n_heads": 4, "ff_mult": 2, **kw})

    return make


@pytest.fixture
def obs_batch(embedder):
    def make(n: int, seed: int = 0) -> dict[str, torch.Tensor]:
        from policy.data import collate_obs

        return collate_obs(synthetic_observations(n, np.random.default_rng(seed)), embedder)

    return make


@pytest.fixture
def transitions(embedder):
    def make(n: int, seed: int = 0) -> dict[str, torch.Tensor]:
        return synthetic_transitions(n, np.random.default_rng(seed), embedder)

    return make


TINY_ROUND = ["--seeds", "0", "--replicates", "1", "--base-demos", "4", "--base-updates", "4", "--scenes", "2",
              "--rollouts-per-scene", "1", "--updates", "2", "--eval", "2"]


@pytest.fixture
def tiny_round(tmp_path):
    """run(arms, *flags) -> (summary, raw file, parser, args): `coda bench round` at tiny sizes on one seed."""
    from policy import bench_round

    def run(arms: str, *flags: str):
        parser = argparse.ArgumentParser()
        bench_round.add_arguments(parser)
        out = tmp_path / "round.json"
        args = parser.parse_args([*TINY_ROUND, "--arms", arms, *flags, "--out", str(out)])
        result = bench_round.run(args)
        return result, json.loads(out.read_text()), parser, args

    return run
