"""Object storage, the global resourceVersion, watch history and watch fan-out.

This is the etcd + watch cache of the embedded server. Every write, whether it comes from HTTP
or from a test calling :class:`ObjectStore` directly, goes through one commit path that bumps
the single global resourceVersion, records the event in a bounded history and offers it to the
open watches of that kind — so in-process writes are indistinguishable from kubectl's.

Performance shape (the controller's benchmark lists and watches 10,000 Services and HTTPRoutes):
each stored object keeps its JSON encoding (:mod:`~interlock.embedded.objects`), so a list is a
join of cached bytes and a watch event is serialized once however many watches receive it;
each watch has its own queue (:mod:`~interlock.embedded.watches`).
"""

from __future__ import annotations

import base64
import binascii
import bisect
import builtins
import json
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from interlock.embedded.crds import accept_crd, crd_errors
from interlock.embedded.errors import (
    ApiError,
    already_exists,
    bad_request,
    conflict,
    invalid,
    not_found,
    stale_resource_version,
)
from interlock.embedded.objects import JsonObject, StoredObject, encode
from interlock.embedded.patch import apply_patch
from interlock.embedded.registry import Registry, ResourceType, resource_type_from_crd
from interlock.embedded.schema import apply_defaults, prune_unknown_fields
from interlock.embedded.selectors import parse_field_selector, parse_label_selector
from interlock.embedded.timefmt import format_timestamp
from interlock.embedded.validation import ServiceAllocator, prepare
from interlock.embedded.watches import (
    ADDED,
    DELETED,
    MODIFIED,
    Event,
    Watch,
    WatchFilter,
)

ObjectKey = tuple[str, str]
"""(namespace, name); namespace is ``""`` for cluster-scoped kinds."""

CRD_KEY = ("apiextensions.k8s.io", "customresourcedefinitions")
NAMESPACE_KEY = ("", "namespaces")


@dataclass(frozen=True, slots=True)
class ListPage:
    """What a list request returns."""

    items: list[StoredObject]
    resource_version: int
    """The list's resourceVersion: watch from it to see every later change."""
    continue_token: str | None
    remaining: int | None
    """How many more items match, when there is a next page."""


class UnknownFieldsError(ApiError):
    """400: fields the schema does not know, under ``fieldValidation=Strict``."""

    def __init__(self, message: str) -> None:
        super().__init__(400, message)


_WITHOUT_GENERATION = frozenset(
    {
        ("", "services"),
        ("", "secrets"),
        ("", "configmaps"),
        ("", "namespaces"),
        ("", "events"),
        ("coordination.k8s.io", "leases"),
    }
)
"""Built-in kinds whose kube-apiserver strategy never sets metadata.generation."""


def has_generation(rtype: ResourceType) -> bool:
    return rtype.key not in _WITHOUT_GENERATION


def _spec_view(obj: Mapping[str, Any], *, status_subresource: bool) -> JsonObject:
    """The part of an object whose change bumps metadata.generation."""
    skipped = {"metadata", "status"} if status_subresource else {"metadata"}
    return {k: v for k, v in obj.items() if k not in skipped}


def _parse_resource_version(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise bad_request(f'invalid resource version "{text}"') from None
    if value < 0:
        raise bad_request(f'invalid resource version "{text}"')
    return value


@dataclass(frozen=True, slots=True)
class WriteOptions:
    """How a create, update or patch was asked for (the request's ``dryRun`` and
    ``fieldValidation``), and where the server's warnings about it go."""

    dry_run: bool = False
    """Validate and answer as if written, store nothing."""
    field_validation: str = "Warn"
    """Unknown fields: ``Strict`` refuses them, ``Warn`` drops them with a warning, ``Ignore``
    drops them silently."""
    warnings: builtins.list[str] | None = None
    """Collects the warnings (``Warn``), for the response's ``Warning`` headers."""


DEFAULT_WRITE = WriteOptions()


class ObjectStore:
    """All objects of all kinds, with watch history. Single-threaded: use from the event loop.

    The methods taking a :class:`ResourceType` are what the HTTP layer calls; the methods taking
    ``api_version``/``kind`` (``create``, ``get``, ``update``, ``update_status``, ``patch``,
    ``delete``, ``list``) are the in-process API for tests, with the same semantics.
    """

    def __init__(
        self,
        registry: Registry,
        *,
        history_size: int = 10_000,
        clock: Callable[[], datetime] | None = None,
        watch_backlog_limit: int = 100_000,
    ) -> None:
        self.registry = registry
        self._clock = clock or (lambda: datetime.now(UTC))
        self._rv = 0
        self._objects: dict[tuple[str, str], dict[ObjectKey, StoredObject]] = {}
        self._history: deque[Event] = deque()
        self._history_size = history_size
        self._compacted_rv = 0
        self._watches: dict[tuple[str, str], set[Watch]] = {}
        self._allocator = ServiceAllocator()
        self._watch_backlog_limit = watch_backlog_limit
        self._namespace_sizes: dict[str, int] = {}
        """Objects per namespace, so a terminating namespace knows at once when it is empty."""

    # -- state -------------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        """The global resourceVersion: that of the latest committed write."""
        return self._rv

    def now(self) -> datetime:
        return self._clock()

    def statistics(self) -> dict[str, int]:
        """Sizes of the store, its history and its open watches.

        ``watch_backlog`` is the most events any one open watch has queued and not yet sent.
        """
        open_watches = [w for watches in self._watches.values() for w in watches]
        return {
            "objects": sum(len(c) for c in self._objects.values()),
            "resource_version": self._rv,
            "history": len(self._history),
            "history_size": self._history_size,
            "oldest_watchable_resource_version": self._compacted_rv,
            "watches": len(open_watches),
            "watch_backlog": max((w.pending() for w in open_watches), default=0),
        }

    # -- reads -------------------------------------------------------------------------------

    def read(self, rtype: ResourceType, *, namespace: str | None, name: str) -> StoredObject:
        stored = self._objects.get(rtype.key, {}).get(self._object_key(rtype, namespace, name))
        if stored is None:
            raise not_found(rtype, name)
        return stored

    def list_objects(
        self,
        rtype: ResourceType,
        *,
        where: WatchFilter,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> ListPage:
        """One page of a list, sorted by namespace and name."""
        collection = self._objects.get(rtype.key, {})
        list_rv = self._rv
        start: ObjectKey | None = None
        if continue_token:
            list_rv, start = self._decode_continue(continue_token)
        if where.namespace is not None:
            keys = [k for k in collection if k[0] == where.namespace]
        else:
            keys = list(collection)
        keys.sort()
        selected: list[StoredObject] = []
        position = 0
        if start is not None:
            position = bisect.bisect_right(keys, start)
        filtered = where.label_selector is not None or where.field_selector is not None
        for index in range(position, len(keys)):
            stored = collection[keys[index]]
            if filtered and not where.matches(stored.obj):
                continue
            if limit is not None and len(selected) >= limit:
                remaining = sum(
                    1 for k in keys[index:] if not filtered or where.matches(collection[k].obj)
                )
                last = selected[-1]
                token = self._encode_continue(list_rv, (last.namespace, last.name))
                return ListPage(selected, list_rv, token, remaining)
            selected.append(stored)
        return ListPage(selected, list_rv, None, None)

    @staticmethod
    def _encode_continue(rv: int, start: ObjectKey) -> str:
        raw = json.dumps({"rv": rv, "start": list(start)}).encode()
        return base64.urlsafe_b64encode(raw).decode()

    def _decode_continue(self, token: str) -> tuple[int, ObjectKey]:
        try:
            data = json.loads(base64.urlsafe_b64decode(token.encode()))
            rv, start = int(data["rv"]), (str(data["start"][0]), str(data["start"][1]))
        except (ValueError, KeyError, IndexError, TypeError, binascii.Error):
            raise bad_request("continue key is not valid") from None
        if rv < self._compacted_rv:
            raise ApiError(
                410,
                "The provided continue parameter is too old to display a consistent list "
                "result. You can start a new list without the continue parameter.",
                reason="Expired",
            )
        return rv, start

    # -- writes ------------------------------------------------------------------------------

    def create_object(
        self,
        rtype: ResourceType,
        *,
        version: str,
        namespace: str | None,
        body: Any,
        options: WriteOptions = DEFAULT_WRITE,
    ) -> StoredObject:
        obj = self._check_body(rtype, version, body)
        metadata = obj["metadata"]
        if rtype.namespaced:
            body_namespace = metadata.get("namespace")
            if namespace and body_namespace and body_namespace != namespace:
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request"
                )
            if namespace:
                metadata["namespace"] = namespace
        else:
            metadata.pop("namespace", None)
        if not metadata.get("name") and metadata.get("generateName"):
            metadata["name"] = f"{metadata['generateName']}{uuid.uuid4().hex[:5]}"
        name = str(metadata.get("name") or "")
        for field in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
            metadata.pop(field, None)
        if rtype.status_subresource and rtype.key != NAMESPACE_KEY:
            # As on a real server: status is written through the status subresource only.
            obj.pop("status", None)
        self._validate(
            rtype,
            obj,
            old=None,
            options=options,
        )
        object_namespace = str(metadata.get("namespace") or "")
        if rtype.namespaced:
            self._require_namespace(object_namespace, rtype, name)
        if self._object_key(rtype, object_namespace, name) in self._objects.get(rtype.key, {}):
            raise already_exists(rtype, name)
        if rtype.key == CRD_KEY:
            accept_crd(obj, old=None, now=format_timestamp(self._clock()))
        metadata["uid"] = str(uuid.uuid4())
        metadata["creationTimestamp"] = format_timestamp(self._clock())
        if has_generation(rtype):
            metadata["generation"] = 1
        if options.dry_run:
            # A dry-run create is never stored: kube-apiserver gives it no resourceVersion.
            metadata["resourceVersion"] = str(self._rv)
            return StoredObject(obj, encoded_without=("resourceVersion",))
        return self._commit(rtype, obj, previous=None)

    def update_object(
        self,
        rtype: ResourceType,
        *,
        version: str,
        namespace: str | None,
        name: str,
        body: Any,
        subresource: str | None = None,
        options: WriteOptions = DEFAULT_WRITE,
    ) -> StoredObject:
        obj = self._check_body(rtype, version, body)
        metadata = obj["metadata"]
        if metadata.get("name") not in (None, name):
            raise bad_request(
                f"the name of the object ({metadata.get('name')}) does not match the name on "
                f"the URL ({name})"
            )
        current = self.read(rtype, namespace=namespace, name=name)
        if rtype.namespaced and metadata.get("namespace") not in (None, "", namespace):
            raise bad_request(
                "the namespace of the provided object does not match the namespace sent on "
                "the request"
            )
        requested_rv = metadata.get("resourceVersion")
        if requested_rv not in (None, "") and str(requested_rv) != str(current.rv):
            raise stale_resource_version(rtype, name)
        return self._write_update(
            rtype,
            current,
            obj,
            subresource=subresource,
            options=options,
        )

    def patch_object(
        self,
        rtype: ResourceType,
        *,
        version: str,
        namespace: str | None,
        name: str,
        patch: Any,
        content_type: str,
        subresource: str | None = None,
        options: WriteOptions = DEFAULT_WRITE,
    ) -> StoredObject:
        current = self.read(rtype, namespace=namespace, name=name)
        base = current.copy(rtype.api_version(version))
        patched = apply_patch(
            base,
            patch,
            content_type=content_type,
            kind=rtype.key,
            is_core=not rtype.from_crd,
        )
        obj = self._check_body(rtype, version, patched)
        metadata = obj["metadata"]
        if metadata.get("name") != name or (
            rtype.namespaced and metadata.get("namespace") != current.namespace
        ):
            raise bad_request("a patch may not change metadata.name or metadata.namespace")
        if str(metadata.get("resourceVersion") or current.rv) != str(current.rv):
            raise stale_resource_version(rtype, name)
        try:
            return self._write_update(
                rtype,
                current,
                obj,
                subresource=subresource,
                options=options,
            )
        except UnknownFieldsError as error:
            # kube-apiserver reports a patch that adds unknown fields as an invalid "patch".
            raise ApiError(
                422,
                f'{rtype.kind} "{name}" is invalid: patch: Invalid value: "...": {error.message}',
                details={
                    "causes": [
                        {"reason": "FieldValueInvalid", "message": error.message, "field": "patch"}
                    ]
                },
            ) from None

    def delete_object(
        self,
        rtype: ResourceType,
        *,
        namespace: str | None,
        name: str,
        preconditions: Mapping[str, Any] | None = None,
        dry_run: bool = False,
    ) -> tuple[StoredObject, bool]:
        """Delete, or start deleting (finalizers). Returns (object, whether it is gone now)."""
        current = self.read(rtype, namespace=namespace, name=name)
        if preconditions:
            uid = preconditions.get("uid")
            if uid and uid != current.obj["metadata"].get("uid"):
                raise conflict(
                    rtype,
                    name,
                    f"Precondition failed: UID in precondition: {uid}, UID in object meta: "
                    f"{current.obj['metadata'].get('uid')}",
                    by_kind=True,
                )
            rv = preconditions.get("resourceVersion")
            if rv and str(rv) != str(current.rv):
                raise conflict(
                    rtype,
                    name,
                    f"Precondition failed: ResourceVersion in precondition: {rv}, "
                    f"ResourceVersion in object meta: {current.rv}",
                    by_kind=True,
                )
        if dry_run:
            return current, not current.obj["metadata"].get("finalizers")
        if rtype.key == NAMESPACE_KEY:
            return self._delete_namespace(current)
        if current.obj["metadata"].get("finalizers"):
            if current.obj["metadata"].get("deletionTimestamp"):
                return current, False
            obj = current.copy()
            obj["metadata"]["deletionTimestamp"] = format_timestamp(self._clock())
            obj["metadata"]["deletionGracePeriodSeconds"] = 0
            return self._commit(rtype, obj, previous=current), False
        return self._remove(rtype, current), True

    # -- watches -----------------------------------------------------------------------------

    def open_watch(
        self, rtype: ResourceType, *, where: WatchFilter, resource_version: str | None
    ) -> Watch:
        """Register a watch, pre-filled with what happened since ``resource_version``.

        No rv (or "0") starts with a synthetic ADDED per current object. An rv older than the
        history raises a 410 Expired :class:`ApiError` (sent as an ERROR event by HTTP).
        Registration and the snapshot happen in one step, so no event falls between them.
        """
        watch = Watch(rtype=rtype, where=where, backlog_limit=self._watch_backlog_limit)
        if resource_version in (None, "", "0"):
            collection = self._objects.get(rtype.key, {})
            for stored in collection.values():
                if where.matches(stored.obj):
                    watch._put((ADDED, stored))
        else:
            since = _parse_resource_version(str(resource_version))
            if since < self._compacted_rv:
                raise ApiError(
                    410,
                    f"too old resource version: {since} ({self._compacted_rv})",
                    reason="Expired",
                )
            for event in self._history:
                if event.rv > since and event.key == rtype.key:
                    watch.offer(event)
        self._watches.setdefault(rtype.key, set()).add(watch)
        return watch

    def close_watch(self, watch: Watch) -> None:
        watch.close()
        self._watches.get(watch.rtype.key, set()).discard(watch)

    def drop_watches(self, *, abrupt: bool = True) -> int:
        """Close every open watch; returns how many were open."""
        count = 0
        for watches in self._watches.values():
            for watch in list(watches):
                watch.close(abrupt=abrupt)
                count += 1
            watches.clear()
        return count

    def expire_watches(self) -> int:
        """End every open watch with a 410 Expired ERROR event; returns how many were open."""
        count = 0
        for watches in self._watches.values():
            for watch in list(watches):
                watch.close(expired=True)
                count += 1
            watches.clear()
        return count

    def compact(self) -> None:
        """Forget the history: a watch from any older resourceVersion now gets 410 Expired."""
        self._history.clear()
        self._compacted_rv = self._rv

    # -- in-process API (raw dicts; the same semantics and events as the HTTP verbs) ---------

    def _type_of(self, api_version: str, kind: str) -> ResourceType:
        rtype = self.registry.by_kind(api_version=api_version, kind=kind)
        if rtype is None:
            raise ApiError(404, f'no kind "{kind}" is registered for version "{api_version}"')
        return rtype

    def create(self, obj: Mapping[str, Any]) -> JsonObject:
        rtype, version = self._type_and_version(obj)
        namespace = (obj.get("metadata") or {}).get("namespace")
        stored = self.create_object(rtype, version=version, namespace=namespace, body=obj)
        return stored.copy(rtype.api_version(version))

    def get(
        self, *, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> JsonObject:
        rtype = self._type_of(api_version, kind)
        return self.read(rtype, namespace=namespace, name=name).copy(api_version)

    def list(
        self,
        *,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> builtins.list[JsonObject]:
        """Objects of a kind (all namespaces unless one is given), sorted by namespace/name.

        Selectors are written as in a URL: ``label_selector="app=web,tier in (a,b)"``.
        """
        rtype = self._type_of(api_version, kind)
        where = WatchFilter(
            namespace=namespace,
            label_selector=parse_label_selector(label_selector),
            field_selector=parse_field_selector(field_selector),
        )
        return [item.copy(api_version) for item in self.list_objects(rtype, where=where).items]

    def update(self, obj: Mapping[str, Any]) -> JsonObject:
        """PUT semantics: 409 if ``metadata.resourceVersion`` is set and stale."""
        return self._update(obj, subresource=None)

    def update_status(self, obj: Mapping[str, Any]) -> JsonObject:
        return self._update(obj, subresource="status")

    def _update(self, obj: Mapping[str, Any], *, subresource: str | None) -> JsonObject:
        rtype, version = self._type_and_version(obj)
        metadata = obj.get("metadata") or {}
        stored = self.update_object(
            rtype,
            version=version,
            namespace=metadata.get("namespace"),
            name=str(metadata.get("name") or ""),
            body=obj,
            subresource=subresource,
        )
        return stored.copy(rtype.api_version(version))

    def patch(
        self,
        *,
        api_version: str,
        kind: str,
        name: str,
        patch: Any,
        namespace: str | None = None,
        content_type: str = "application/merge-patch+json",
        subresource: str | None = None,
    ) -> JsonObject:
        rtype = self._type_of(api_version, kind)
        stored = self.patch_object(
            rtype,
            version=api_version.rpartition("/")[2],
            namespace=namespace,
            name=name,
            patch=patch,
            content_type=content_type,
            subresource=subresource,
        )
        return stored.copy(api_version)

    def delete(
        self, *, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> JsonObject:
        """Delete (or mark for deletion when finalizers remain); returns the last state."""
        rtype = self._type_of(api_version, kind)
        stored, _ = self.delete_object(rtype, namespace=namespace, name=name)
        return stored.copy(api_version)

    def _type_and_version(self, obj: Mapping[str, Any]) -> tuple[ResourceType, str]:
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if not isinstance(api_version, str) or not isinstance(kind, str):
            raise bad_request("the object needs apiVersion and kind")
        return self._type_of(api_version, kind), api_version.rpartition("/")[2]

    # -- internals ---------------------------------------------------------------------------

    @staticmethod
    def _object_key(rtype: ResourceType, namespace: str | None, name: str) -> ObjectKey:
        return (namespace or "", name) if rtype.namespaced else ("", name)

    def _check_body(self, rtype: ResourceType, version: str, body: Any) -> JsonObject:
        if not isinstance(body, Mapping):
            raise bad_request(f"the body of a {rtype.kind} must be a JSON object")
        obj: JsonObject = json.loads(encode(body))
        api_version = rtype.api_version(version)
        if obj.get("kind") not in (None, "", rtype.kind):
            raise bad_request(
                f"the kind of the body ({obj.get('kind')}) does not match the kind of the "
                f"resource ({rtype.kind})"
            )
        if obj.get("apiVersion") not in (None, "", api_version):
            raise bad_request(
                f"the apiVersion of the body ({obj.get('apiVersion')}) does not match the "
                f"request ({api_version})"
            )
        # Objects are stored in the storage version; versions of one kind share a schema here.
        obj["apiVersion"] = rtype.api_version(rtype.storage_version)
        obj["kind"] = rtype.kind
        if not isinstance(obj.get("metadata"), dict):
            obj["metadata"] = {}
        return obj

    def _validate(
        self,
        rtype: ResourceType,
        obj: JsonObject,
        *,
        old: JsonObject | None,
        options: WriteOptions,
    ) -> None:
        metadata = obj["metadata"]
        for field in ("finalizers", "ownerReferences", "labels", "annotations"):
            if field in metadata and not metadata[field]:
                del metadata[field]  # empty is absent, as Go's omitempty writes it
        schema = rtype.schemas.get(rtype.storage_version)
        if schema:
            # Unknown fields are dropped, as a real server's decoding (or a CRD's structural
            # schema) does; with fieldValidation=Strict (kubectl's default) they are refused.
            unknown = prune_unknown_fields(schema, obj)
            if unknown and options.field_validation == "Strict":
                version = rtype.storage_version
                raise UnknownFieldsError(
                    f'{rtype.kind} in version "{version}" cannot be handled as a {rtype.kind}: '
                    f"strict decoding error: "
                    + ", ".join(f'unknown field "{field}"' for field in unknown)
                )
            if options.warnings is not None and options.field_validation != "Ignore":
                options.warnings.extend(f'unknown field "{field}"' for field in unknown)
            if rtype.from_crd:
                apply_defaults(schema, obj)
        allocator = self._allocator.preview() if options.dry_run else self._allocator
        errors = prepare(rtype, obj, old=old, allocator=allocator, schema=schema)
        if rtype.key == CRD_KEY and not errors:
            errors = crd_errors(obj, registry=self.registry)
        if errors:
            raise invalid(rtype, str(obj["metadata"].get("name") or ""), errors)

    def _require_namespace(self, namespace: str, rtype: ResourceType, name: str) -> None:
        stored = self._objects.get(NAMESPACE_KEY, {}).get(("", namespace))
        if stored is None:
            namespaces = self.registry.by_plural(group="", version="v1", plural="namespaces")
            assert namespaces is not None
            raise not_found(namespaces, namespace)
        if stored.obj["metadata"].get("deletionTimestamp"):
            raise ApiError(
                403,
                f'{rtype.resource_name()} "{name}" is forbidden: unable to create new content '
                f"in namespace {namespace} because it is being terminated",
                reason="Forbidden",
            )

    def _write_update(
        self,
        rtype: ResourceType,
        current: StoredObject,
        obj: JsonObject,
        *,
        subresource: str | None,
        options: WriteOptions,
    ) -> StoredObject:
        old = current.obj
        if subresource == "status":
            if not rtype.status_subresource:
                raise not_found(rtype, current.name)
            status = obj.get("status")
            obj = json.loads(encode(old))
            if status is None:
                obj.pop("status", None)
            else:
                obj["status"] = status
        elif subresource is not None:
            raise ApiError(404, f"the server could not find the requested resource ({subresource})")
        elif rtype.status_subresource:
            if "status" in old:
                obj["status"] = json.loads(encode(old["status"]))
            else:
                obj.pop("status", None)
        metadata = obj["metadata"]
        for field in (
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ):
            if field in old["metadata"]:
                metadata[field] = old["metadata"][field]
            else:
                metadata.pop(field, None)
        if rtype.namespaced:
            metadata["namespace"] = current.namespace
        metadata["name"] = current.name
        if has_generation(rtype):
            metadata["generation"] = old["metadata"].get("generation", 1)
        else:
            metadata.pop("generation", None)
        self._validate(
            rtype,
            obj,
            old=old,
            options=options,
        )
        if rtype.key == CRD_KEY:
            accept_crd(obj, old=old, now=format_timestamp(self._clock()))
        if has_generation(rtype) and _spec_view(
            obj, status_subresource=rtype.status_subresource
        ) != _spec_view(old, status_subresource=rtype.status_subresource):
            metadata["generation"] = int(metadata["generation"]) + 1
        metadata["resourceVersion"] = str(current.rv)
        if obj == old:
            return current  # a no-op write creates no new resourceVersion, as on a real server
        if options.dry_run:
            return StoredObject(obj)
        if metadata.get("deletionTimestamp") and not metadata.get("finalizers"):
            return self._remove(rtype, StoredObject(obj))
        return self._commit(rtype, obj, previous=current)

    def _next_rv(self) -> int:
        self._rv += 1
        return self._rv

    def _commit(
        self, rtype: ResourceType, obj: JsonObject, *, previous: StoredObject | None
    ) -> StoredObject:
        obj["metadata"]["resourceVersion"] = str(self._next_rv())
        stored = StoredObject(obj)
        collection = self._objects.setdefault(rtype.key, {})
        collection[self._object_key(rtype, stored.namespace, stored.name)] = stored
        event_type = ADDED if previous is None else MODIFIED
        if previous is None and rtype.namespaced:
            self._namespace_sizes[stored.namespace] = (
                self._namespace_sizes.get(stored.namespace, 0) + 1
            )
        self._record(Event(event_type, rtype.key, stored, previous.obj if previous else None))
        if rtype.key == CRD_KEY:
            if previous is not None:
                old_spec = previous.obj["spec"]
                self.registry.unregister(
                    group=old_spec["group"], plural=old_spec["names"]["plural"]
                )
            self.registry.register(resource_type_from_crd(obj))
        return stored

    def _remove(self, rtype: ResourceType, last: StoredObject) -> StoredObject:
        obj = json.loads(last.encoded(last.obj["apiVersion"]))
        obj["metadata"]["resourceVersion"] = str(self._next_rv())
        stored = StoredObject(obj)
        self._objects.get(rtype.key, {}).pop(
            self._object_key(rtype, stored.namespace, stored.name), None
        )
        if rtype.namespaced:
            self._namespace_sizes[stored.namespace] -= 1
        self._record(Event(DELETED, rtype.key, stored, None))
        if rtype.key == CRD_KEY:
            self._drop_crd_kind(obj)
        if rtype.namespaced:
            self._finish_namespace_if_empty(stored.namespace)
        return stored

    def _record(self, event: Event) -> None:
        if len(self._history) >= self._history_size:
            self._compacted_rv = self._history.popleft().rv
        self._history.append(event)
        for watch in list(self._watches.get(event.key, ())):
            watch.offer(event)
            if watch.closed:
                self._watches[event.key].discard(watch)

    # -- namespaces --------------------------------------------------------------------------

    def _namespaced_contents(
        self, namespace: str
    ) -> builtins.list[tuple[ResourceType, StoredObject]]:
        return [
            (rtype, stored)
            for rtype in self.registry
            if rtype.namespaced
            for key, stored in self._objects.get(rtype.key, {}).items()
            if key[0] == namespace
        ]

    def _delete_namespace(self, current: StoredObject) -> tuple[StoredObject, bool]:
        namespace_type = self.registry.by_plural(group="", version="v1", plural="namespaces")
        assert namespace_type is not None
        if not current.obj["metadata"].get("deletionTimestamp"):
            obj = current.copy()
            obj["metadata"]["deletionTimestamp"] = format_timestamp(self._clock())
            obj["metadata"]["deletionGracePeriodSeconds"] = 0
            obj.setdefault("status", {})["phase"] = "Terminating"
            current = self._commit(namespace_type, obj, previous=current)
        for rtype, stored in self._namespaced_contents(current.name):
            if stored.obj["metadata"].get("finalizers"):
                if not stored.obj["metadata"].get("deletionTimestamp"):
                    obj = stored.copy()
                    obj["metadata"]["deletionTimestamp"] = format_timestamp(self._clock())
                    obj["metadata"]["deletionGracePeriodSeconds"] = 0
                    self._commit(rtype, obj, previous=stored)
            else:
                self._remove(rtype, stored)
        self._finish_namespace_if_empty(current.name)
        gone = ("", current.name) not in self._objects.get(NAMESPACE_KEY, {})
        if gone:
            return current, True
        return self.read(namespace_type, namespace=None, name=current.name), False

    def _finish_namespace_if_empty(self, namespace: str) -> None:
        stored = self._objects.get(NAMESPACE_KEY, {}).get(("", namespace))
        if stored is None or not stored.obj["metadata"].get("deletionTimestamp"):
            return
        if not self._namespace_sizes.get(namespace):
            namespace_type = self.registry.by_plural(group="", version="v1", plural="namespaces")
            assert namespace_type is not None
            self._remove(namespace_type, stored)

    # -- CustomResourceDefinitions -----------------------------------------------------------

    def _drop_crd_kind(self, crd: JsonObject) -> None:
        spec = crd["spec"]
        rtype = self.registry.by_plural(
            group=spec["group"],
            version=next(v["name"] for v in spec["versions"] if v.get("storage")),
            plural=spec["names"]["plural"],
        )
        if rtype is None:
            return
        for stored in list(self._objects.get(rtype.key, {}).values()):
            self._remove(rtype, stored)
        self._objects.pop(rtype.key, None)
        for watch in self._watches.pop(rtype.key, set()):
            watch.close()
        self.registry.unregister(group=rtype.group, plural=rtype.plural)
