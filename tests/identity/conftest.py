"""Fixtures of the identity unit tests and of the provider's own test: a real OpenID provider
per test (``tests/kit/identity_idp.py``; the end-to-end identity tests live in
``tests/e2e/test_identity.py`` so that ``make test-real`` runs them on the real lane too)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.kit.identity_idp import StartIdp, TestIdp


@pytest.fixture
async def start_idp() -> AsyncIterator[StartIdp]:
    started: list[TestIdp] = []

    async def start(redirect_uris: list[str]) -> TestIdp:
        idp = TestIdp(redirect_uris=redirect_uris)
        started.append(idp)
        await idp.start()
        return idp

    yield start
    for idp in started:
        await idp.close()
