"""API errors and the ``Status`` bodies that carry them.

Clients branch on the HTTP code *and* on ``reason`` (kubectl prints ``message``; client-go's
``IsNotFound``/``IsConflict``/``IsAlreadyExists`` read ``reason``; kubernetes-asyncio's watch
reads ``code``, ``reason`` and ``message`` of an ERROR event). Every error the server produces is
an :class:`ApiError`, so every error body has all of them, shaped like kube-apiserver's.
"""

from __future__ import annotations

from typing import Any

from interlock.embedded.registry import ResourceType

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class ApiError(Exception):
    """An error answer of the API server: HTTP code, machine reason, human message."""

    def __init__(
        self,
        code: int,
        message: str,
        *,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or _REASONS.get(code, "Unknown")
        self.details = details

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def _details(rtype: ResourceType, name: str) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name, "kind": rtype.plural}
    if rtype.group:
        details["group"] = rtype.group
    return details


def not_found(rtype: ResourceType, name: str) -> ApiError:
    return ApiError(
        404, f'{rtype.resource_name()} "{name}" not found', details=_details(rtype, name)
    )


def already_exists(rtype: ResourceType, name: str) -> ApiError:
    return ApiError(
        409,
        f'{rtype.resource_name()} "{name}" already exists',
        reason="AlreadyExists",
        details=_details(rtype, name),
    )


def conflict(rtype: ResourceType, name: str, why: str, *, by_kind: bool = False) -> ApiError:
    """409 Conflict; ``by_kind``: details name the kind, as a failed delete precondition's do."""
    details = _details(rtype, name)
    if by_kind:
        details["kind"] = rtype.kind
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {rtype.resource_name()} "{name}": {why}',
        details=details,
    )


def stale_resource_version(rtype: ResourceType, name: str) -> ApiError:
    return conflict(
        rtype,
        name,
        "the object has been modified; please apply your changes to the latest version "
        "and try again",
    )


class FieldError:
    """One invalid field, as listed in a 422's ``details.causes``."""

    __slots__ = ("field", "message", "reason")

    def __init__(self, field: str, message: str, *, reason: str = "FieldValueInvalid") -> None:
        self.field = field
        self.message = message
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


def invalid_value(field: str, value: Any, why: str) -> FieldError:
    """``field: Invalid value: "value": why`` — never for Secret data (it would show it)."""
    shown = f'"{value}"' if isinstance(value, str) else repr(value)
    return FieldError(field, f"Invalid value: {shown}: {why}")


def required_value(field: str) -> FieldError:
    return FieldError(field, "Required value", reason="FieldValueRequired")


def invalid(rtype: ResourceType, name: str, errors: list[FieldError]) -> ApiError:
    """422 Invalid naming the kind, the object and every bad field."""
    listed = ", ".join(str(e) for e in errors)
    message = f'{rtype.kind} "{name}" is invalid: '
    message += f"[{listed}]" if len(errors) > 1 else listed
    details: dict[str, Any] = {"kind": rtype.kind}
    if name:
        details["name"] = name
    details["causes"] = [
        {"reason": e.reason, "message": e.message, "field": e.field} for e in errors
    ]
    if rtype.group:
        details["group"] = rtype.group
    return ApiError(422, message, details=details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, message)
