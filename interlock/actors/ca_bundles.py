"""CABundleDirectory: the ConfigMaps' ``ca.crt``, published for the BackendTLSPolicies naming
them.

A BackendTLSPolicy names its CA bundles by ConfigMap, and a ConfigMap may be created after the
policy, or changed under it (the CA rotated, or emptied by mistake): the GatewayController must
see each change at once and in order with its other inputs. Like the other directories
(``actors/directories.py``) this one turns the ConfigMap informer's events into one retained
topic per ConfigMap (``ca-bundle:<ns>/<name>``), which the controller subscribes to for the
ConfigMaps its policies name, and publishes only when ``ca.crt`` changed: the rest of a
ConfigMap (most ConfigMaps of a cluster have no ``ca.crt`` at all) costs nothing downstream.
"""

from __future__ import annotations

from typing import Any

from interlock.actors.gateway_messages import (
    CA_BUNDLE_KEY,
    CABundle,
)
from interlock.actors.messages import ObjectParsed
from interlock.actors.topics import CA_BUNDLE
from interlock.mailbox import Actor
from interlock.model.backend_tls import CA_KEY
from interlock.model.meta import ObjectKey


def ca_bundle_of(raw: dict[str, Any]) -> CABundle | None:
    """A ConfigMap's ``ca.crt`` (None: not a readable ConfigMap)."""
    meta = raw.get("metadata")
    if not isinstance(meta, dict) or not meta.get("name") or not meta.get("namespace"):
        return None
    data = raw.get("data")
    pem = data.get(CA_KEY) if isinstance(data, dict) else None
    return CABundle(
        key=ObjectKey(namespace=str(meta["namespace"]), name=str(meta["name"])),
        pem=pem if isinstance(pem, str) else None,
    )


class CABundleDirectory(Actor):
    """Publishes ``ca-bundle:<ns>/<name>`` for every ConfigMap, only when ``ca.crt`` changed."""

    reconciles = "ConfigMap"

    async def receive(self, message: object) -> object | None:
        if not isinstance(message, ObjectParsed):
            return None
        topic = CA_BUNDLE.topic(message.key)
        found = None if message.deleted else message.value
        retained = self.system.retained(topic)
        if not isinstance(found, CABundle):
            if CA_BUNDLE_KEY in retained:
                self.unpublish(topic, CA_BUNDLE_KEY)
        elif retained.get(CA_BUNDLE_KEY) != found:
            self.publish(topic, CA_BUNDLE_KEY, found)
        return None
