"""An outbound policy as JSON and back, whole: what a controller pushes to its edge workers.

The policy API's JSON (:mod:`interlock.api.policy_json`) is a contract for mesh clients and
leaves out what only a data plane needs (annotated retries and timeouts, a rule's
distribution, gRPC matches in gRPC terms). An ``interlock edge`` worker must route exactly as
the controller's own edge does, so it needs the :class:`~interlock.model.outbound.OutboundPolicy`
itself: :func:`encode_policy` writes every field, and :func:`decode_policy` gives back an equal
object, which the worker's engine reads through the same code path as the controller's.

Each object is written as ``{"$": TYPE, ...}``. Only the types listed here are read back (the
policy's own dataclasses, built with their fields; the Gateway API models, validated by
pydantic): the data never names code to run, unlike a pickle. A value of any other type (a
Gateway backend's TLS settings, which carry Secret data and never reach the edge's policies)
cannot be written: :func:`encode_policy` raises ``TypeError`` naming it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel, ValidationError

from interlock.model.gateway import (
    HTTPRouteFilter,
    HTTPRouteMatch,
    HTTPRouteRetry,
    HTTPRouteTimeouts,
)
from interlock.model.grpc_route import GRPCRouteFilter, GRPCRouteMatch
from interlock.model.outbound import (
    Backend,
    FailureInjector,
    OutboundPolicy,
    OutboundRoute,
    ResolvedRule,
)
from interlock.model.policy_annotations import FailureAccrual, Retry, StatusRange

_DATACLASSES: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        OutboundPolicy,
        OutboundRoute,
        ResolvedRule,
        Backend,
        FailureInjector,
        Retry,
        StatusRange,
        FailureAccrual,
    )
}
_MODELS: dict[str, type[BaseModel]] = {
    cls.__name__: cls
    for cls in (
        HTTPRouteMatch,
        HTTPRouteFilter,
        HTTPRouteTimeouts,
        HTTPRouteRetry,
        GRPCRouteMatch,
        GRPCRouteFilter,
    )
}
_MICROSECOND = timedelta(microseconds=1)


def encode_policy(policy: OutboundPolicy) -> dict[str, Any]:
    """``policy`` as JSON-ready values; ``TypeError`` for a value no worker can be sent."""
    encoded = _encode(policy)
    assert isinstance(encoded, dict)
    return encoded


def decode_policy(data: object) -> OutboundPolicy:
    """The policy :func:`encode_policy` wrote; ``ValueError`` naming what is wrong."""
    policy = _decode(data, "policy")
    if not isinstance(policy, OutboundPolicy):
        raise ValueError("policy: an OutboundPolicy object is required")
    return policy


def _encode(value: object) -> object:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, tuple):
        return [_encode(item) for item in value]
    if isinstance(value, datetime):
        return {"$": "datetime", "iso": value.isoformat()}
    if isinstance(value, timedelta):
        return {"$": "timedelta", "us": value // _MICROSECOND}
    name = type(value).__name__
    if isinstance(value, BaseModel) and _MODELS.get(name) is type(value):
        dumped = value.model_dump(mode="json", by_alias=True, exclude_unset=True)
        return {"$": name, "model": dumped}
    if _DATACLASSES.get(name) is type(value):
        fields = {
            field.name: _encode(getattr(value, field.name))
            for field in dataclasses.fields(value)  # type: ignore[arg-type]
        }
        return {"$": name, **fields}
    raise TypeError(f"a policy cannot carry a {name} to an edge worker")


def _decode(data: object, where: str) -> object:
    if data is None or isinstance(data, bool | int | float | str):
        return data
    if isinstance(data, list):
        return tuple(_decode(item, f"{where}[{i}]") for i, item in enumerate(data))
    if not isinstance(data, Mapping):
        raise ValueError(f"{where}: unexpected {type(data).__name__}")
    kind = data.get("$")
    try:
        if kind == "datetime":
            return datetime.fromisoformat(str(data["iso"]))
        if kind == "timedelta":
            return timedelta(microseconds=int(data["us"]))
        if isinstance(kind, str) and kind in _MODELS:
            return _MODELS[kind].model_validate(data["model"])
        if isinstance(kind, str) and kind in _DATACLASSES:
            fields = {
                name: _decode(value, f"{where}.{name}")
                for name, value in data.items()
                if name != "$"
            }
            return _DATACLASSES[kind](**fields)
    except (KeyError, TypeError, ValidationError) as error:
        raise ValueError(f"{where}: {kind} cannot be read ({type(error).__name__})") from None
    raise ValueError(f"{where}: unknown type {kind!r}")
