"""The controller's actors: thin holders of state that subscribe, call ``model/`` and publish.

The outbound half (``docs/design.md``, the flow of a change):

- :class:`InformerRouter` — where informer events enter; parses and hands them on.
- :class:`ServiceDirectory`, :class:`GrantsDirectory` — publish ``service:`` and ``grants:``
  topics, only on changes routes can see.
- :class:`RouteActor` — one per HTTPRoute; resolves it and publishes ``parent:`` topics.
- :class:`ServicePortWatch` (through :class:`ServicePortWatches`) — one per Service port and
  client namespace; builds the policy and pushes it to latest-value slots.
- :class:`StatusWriter` — HTTPRoute, Ingress and ModuleSet status and the edge's Events,
  written only by the Lease holder, only on change.

Topic names, addresses and messages are in :mod:`interlock.actors.messages`. The edge half
(Ingress, ModuleSet, edges) lives in its own modules of this package.
"""

from interlock.actors.grants import GrantsDirectory
from interlock.actors.route import RouteActor
from interlock.actors.router import InformerRouter
from interlock.actors.service_directory import ServiceDirectory
from interlock.actors.service_port_watch import (
    ServicePortWatch,
    ServicePortWatches,
    WatchEntry,
)
from interlock.actors.status_writer import (
    StatusSink,
    StatusWriter,
    StatusWriterStatistics,
    TransientStatusError,
)

__all__ = [
    "GrantsDirectory",
    "InformerRouter",
    "RouteActor",
    "ServiceDirectory",
    "ServicePortWatch",
    "ServicePortWatches",
    "StatusSink",
    "StatusWriter",
    "StatusWriterStatistics",
    "TransientStatusError",
    "WatchEntry",
]
