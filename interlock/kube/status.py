"""Writing the ``/status`` subresource of our objects, once per change.

Status is how a user learns why a route has no backend or why a ModuleSet was rejected, so a
write must not be lost to a transient error and must not be repeated for nothing: thousands of
routes re-writing an unchanged status on every resync would load the API server and, worse,
bump resourceVersions that wake every other watcher. :class:`StatusPatcher` sends a JSON merge
patch to ``/status`` (which never bumps ``metadata.generation``) and classifies the answer;
when the caller names the object's uid it sends a JSON patch instead, whose first operation tests
that uid: a status computed for an object that was deleted and created again under the same
name is then refused (422) instead of landing on the new object. A merge patch cannot say this:
the API server ignores ``metadata`` in a custom resource's ``/status`` patch.
:class:`StatusCache` remembers what was last written per object so an identical write is skipped.
Deciding *whether* the desired status differs from the object's current one (timestamps aside) is
the caller's job, with the model's comparison functions.
"""

from __future__ import annotations

import copy
import enum
from dataclasses import dataclass
from typing import Any

from interlock.kube.library import ApiClient
from interlock.kube.resources import Resource
from interlock.kube.transport import JSON_PATCH, MERGE_PATCH, KubeApiError, request_json


class PatchResult(enum.Enum):
    """What became of a status write."""

    WRITTEN = "written"
    """The API server accepted the patch."""
    UNCHANGED = "unchanged"
    """Identical to the last status written for this object: nothing was sent."""
    GONE = "gone"
    """The object no longer exists (404): nothing to do, not an error."""
    REJECTED = "rejected"
    """The API server refused the patch (409 conflict, 422 invalid, other 4xx): see the message."""


@dataclass(frozen=True, slots=True)
class PatchOutcome:
    """The result of :meth:`StatusPatcher.patch_status`, with the HTTP code and message if any."""

    result: PatchResult
    code: int = 0
    """HTTP status code of the answer (0 when nothing was sent)."""
    message: str = ""
    """The API server's message for a rejected patch."""
    resource_version: str = ""
    """The object's resourceVersion after a written patch."""


class RetryableStatusError(Exception):
    """The status could not be written for now (no connection, 5xx, 429): try again later."""

    def __init__(self, error: KubeApiError) -> None:
        self.error = error
        super().__init__(str(error))


@dataclass(frozen=True, slots=True)
class StatusCacheStatistics:
    entries: int
    """Objects whose last written status is remembered."""
    skipped: int
    """Writes skipped because they were identical to the last one."""


class StatusCache:
    """The last status written per object, so that identical writes are skipped.

    It reflects only this process's writes: whoever becomes leader must :meth:`clear` it, because
    another replica may have written in between.
    """

    def __init__(self) -> None:
        self._written: dict[tuple[Resource, str, str], tuple[str, dict[str, Any]]] = {}
        """(uid, status) per object: an object deleted and created again under the same name
        (uid '' when the caller does not know it) is another object, not yet written."""
        self._writing: dict[tuple[Resource, str, str], object] = {}
        """A token per object whose write is in flight; :meth:`forget` drops it, so a write
        that ends after the object was forgotten is not remembered."""
        self._skipped = 0

    def is_current(
        self, resource: Resource, namespace: str, name: str, status: dict[str, Any], uid: str = ""
    ) -> bool:
        """True (and counted as a skip) when ``status`` equals the last one written to the
        same object (``uid``)."""
        if self._written.get((resource, namespace, name)) == (uid, status):
            self._skipped += 1
            return True
        return False

    def writing(self, resource: Resource, namespace: str, name: str) -> object:
        """Note that a write to the object starts; pass the token to :meth:`remember`."""
        token = object()
        self._writing[(resource, namespace, name)] = token
        return token

    def remember(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        status: dict[str, Any],
        uid: str = "",
        *,
        token: object | None = None,
    ) -> None:
        """Record ``status`` as the last one written for the object (``uid``). With the
        ``token`` of :meth:`writing`: only if the object was not forgotten since (the caller
        stopped trusting what it wrote while this write was in flight — found on the real lane:
        a status repaired to exactly the value of a write that ended after the forget was then
        skipped as "unchanged", leaving another writer's status in place)."""
        key = (resource, namespace, name)
        if token is not None and self._writing.pop(key, None) is not token:
            return
        self._written[key] = (uid, status)

    def forget(self, resource: Resource, namespace: str, name: str) -> None:
        """Drop what is known of the object (it was deleted, or a write was rejected), including
        the write in flight: it is not remembered when it ends."""
        self._written.pop((resource, namespace, name), None)
        self._writing.pop((resource, namespace, name), None)

    def clear(self) -> None:
        """Forget everything (on becoming leader)."""
        self._written.clear()
        self._writing.clear()

    def statistics(self) -> StatusCacheStatistics:
        return StatusCacheStatistics(entries=len(self._written), skipped=self._skipped)


@dataclass(frozen=True, slots=True)
class StatusPatcherStatistics:
    written: int
    """Patches the API server accepted."""
    unchanged: int
    """Writes skipped because they were identical to the last one written."""
    gone: int
    """Writes for objects that no longer exist."""
    rejected: int
    """Patches refused (409, 422, other 4xx)."""
    failed: int
    """Transient failures raised to the caller for a retry."""


class StatusPatcher:
    """Merge-patches ``/status`` of objects; skips writes identical to the last one it made."""

    def __init__(self, api: ApiClient, *, cache: StatusCache | None = None) -> None:
        self._api = api
        self.cache = cache if cache is not None else StatusCache()
        """What was last written per object; :meth:`StatusCache.clear` it on becoming leader."""
        self._counts = dict.fromkeys(PatchResult, 0)
        self._failed = 0

    def statistics(self) -> StatusPatcherStatistics:
        return StatusPatcherStatistics(
            written=self._counts[PatchResult.WRITTEN],
            unchanged=self._counts[PatchResult.UNCHANGED],
            gone=self._counts[PatchResult.GONE],
            rejected=self._counts[PatchResult.REJECTED],
            failed=self._failed,
        )

    async def patch_status(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        status: dict[str, Any],
        *,
        uid: str = "",
    ) -> PatchOutcome:
        """Write ``status`` on the object's ``/status`` subresource.

        Without ``uid``: a merge patch, which replaces lists (``status.parents``,
        ``status.conditions``) as a whole and removes keys set to None. With ``uid``: a JSON
        patch that tests ``metadata.uid`` and then sets the whole status (keys set to None
        left out), the same result for the statuses interlock writes, whose every key is its
        own (RouteStatus has only ``parents``, IngressStatus only ``loadBalancer``, a
        ModuleSet's status only ``conditions``); an object with another uid refuses it with
        422. Raises :class:`RetryableStatusError` on transient failures.
        """
        if self.cache.is_current(resource, namespace, name, status, uid):
            return self._count(PatchOutcome(PatchResult.UNCHANGED))
        what = f"patch status of {resource.describe(namespace=namespace, name=name)}"
        # The cache keeps its own copy: the caller may go on mutating the dict it passed.
        snapshot = copy.deepcopy(status)
        token = self.cache.writing(resource, namespace, name)
        try:
            answer = await request_json(
                self._api,
                method="PATCH",
                path=resource.status_path(namespace=namespace, name=name),
                what=what,
                body=_patch_body(snapshot, uid),
                content_type=JSON_PATCH if uid else MERGE_PATCH,
            )
        except KubeApiError as error:
            self.cache.forget(resource, namespace, name)
            if error.retryable:
                self._failed += 1
                raise RetryableStatusError(error) from error
            if error.code == 404:
                return self._count(PatchOutcome(PatchResult.GONE, code=404))
            return self._count(
                PatchOutcome(PatchResult.REJECTED, code=error.code, message=str(error))
            )
        self.cache.remember(resource, namespace, name, snapshot, uid, token=token)
        meta = answer.get("metadata")
        version = str(meta.get("resourceVersion", "")) if isinstance(meta, dict) else ""
        return self._count(PatchOutcome(PatchResult.WRITTEN, code=200, resource_version=version))

    def _count(self, outcome: PatchOutcome) -> PatchOutcome:
        self._counts[outcome.result] += 1
        return outcome


def _patch_body(status: dict[str, Any], uid: str) -> object:
    """The merge patch of ``status``, or, when ``uid`` is known, the JSON patch guarded by it."""
    if not uid:
        return {"status": status}
    return [
        {"op": "test", "path": "/metadata/uid", "value": uid},
        {"op": "add", "path": "/status", "value": _without_nulls(status)},
    ]


def _without_nulls(value: Any) -> Any:
    """What a merge patch of ``value`` makes of an object holding none of its keys: every
    mapping key set to None left out (lists, which a merge patch replaces whole, as they are)."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    return value
