"""Reading an open policy watch in the outbound end-to-end tests: every document checked against
the JSON Schema the policy API serves, and a wait for the watched Service to be seen."""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator

from interlock.api.policy_schema import SCHEMA_PATH
from tests.kit.e2e_clients import PolicyClient, PolicyWatch


async def served_validator(policy: PolicyClient) -> Draft202012Validator:
    """A validator of the JSON Schema the controller's policy API serves."""
    async with policy.session.get(policy.url + SCHEMA_PATH) as response:
        assert response.status == 200
        return Draft202012Validator(await response.json(content_type=None))


async def next_valid(watch: PolicyWatch, validator: Draft202012Validator) -> dict[str, Any]:
    """The watch's next document, which must be valid."""
    document = await watch.next()
    validator.validate(document)
    return document


async def service_seen(watch: PolicyWatch) -> None:
    """Wait until the watch's policy reflects the Service (the watch may open before the
    controller saw it: on a real API server the informer event can come later)."""
    await watch.until(lambda p: all(b["exists"] for b in p["routes"][0]["rules"][0]["backends"]))
