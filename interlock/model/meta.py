"""Object metadata shared by every Kubernetes input, and the error type for bad input.

Every parse of a Kubernetes object goes through :func:`parse_object`, so that a bad value is
always reported the same way: the kind, the object's ``namespace/name`` and the field path
(``HTTPRoute default/web: spec.rules[0].backendRefs[1].weight: ...``). Without this, pydantic's
own messages name neither the object nor the field in the shape a Kubernetes user knows.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from interlock.model.validation import describe


class KubeModel(BaseModel):
    """Base for every parsed input: unknown fields ignored, immutable, camelCase aliases.

    ``defer_build``: a model's validator is built when it first parses, not at import, so the
    kinds a controller is not configured for (Gateway, ingress-nginx, ModuleSet...) cost no
    memory (about 1.2 MiB of the import, 2 MiB at ready: ``benchmarks/rest_memory.py``); the
    first parse of each kind pays its share once (all 122 models: about 50 ms in all).

    ``regex_engine="python-re"``: a field's ``pattern`` is checked with Python's ``re`` (already
    loaded), not pydantic-core's Rust regex engine, whose compiler and matcher are 0.4 MiB of
    pydantic-core's code made resident by the first HTTPRoute parsed (``docs/benchmarks.md``,
    "What a few dozen routes cost"). Python's ``$`` also matches before a final newline: a
    pattern ends with ``\\Z`` (model/gateway.py).
    """

    model_config = ConfigDict(
        extra="ignore",
        frozen=True,
        populate_by_name=True,
        defer_build=True,
        regex_engine="python-re",
    )


class ObjectMeta(KubeModel):
    name: str
    namespace: str = ""
    uid: str = ""
    resource_version: str = Field("", alias="resourceVersion")
    generation: int = 0
    creation_timestamp: datetime | None = Field(None, alias="creationTimestamp")
    deletion_timestamp: datetime | None = Field(None, alias="deletionTimestamp")
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    """Without ``kubectl.kubernetes.io/last-applied-configuration`` (:data:`LAST_APPLIED`)."""

    @field_validator("annotations", mode="after")
    @classmethod
    def _without_last_applied(cls, annotations: dict[str, str]) -> dict[str, str]:
        if LAST_APPLIED in annotations:
            return {name: value for name, value in annotations.items() if name != LAST_APPLIED}
        return annotations


LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
"""The annotation ``kubectl apply`` writes on every object it applies: the whole object as JSON
again. Nothing here reads it, and parsed objects are kept for as long as the controller runs, so
it is dropped at parse time (with the rest of the annotations usually empty then, about 1 KiB of
each Service+route pair applied by kubectl)."""


@dataclass(frozen=True, slots=True)
class ObjectKey:
    """What identifies an object of a known kind: its namespace ('' if cluster-scoped) and name.

    A slotted dataclass, not a model: the actors key every dict by it (a route's Services, a
    directory's objects, what each route published), and a pydantic instance of two strings
    cost about 500 bytes where this costs 48.
    """

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


class KubeObject(KubeModel):
    """A namespaced Kubernetes object as parsed: its metadata, and the key that identifies it."""

    metadata: ObjectMeta

    @property
    def key(self) -> ObjectKey:
        return ObjectKey(namespace=self.metadata.namespace, name=self.metadata.name)


class InvalidObject(ValueError):
    """A Kubernetes object that cannot be used, with the object and the field that is wrong."""

    def __init__(self, kind: str, key: str, field: str, reason: str) -> None:
        self.kind = kind
        self.key = key
        self.field = field
        self.reason = reason
        where = f"{field}: " if field else ""
        super().__init__(f"{kind} {key}: {where}{reason}")


M = TypeVar("M", bound=BaseModel)


def object_key_of(raw: dict[str, Any]) -> str:
    """``namespace/name`` (or ``name``) of a raw object, for error messages; never raises."""
    meta = raw.get("metadata") if isinstance(raw, dict) else None
    if not isinstance(meta, dict):
        return "<unnamed>"
    name = meta.get("name") or "<unnamed>"
    namespace = meta.get("namespace")
    return f"{namespace}/{name}" if namespace else str(name)


def namespace_labels(raw: dict[str, Any]) -> dict[str, str]:
    """A Namespace's labels (what a Gateway listener's ``allowedRoutes`` selector reads);
    never raises: an object without labels has none."""
    meta = raw.get("metadata")
    found = meta.get("labels") if isinstance(meta, dict) else None
    return dict(found) if isinstance(found, dict) else {}


def _field_path(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


class _EmptyDict(dict[Any, Any]):
    """An empty dict that cannot be filled: the one every frozen model's empty dict field holds."""

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("a parsed object's empty dict is shared: copy it to change it")

    __setitem__ = __delitem__ = setdefault = update = __ior__ = _refuse


EMPTY_DICT: dict[Any, Any] = _EmptyDict()
"""Held instead of a fresh empty dict by every frozen model's empty dict field (an object's
labels and annotations, mostly): 64 bytes each, four times per Service+route pair."""


_FIELDS_SETS: dict[frozenset[str], set[str]] = {}
"""One ``__pydantic_fields_set__`` per distinct set of field names (a few dozen in all)."""


def share_repeated_parts(model: M) -> M:
    """``model`` with what its frozen parts repeat shared instead of copied, in place.

    The controller keeps a parsed Service and route per object for as long as it runs, and
    pydantic gives every model instance its own ``__pydantic_fields_set__`` (216 bytes, 728
    with more than four names): at 10,000 Services and routes that was about 4.5 KiB per pair,
    more than the fields themselves. A frozen model's set never changes (``model_copy`` copies
    it before adding names), so instances with the same names share one. Frozen parts equal to
    one parsed recently (a Service's ``http``/80/TCP port, an empty status, a rule's default
    ``/`` match: :data:`_RECENT_PARTS`) become that one: immutable and compared by value, they
    cannot tell.
    Strings are interned, so the namespace, group and kind every object repeats are kept once,
    and empty dicts (no labels, no annotations) are :data:`EMPTY_DICT`.
    """
    _share(model)
    return model


def _share(value: Any) -> Any:
    """``value`` with its parts shared; a frozen, hashable model may come back as an equal one."""
    kind = _kind(type(value))
    if kind:
        fields = value.__dict__
        for name, item in fields.items():
            item_type = type(item)
            if item_type is str:
                if name not in _UNIQUE_STRINGS:
                    fields[name] = sys.intern(item)
            elif item_type is tuple or item_type is list or _kind(item_type):
                fields[name] = _share_part(item)
            elif item_type is dict and not item and kind == _FROZEN:
                fields[name] = EMPTY_DICT
        if kind == _FROZEN:
            names = value.__pydantic_fields_set__
            key = frozenset(names)
            shared = _FIELDS_SETS.get(key)
            if shared is None:
                shared = _FIELDS_SETS[key] = set(key)
            object.__setattr__(value, "__pydantic_fields_set__", shared)
    elif type(value) is list:
        value[:] = [_share_part(item) for item in value]
    return value


def _share_part(value: Any) -> Any:
    value_type = type(value)
    if value_type is tuple:
        items = tuple(_share_part(item) for item in value)
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    _share(value)
    if _kind(value_type) == _FROZEN and value_type not in _UNHASHABLE:
        try:
            key = _part_key(value)
            shared = _RECENT_PARTS.get(key)
        except TypeError:
            # Holds something unhashable (labels, a dict): not shared, nor tried again for
            # its class, whose instances hold the same kinds of field.
            _UNHASHABLE.add(value_type)
            return value
        if shared is not None:
            _RECENT_PARTS.move_to_end(key)  # now the most recent
            return shared
        _RECENT_PARTS[key] = value
        if len(_RECENT_PARTS) > RECENT_PARTS_LIMIT:
            _RECENT_PARTS.popitem(last=False)
    return value


_NOT_A_MODEL, _MODEL, _FROZEN = 0, 1, 2
_KINDS: dict[type, int] = {}
"""Per type: not a model, a model, or a frozen model — found once per type. ``isinstance`` of a
pydantic model class costs a failed attribute lookup (an exception) for every value that is not
one, and sharing looks at every field of every parsed object."""


_UNHASHABLE: set[type] = set()
"""Frozen model classes whose parts hold something unhashable: never shared by value."""


def _kind(cls: type) -> int:
    kind = _KINDS.get(cls)
    if kind is None:
        if not issubclass(cls, BaseModel):
            kind = _NOT_A_MODEL
        else:
            kind = _FROZEN if cls.model_config.get("frozen") else _MODEL
        _KINDS[cls] = kind
    return kind


def _part_key(value: BaseModel) -> tuple[Any, ...]:
    """What a frozen part equals another by: its class and field values, as pydantic compares
    them (``extra="ignore"`` leaves no extras) — except that a part it holds counts by identity
    (``id``), which hashes in one step where pydantic's hash walks the part's own fields again
    at every level. Its parts were shared first, so equal parts are mostly one object already;
    and an id in a key cannot name another object while the entry lives: the entry's value
    holds that part."""
    return (
        type(value),
        *[
            id(item)
            if _kind(type(item))
            else tuple([id(x) if _kind(type(x)) else x for x in item])
            if type(item) is tuple
            else item
            for item in value.__dict__.values()
        ],
    )


_UNIQUE_STRINGS = frozenset({"uid", "resource_version", "cluster_ip"})
"""Fields whose value no other object repeats: interning them would only grow the table."""

RECENT_PARTS_LIMIT = 512
"""How many recently parsed frozen parts :data:`_RECENT_PARTS` keeps."""

_RECENT_PARTS: OrderedDict[tuple[Any, ...], BaseModel] = OrderedDict()
"""The frozen parts parsed most recently, by :func:`_part_key`, the least recently used first.

Bounded, and holding its parts: what repeats across objects (a Service's ``http``/80/TCP port,
an empty status, a rule's default ``/`` match) is met again long before it would be dropped and
stays one object, while a part no other object repeats (a route's rules, a Service's spec with
its cluster IP) passes through and goes. The weak table by value this replaces kept an entry
(its key tuple and a weak reference, about 180 bytes) for every distinct part alive, shared or
not: about 1 KiB of each Service+route pair, mostly for parts no other object repeats. A table
keyed by the part itself would keep every part ever parsed (the soak's +25 MiB/hour:
docs/reliability.md, "Soak")."""


def parse_object(model: type[M], kind: str, raw: dict[str, Any]) -> M:
    """Parse ``raw`` into ``model``; on failure raise :class:`InvalidObject` naming the field.

    Only the first error is reported: it is the one a user fixes first, and one clear line reads
    better in an Event or a status condition than pydantic's full dump.
    """
    try:
        return share_repeated_parts(model.model_validate(raw))
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        raise InvalidObject(
            kind, object_key_of(raw), _field_path(tuple(first["loc"])), describe(first)
        ) from None


def require_namespace(kind: str, meta: ObjectMeta) -> None:
    """Raise :class:`InvalidObject` when a namespaced object arrived without its namespace.

    The API server always fills it in; a hand-written manifest (embedded mode) may not, and an
    empty namespace would silently make the object unreachable by every namespaced lookup.
    """
    if not meta.namespace:
        raise InvalidObject(kind, meta.name, "metadata.namespace", "is required")


K = TypeVar("K", bound=KubeObject)


def parse_namespaced(model: type[K], kind: str, raw: dict[str, Any]) -> K:
    """:func:`parse_object`, then :func:`require_namespace`: a namespaced kind from API JSON,
    raising :class:`InvalidObject` naming the bad field."""
    obj = parse_object(model, kind, raw)
    require_namespace(kind, obj.metadata)
    return obj


GOING_AWAY_KINDS = frozenset({"HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute", "Ingress"})
"""Kinds whose objects stop applying once their deletion has begun (see :func:`going_away`)."""


def going_away(kind: str, raw: dict[str, Any]) -> bool:
    """Whether ``raw`` is a route or Ingress whose deletion has begun (``deletionTimestamp`` set,
    a finalizer still holding it): it is treated as deleted.

    ``kubectl delete`` has been answered; the user meant it gone, and whatever holds the
    finalizer (a cleanup controller, a stuck webhook) may take minutes or forever. Serving it
    meanwhile would keep traffic on a route the user removed. ngrok's ingress controller stops
    reconciling a terminating Ingress and drops it from its store the same way. Services,
    ModuleSets and Secrets are not in this list: a Service held by its load-balancer cleanup
    finalizer still has endpoints, and a route or Ingress still naming a ModuleSet or Secret
    being deleted keeps its modules until they are really gone (fail closed).
    """
    if kind not in GOING_AWAY_KINDS:
        return False
    meta = raw.get("metadata")
    return isinstance(meta, dict) and bool(meta.get("deletionTimestamp"))
