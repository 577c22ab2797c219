"""Tests of the external-benchmark adapters. Those that run robosuite need the external venv
(`scripts/setup --external`); without it they skip, saying so."""

from __future__ import annotations

import pytest

from policy.external.base import external_venv, has_package

_HAS = {}


def needs(package: str):
    if package not in _HAS:
        _HAS[package] = has_package(package)
    if not _HAS[package]:
        pytest.skip(f"no external venv with {package} at {external_venv()} (run scripts/setup --external)")


@pytest.fixture(scope="session")
def robosuite_available():
    needs("robosuite")


@pytest.fixture(scope="session")
def metaworld_available():
    needs("metaworld")
