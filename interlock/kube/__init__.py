"""interlock.kube: Kubernetes I/O through kubernetes-asyncio.

Informers (list+watch) hand raw objects to a synchronous sink; the status patcher, the event
recorder and the leader elector write back. Nothing here computes: ``model/`` does, ``actors/``
decide when.

``library`` comes first: it makes kubernetes-asyncio importable without its generated models
before any module here imports kubernetes-asyncio.
"""

from interlock.kube import library
from interlock.kube.client import KubeConfigError, api_client, close_api_client, make_api_client
from interlock.kube.discovery import is_served, served_resource
from interlock.kube.events import EventRecorder, EventRecorderStatistics, reference_to
from interlock.kube.informer import (
    Deleted,
    Informer,
    InformerEvent,
    InformerSet,
    InformerStatistics,
    Upserted,
)
from interlock.kube.lease import LeaderElector, LeaderElectorStatistics
from interlock.kube.resources import Resource
from interlock.kube.status import (
    PatchOutcome,
    PatchResult,
    RetryableStatusError,
    StatusCache,
    StatusPatcher,
    StatusPatcherStatistics,
)
from interlock.kube.transport import KubeApiError

__all__ = [
    "Deleted",
    "EventRecorder",
    "EventRecorderStatistics",
    "Informer",
    "InformerEvent",
    "InformerSet",
    "InformerStatistics",
    "KubeApiError",
    "KubeConfigError",
    "LeaderElector",
    "LeaderElectorStatistics",
    "PatchOutcome",
    "PatchResult",
    "Resource",
    "RetryableStatusError",
    "StatusCache",
    "StatusPatcher",
    "StatusPatcherStatistics",
    "Upserted",
    "api_client",
    "close_api_client",
    "is_served",
    "library",
    "make_api_client",
    "reference_to",
    "served_resource",
]
