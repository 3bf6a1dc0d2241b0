"""Linkerd's policy annotations on Services and routes: retries, timeouts, failure accrual.

Linkerd users configure what the Gateway API has no field for (or had none for until recently)
with annotations: ``retry.linkerd.io/*`` and ``timeout.linkerd.io/*`` on a Service or a route,
``balancer.linkerd.io/failure-accrual*`` and ``config.linkerd.io/opaque-ports`` on a Service.
interlock reads the same annotations with Linkerd's meaning and defaults, so a cluster set up
for Linkerd gets the same policy from interlock. Parsing is pure and never raises: a malformed
value is left out and reported as an :class:`AnnotationProblem` naming the object and the
annotation, and everything else still applies (a typo in one knob must not drop the route).

Precedence, one rule everywhere (``docs/policy-api.md`` "Timeouts and retries"): a Gateway API
field on the rule (``rules[].timeouts.*``, ``rules[].retry``) beats an annotation on the route,
which beats an annotation on the Service. Timeouts merge per key (``request``, ``response``,
``idle``); a retry is taken whole from the first level that configures one, because a retry
condition from one place and a limit from another would be a policy nobody wrote.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, Literal

from interlock.model.durations import InvalidDuration, parse_duration

RETRY_HTTP = "retry.linkerd.io/http"
RETRY_GRPC = "retry.linkerd.io/grpc"
RETRY_LIMIT = "retry.linkerd.io/limit"
RETRY_TIMEOUT = "retry.linkerd.io/timeout"
TIMEOUT_REQUEST = "timeout.linkerd.io/request"
TIMEOUT_RESPONSE = "timeout.linkerd.io/response"
TIMEOUT_IDLE = "timeout.linkerd.io/idle"
FAILURE_ACCRUAL = "balancer.linkerd.io/failure-accrual"
FAILURE_ACCRUAL_MAX_FAILURES = "balancer.linkerd.io/failure-accrual-consecutive-max-failures"
FAILURE_ACCRUAL_MIN_PENALTY = "balancer.linkerd.io/failure-accrual-consecutive-min-penalty"
FAILURE_ACCRUAL_MAX_PENALTY = "balancer.linkerd.io/failure-accrual-consecutive-max-penalty"
FAILURE_ACCRUAL_JITTER = "balancer.linkerd.io/failure-accrual-consecutive-jitter-ratio"
OPAQUE_PORTS = "config.linkerd.io/opaque-ports"

RETRY_ANNOTATIONS = (RETRY_HTTP, RETRY_GRPC, RETRY_LIMIT, RETRY_TIMEOUT)
POLICY_ANNOTATIONS = (
    *RETRY_ANNOTATIONS,
    TIMEOUT_REQUEST,
    TIMEOUT_RESPONSE,
    TIMEOUT_IDLE,
    FAILURE_ACCRUAL,
    FAILURE_ACCRUAL_MAX_FAILURES,
    FAILURE_ACCRUAL_MIN_PENALTY,
    FAILURE_ACCRUAL_MAX_PENALTY,
    FAILURE_ACCRUAL_JITTER,
    OPAQUE_PORTS,
)
"""Every annotation this module reads: a change to one of them changes policies."""


def policy_annotations_of(annotations: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The policy annotations among ``annotations``, in a fixed order (for change detection)."""
    return tuple((key, annotations[key]) for key in POLICY_ANNOTATIONS if key in annotations)


DEFAULT_RETRY_LIMIT = 1
"""Linkerd's retry limit when a retry condition is annotated without ``retry.linkerd.io/limit``."""

# Linkerd's defaults for consecutive failure accrual.
DEFAULT_MAX_FAILURES = 7
DEFAULT_MIN_PENALTY = timedelta(seconds=1)
DEFAULT_MAX_PENALTY = timedelta(minutes=1)
DEFAULT_JITTER_RATIO = 0.5

GRPC_RETRY_CODES = (
    "cancelled",
    "deadline-exceeded",
    "internal",
    "resource-exhausted",
    "unavailable",
)
"""The gRPC status codes ``retry.linkerd.io/grpc`` may name (Linkerd's retryable set)."""

Protocol = Literal["detect", "http1", "http2", "grpc", "tls", "opaque"]
"""How a data plane treats a Service port's traffic (``grpc``, ``tls``: set by the routes that
attach, never by the Service alone)."""

_APP_PROTOCOLS: dict[str, Protocol] = {
    "http": "http1",
    "kubernetes.io/h2c": "http2",
    "linkerd.io/opaque": "opaque",
}


@dataclass(frozen=True, slots=True)
class AnnotationProblem:
    """A malformed annotation value; ``message`` names the object, the annotation and the value."""

    annotation: str
    message: str


def format_duration(value: timedelta) -> str:
    """A duration in the Gateway API's format (``1h30m``, ``1500ms``): how the policy serves
    every duration, whether a field or an annotation gave it."""
    millis = round(value.total_seconds() * 1000)
    if millis == 0:
        return "0s"
    parts: list[str] = []
    for unit, size in (("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1)):
        count, millis = divmod(millis, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


@dataclass(frozen=True, slots=True, kw_only=True)
class StatusRange:
    """HTTP response statuses ``min``..``max`` (inclusive) that are retried."""

    min: int
    max: int

    def to_json(self) -> dict[str, int]:
        return {"min": self.min, "max": self.max}


@dataclass(frozen=True, slots=True, kw_only=True)
class Retry:
    """What to retry and how often, from one level of configuration (see the module doc)."""

    source: Literal["rule", "route", "service"]
    codes: tuple[int, ...] = ()
    status_ranges: tuple[StatusRange, ...] = ()
    grpc_codes: tuple[str, ...] = ()
    attempts: int | None = None
    backoff: str | None = None
    timeout: str | None = None

    @property
    def retries_failures(self) -> bool:
        """Whether a try that got no answer — the backend could not be reached, reset the
        exchange, or let its per-try timeout pass — is retried whatever ``codes`` lists: for
        the Gateway API's ``rules[].retry`` (``source`` ``rule``), whose spec says
        implementations SHOULD retry on connection errors (disconnect, reset, timeout, TCP
        failure) once a retry is configured, and waits its backoff "after timing out"; not for
        Linkerd's annotations, which retry the statuses they list."""
        return self.source == "rule"

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "codes": list(self.codes),
            "statusRanges": [r.to_json() for r in self.status_ranges],
            "grpcCodes": list(self.grpc_codes),
            "attempts": self.attempts,
            "backoff": self.backoff,
            "timeout": self.timeout,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyAnnotations:
    """The retry and timeout annotations of one object (a Service or a route), parsed."""

    retry: Retry | None = None
    timeouts: tuple[tuple[str, str], ...] = ()
    """``(request|response|idle, duration)`` pairs, only the keys annotated."""
    problems: tuple[AnnotationProblem, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class FailureAccrual:
    """Consecutive-failures accrual (Linkerd): after ``max_failures`` failures in a row an
    endpoint is taken out of balancing for a penalty growing from ``min_penalty`` to
    ``max_penalty``, jittered by ``jitter_ratio``."""

    max_failures: int = DEFAULT_MAX_FAILURES
    min_penalty: timedelta = DEFAULT_MIN_PENALTY
    max_penalty: timedelta = DEFAULT_MAX_PENALTY
    jitter_ratio: float = DEFAULT_JITTER_RATIO

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "consecutive",
            "maxFailures": self.max_failures,
            "minPenalty": format_duration(self.min_penalty),
            "maxPenalty": format_duration(self.max_penalty),
            "jitterRatio": self.jitter_ratio,
        }


def _problem(owner: str, annotation: str, value: str, why: str) -> AnnotationProblem:
    return AnnotationProblem(annotation, f"{owner}: annotation {annotation}: {value!r} {why}")


def _duration(
    annotations: Mapping[str, str], key: str, owner: str, problems: list[AnnotationProblem]
) -> timedelta | None:
    value = annotations.get(key)
    if value is None:
        return None
    try:
        return parse_duration(value.strip())
    except InvalidDuration:
        problems.append(_problem(owner, key, value, "is not a duration (e.g. 500ms, 10s, 1m)"))
        return None


def _status_ranges(value: str) -> tuple[StatusRange, ...] | None:
    ranges: list[StatusRange] = []
    for item in (part.strip() for part in value.split(",")):
        if item == "gateway-error":
            ranges.append(StatusRange(min=502, max=504))
        elif len(item) == 3 and item[0] in "45" and item[1:] == "xx":
            base = int(item[0]) * 100
            ranges.append(StatusRange(min=base, max=base + 99))
        elif "-" in item:
            low, _, high = item.partition("-")
            if not (low.isdigit() and high.isdigit()):
                return None
            ranges.append(StatusRange(min=int(low), max=int(high)))
        elif item.isdigit():
            ranges.append(StatusRange(min=int(item), max=int(item)))
        else:
            return None
    if not ranges or any(not 100 <= r.min <= r.max <= 599 for r in ranges):
        return None
    return tuple(ranges)


def parse_policy_annotations(
    annotations: Mapping[str, str], *, owner: str, source: Literal["route", "service"]
) -> PolicyAnnotations:
    """The retry and timeout annotations of ``owner`` (``"Service shop/web"``)."""
    problems: list[AnnotationProblem] = []
    timeouts: dict[str, str] = {}
    for key, name in (
        (TIMEOUT_REQUEST, "request"),
        (TIMEOUT_RESPONSE, "response"),
        (TIMEOUT_IDLE, "idle"),
    ):
        value = _duration(annotations, key, owner, problems)
        if value is not None:
            timeouts[name] = format_duration(value)

    status_ranges: tuple[StatusRange, ...] = ()
    http = annotations.get(RETRY_HTTP)
    if http is not None:
        parsed = _status_ranges(http)
        if parsed is None:
            problems.append(
                _problem(
                    owner,
                    RETRY_HTTP,
                    http,
                    "is not a list of statuses (e.g. 5xx, gateway-error, 500-504, 429)",
                )
            )
        else:
            status_ranges = parsed
    grpc_codes: tuple[str, ...] = ()
    grpc = annotations.get(RETRY_GRPC)
    if grpc is not None:
        names = tuple(part.strip().lower() for part in grpc.split(",") if part.strip())
        unknown = [n for n in names if n not in GRPC_RETRY_CODES]
        if unknown or not names:
            problems.append(
                _problem(owner, RETRY_GRPC, grpc, f"names none of {', '.join(GRPC_RETRY_CODES)}")
            )
        else:
            grpc_codes = names
    limit: int | None = None
    limit_text = annotations.get(RETRY_LIMIT)
    if limit_text is not None:
        if limit_text.strip().isdigit():
            limit = int(limit_text.strip())
        else:
            problems.append(_problem(owner, RETRY_LIMIT, limit_text, "is not a whole number"))
    per_try = _duration(annotations, RETRY_TIMEOUT, owner, problems)

    retry: Retry | None = None
    if status_ranges or grpc_codes or limit is not None or per_try is not None:
        retry = Retry(
            source=source,
            status_ranges=status_ranges,
            grpc_codes=grpc_codes,
            attempts=DEFAULT_RETRY_LIMIT if limit is None else limit,
            timeout=None if per_try is None else format_duration(per_try),
        )
    return PolicyAnnotations(
        retry=retry, timeouts=tuple(sorted(timeouts.items())), problems=tuple(problems)
    )


def parse_failure_accrual(
    annotations: Mapping[str, str], *, owner: str
) -> tuple[FailureAccrual | None, tuple[AnnotationProblem, ...]]:
    """The Service's failure accrual (None unless ``failure-accrual: consecutive``)."""
    problems: list[AnnotationProblem] = []
    kind = annotations.get(FAILURE_ACCRUAL)
    if kind is None:
        return None, ()
    if kind.strip() != "consecutive":
        return None, (_problem(owner, FAILURE_ACCRUAL, kind, "is not 'consecutive'"),)
    accrual = FailureAccrual()
    failures = annotations.get(FAILURE_ACCRUAL_MAX_FAILURES)
    if failures is not None:
        if failures.strip().isdigit() and int(failures) >= 1:
            accrual = replace(accrual, max_failures=int(failures))
        else:
            problems.append(
                _problem(owner, FAILURE_ACCRUAL_MAX_FAILURES, failures, "is not a number >= 1")
            )
    low = _duration(annotations, FAILURE_ACCRUAL_MIN_PENALTY, owner, problems)
    high = _duration(annotations, FAILURE_ACCRUAL_MAX_PENALTY, owner, problems)
    if low is not None:
        accrual = replace(accrual, min_penalty=low)
    if high is not None:
        accrual = replace(accrual, max_penalty=high)
    if accrual.min_penalty > accrual.max_penalty:
        problems.append(
            _problem(
                owner,
                FAILURE_ACCRUAL_MAX_PENALTY,
                format_duration(accrual.max_penalty),
                f"is shorter than the min penalty {format_duration(accrual.min_penalty)}; "
                "using the defaults",
            )
        )
        accrual = replace(accrual, min_penalty=DEFAULT_MIN_PENALTY, max_penalty=DEFAULT_MAX_PENALTY)
    jitter = annotations.get(FAILURE_ACCRUAL_JITTER)
    if jitter is not None:
        try:
            ratio = float(jitter)
        except ValueError:
            ratio = -1.0
        if 0.0 <= ratio <= 100.0:
            accrual = replace(accrual, jitter_ratio=ratio)
        else:
            problems.append(
                _problem(owner, FAILURE_ACCRUAL_JITTER, jitter, "is not a number in 0..100")
            )
    return accrual, tuple(problems)


def opaque_ports(
    annotations: Mapping[str, str], *, owner: str
) -> tuple[frozenset[int], tuple[AnnotationProblem, ...]]:
    """The ports ``config.linkerd.io/opaque-ports`` lists (``3306,5432-5440``)."""
    value = annotations.get(OPAQUE_PORTS)
    if value is None:
        return frozenset(), ()
    ports: set[int] = set()
    for item in (part.strip() for part in value.split(",") if part.strip()):
        low, _, high = item.partition("-")
        high = high or low
        if not (low.isdigit() and high.isdigit() and 1 <= int(low) <= int(high) <= 65535):
            return frozenset(), (
                _problem(owner, OPAQUE_PORTS, value, "is not a list of ports and port ranges"),
            )
        ports.update(range(int(low), int(high) + 1))
    return frozenset(ports), ()


def port_protocol(*, app_protocol: str | None, opaque: bool) -> Protocol:
    """A Service port's protocol: opaque when the opaque-ports annotation lists it, else from its
    ``appProtocol`` (``http``, ``kubernetes.io/h2c``, ``linkerd.io/opaque``), else ``detect``."""
    if opaque:
        return "opaque"
    return _APP_PROTOCOLS.get(app_protocol or "", "detect")
