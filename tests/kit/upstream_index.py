"""A stand-in for the edge's UpstreamIndex as the edge workers' table pusher reads it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from interlock.actors.upstream_cache import UpstreamTables
from interlock.model.meta import ObjectKey
from interlock.model.outbound import OutboundPolicy
from interlock.model.service import ServicePortKey


@dataclass
class PusherIndex:
    """The index's tables, the Services it follows, its ready policies and its listeners; a
    test changes them and tells the listeners (:meth:`told`), as the real index does."""

    tables: UpstreamTables = field(default_factory=UpstreamTables)
    tracked: set[ObjectKey] = field(default_factory=set)
    ready_policies: dict[ServicePortKey, OutboundPolicy] = field(default_factory=dict)
    listeners: list[Any] = field(default_factory=list)

    def told(self, key: ServicePortKey | ObjectKey) -> None:
        """Tell the listeners ``key``'s row changed."""
        for listener in self.listeners:
            listener(key)
