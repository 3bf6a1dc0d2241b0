"""The CA bundle directory: a ConfigMap's ``ca.crt`` on ``ca-bundle:<ns>/<name>``, published only
when it changed (a ConfigMap edit elsewhere costs the GatewayController no recompute) and
withdrawn when the ConfigMap goes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from interlock.actors.ca_bundles import CABundleDirectory
from interlock.actors.gateway_messages import CA_BUNDLE_DIRECTORY, CA_BUNDLE_KEY, CABundle
from interlock.actors.messages import ObjectChanged
from interlock.actors.topics import CA_BUNDLE
from interlock.controller.kinds import parsed
from interlock.mailbox import Actor, ActorSystem, Published, Unpublished
from interlock.mailbox.testing import wait_idle
from interlock.model.meta import ObjectKey

KEY = ObjectKey(namespace="shop", name="payments-ca")
TOPIC = CA_BUNDLE.topic(KEY)


class Listener(Actor):
    def __init__(self, seen: list[object]) -> None:
        self.seen = seen

    async def started(self) -> None:
        self.subscribe(TOPIC)

    async def receive(self, message: object) -> object | None:
        if isinstance(message, Published):
            self.seen.append(message.value)
        elif isinstance(message, Unpublished):
            self.seen.append(None)
        return None


def config_map(data: dict[str, str], *, version: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": KEY.name, "namespace": KEY.namespace, "resourceVersion": version},
        "data": data,
    }


@pytest.fixture
async def system() -> AsyncIterator[ActorSystem]:
    system = ActorSystem()
    system.spawn(CA_BUNDLE_DIRECTORY, CABundleDirectory)
    yield system
    await system.shutdown()


async def test_only_a_change_of_ca_crt_is_published_and_a_deletion_withdraws_it(
    system: ActorSystem,
) -> None:
    seen: list[object] = []
    system.spawn("listener", lambda: Listener(seen))
    await wait_idle(system)
    for version, data in enumerate(
        (
            {"ca.crt": "PEM-1"},
            {"ca.crt": "PEM-1", "other": "x"},  # another key changed: nothing to publish
            {"ca.crt": "PEM-2"},
            {},  # no ca.crt: still published, as a ConfigMap without one
        )
    ):
        change = ObjectChanged.of(config_map(data, version=str(version)))
        system.tell(CA_BUNDLE_DIRECTORY, parsed(change))
        await wait_idle(system)
    obj = config_map({}, version="9")
    system.tell(CA_BUNDLE_DIRECTORY, parsed(ObjectChanged.of(obj, deleted=True)))
    await wait_idle(system)
    assert seen == [
        CABundle(KEY, "PEM-1"),
        CABundle(KEY, "PEM-2"),
        CABundle(KEY, None),
        None,
    ]
    assert CA_BUNDLE_KEY not in system.retained(TOPIC)
