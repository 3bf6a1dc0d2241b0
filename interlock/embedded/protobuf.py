"""Request bodies in Kubernetes protobuf, for the objects kubectl's generators send that way.

kubectl 1.32 encodes the objects of ``kubectl create namespace|secret|service|ingress`` with
client-go's typed clients, which send ``application/vnd.kubernetes.protobuf`` (no JSON
fallback): without this module ``kubectl create secret generic users --from-file=htpasswd``
fails against the embedded server. The envelope is the 4-byte magic ``k8s\\0`` and a
``runtime.Unknown`` (type meta, then the object's own message). Only the messages of those
commands are described here, field numbers as in ``k8s.io/api``'s ``generated.proto`` (checked
against the bytes kubectl 1.32 sends); a kind not described is refused with 415.

Gogo-protobuf writes every non-pointer field, empty or not; Go's JSON encoding omits empty
``omitempty`` fields. The conversion drops empty strings, zero numbers, false booleans and
empty objects the same way, so the decoded object is what ``kubectl create -f`` would send.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

from interlock.embedded.errors import ApiError

PROTOBUF = "application/vnd.kubernetes.protobuf"
_MAGIC = b"k8s\x00"


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    kind: str
    """string, bytes, int, bool, int_or_string, message, inline, map or bytes_map."""
    message: _Message | None = None
    repeated: bool = False


@dataclass(frozen=True, slots=True)
class _Message:
    fields: dict[int, _Field] = field(default_factory=dict)


def _message(**fields: tuple[int, str] | tuple[int, str, _Message]) -> _Message:
    """A message from ``name=(number, kind)`` or ``name=(number, kind, message)`` pairs."""
    described: dict[int, _Field] = {}
    for name, spec in fields.items():
        number, kind = spec[0], spec[1]
        message = spec[2] if len(spec) == 3 else None
        repeated = kind.startswith("repeated ")
        described[number] = _Field(
            name=name, kind=kind.removeprefix("repeated "), message=message, repeated=repeated
        )
    return _Message(described)


_OBJECT_META = _message(
    name=(1, "string"),
    generateName=(2, "string"),
    namespace=(3, "string"),
    uid=(5, "string"),
    resourceVersion=(6, "string"),
    labels=(11, "map"),
    annotations=(12, "map"),
    finalizers=(14, "repeated string"),
)
_LOAD_BALANCER_STATUS = _message()

_NAMESPACE = _message(
    metadata=(1, "message", _OBJECT_META),
    spec=(2, "message", _message(finalizers=(1, "repeated string"))),
    status=(3, "message", _message(phase=(1, "string"))),
)
_SECRET = _message(
    metadata=(1, "message", _OBJECT_META),
    data=(2, "bytes_map"),
    type=(3, "string"),
    stringData=(4, "map"),
)
_SERVICE_PORT = _message(
    name=(1, "string"),
    protocol=(2, "string"),
    port=(3, "int"),
    targetPort=(4, "int_or_string"),
    nodePort=(5, "int"),
)
_SERVICE = _message(
    metadata=(1, "message", _OBJECT_META),
    spec=(
        2,
        "message",
        _message(
            ports=(1, "repeated message", _SERVICE_PORT),
            selector=(2, "map"),
            clusterIP=(3, "string"),
            type=(4, "string"),
            externalIPs=(5, "repeated string"),
            sessionAffinity=(7, "string"),
            loadBalancerIP=(8, "string"),
            externalName=(10, "string"),
            externalTrafficPolicy=(11, "string"),
            healthCheckNodePort=(12, "int"),
            publishNotReadyAddresses=(13, "bool"),
        ),
    ),
    status=(3, "message", _message(loadBalancer=(1, "message", _LOAD_BALANCER_STATUS))),
)
_INGRESS_BACKEND = _message(
    resource=(
        3,
        "message",
        _message(apiGroup=(1, "string"), kind=(2, "string"), name=(3, "string")),
    ),
    service=(
        4,
        "message",
        _message(
            name=(1, "string"),
            port=(2, "message", _message(name=(1, "string"), number=(2, "int"))),
        ),
    ),
)
_INGRESS = _message(
    metadata=(1, "message", _OBJECT_META),
    spec=(
        2,
        "message",
        _message(
            defaultBackend=(1, "message", _INGRESS_BACKEND),
            tls=(
                2,
                "repeated message",
                _message(hosts=(1, "repeated string"), secretName=(2, "string")),
            ),
            rules=(
                3,
                "repeated message",
                _message(
                    host=(1, "string"),
                    # IngressRuleValue is inlined in JSON: its "http" sits on the rule itself.
                    ingressRuleValue=(
                        2,
                        "inline",
                        _message(
                            http=(
                                1,
                                "message",
                                _message(
                                    paths=(
                                        1,
                                        "repeated message",
                                        _message(
                                            path=(1, "string"),
                                            backend=(2, "message", _INGRESS_BACKEND),
                                            pathType=(3, "string"),
                                        ),
                                    )
                                ),
                            )
                        ),
                    ),
                ),
            ),
            ingressClassName=(4, "string"),
        ),
    ),
    status=(3, "message", _message(loadBalancer=(1, "message", _LOAD_BALANCER_STATUS))),
)

_KINDS: dict[tuple[str, str], _Message] = {
    ("v1", "Namespace"): _NAMESPACE,
    ("v1", "Secret"): _SECRET,
    ("v1", "Service"): _SERVICE,
    ("networking.k8s.io/v1", "Ingress"): _INGRESS,
}
_TYPE_META = _message(apiVersion=(1, "string"), kind=(2, "string"))
_UNKNOWN = _message(
    typeMeta=(1, "message", _TYPE_META),
    raw=(2, "bytes"),
    contentEncoding=(3, "string"),
    contentType=(4, "string"),
)


class _Malformed(ValueError):
    pass


def _varint(data: bytes, position: int) -> tuple[int, int]:
    result, shift = 0, 0
    while True:
        if position >= len(data):
            raise _Malformed("truncated varint")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, position
        shift += 7
        if shift > 63:
            raise _Malformed("varint too long")


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) pairs: an int for varints, bytes for length-delimited fields."""
    fields: list[tuple[int, int | bytes]] = []
    position = 0
    while position < len(data):
        key, position = _varint(data, position)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value, position = _varint(data, position)
            fields.append((number, value))
        elif wire_type == 2:
            length, position = _varint(data, position)
            if position + length > len(data):
                raise _Malformed("truncated field")
            fields.append((number, data[position : position + length]))
            position += length
        elif wire_type == 1:
            position += 8
        elif wire_type == 5:
            position += 4
        else:
            raise _Malformed(f"unsupported wire type {wire_type}")
    return fields


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _scalar(kind: str, value: int | bytes) -> Any:
    if kind == "int":
        return _signed(value) if isinstance(value, int) else None
    if kind == "bool":
        return bool(value) if isinstance(value, int) else None
    if not isinstance(value, bytes):
        return None
    if kind == "string":
        return value.decode()
    if kind == "bytes":
        return value
    if kind == "int_or_string":
        parts = dict(_fields(value))
        if parts.get(1, 0) == 1:
            text = parts.get(3, b"")
            return text.decode() if isinstance(text, bytes) else None
        number = parts.get(2, 0)
        return _signed(number) if isinstance(number, int) else None
    raise _Malformed(f"unknown field kind {kind}")


def _map_entry(value: int | bytes, *, as_bytes: bool) -> tuple[str, Any]:
    if not isinstance(value, bytes):
        raise _Malformed("map entry is not a message")
    entry = dict(_fields(value))
    key, item = entry.get(1, b""), entry.get(2, b"")
    if not isinstance(key, bytes) or not isinstance(item, bytes):
        raise _Malformed("map entry is not two strings")
    return key.decode(), (base64.b64encode(item).decode() if as_bytes else item.decode())


def _empty(value: Any) -> bool:
    return (
        value is None or value == "" or value == 0 or value is False or value == {} or value == []
    )


def _decode(message: _Message, data: bytes) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for number, value in _fields(data):
        described = message.fields.get(number)
        if described is None:
            continue
        if described.kind in ("map", "bytes_map"):
            key, item = _map_entry(value, as_bytes=described.kind == "bytes_map")
            result.setdefault(described.name, {})[key] = item
            continue
        if described.kind in ("message", "inline"):
            if not isinstance(value, bytes) or described.message is None:
                raise _Malformed(f"{described.name} is not a message")
            decoded: Any = _decode(described.message, value)
            if described.kind == "inline":
                result.update(decoded)
                continue
        else:
            decoded = _scalar(described.kind, value)
        if described.repeated:
            result.setdefault(described.name, []).append(decoded)
        elif not _empty(decoded):
            result[described.name] = decoded
    return result


def decode_object(data: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf-encoded object, or a 415 ApiError if it cannot be read."""
    if not data.startswith(_MAGIC):
        raise ApiError(415, "the protobuf body does not start with the Kubernetes magic number")
    try:
        envelope = _decode(_UNKNOWN, data[len(_MAGIC) :])
        type_meta = envelope.get("typeMeta") or {}
        api_version, kind = type_meta.get("apiVersion", ""), type_meta.get("kind", "")
        message = _KINDS.get((api_version, kind))
        if message is None:
            raise ApiError(
                415,
                f"{kind or 'this object'} ({api_version}) cannot be sent as protobuf to the "
                "embedded API server; send it as JSON (kubectl create -f, kubectl apply -f)",
            )
        raw = envelope.get("raw", b"")
        obj = _decode(message, raw if isinstance(raw, bytes) else b"")
    except (_Malformed, UnicodeDecodeError) as error:
        raise ApiError(415, f"the protobuf body cannot be read: {error}") from None
    return {"apiVersion": api_version, "kind": kind, **obj}
