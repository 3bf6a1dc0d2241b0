"""Counting every request interlock makes to the Kubernetes API, the way client-go counts them.

An operator's first question about a controller in trouble is often "is it the API server?":
throttled (429), refused (403 after an RBAC change), slow, or hammered by relists. client-go
answers it with ``rest_client_requests_total{code,method,host}`` and
``rest_client_request_duration_seconds{verb,host}``, and dashboards built for Go controllers
look for exactly those names. Without this module interlock's requests would be invisible except
through the informers' own counters, which say nothing about status writes, Events or the Lease.

The hook sits on kubernetes-asyncio's REST client (``ApiClient.rest_client.request``), the one
place every request passes whatever API built it (our raw ``call_api`` requests and any typed
API alike), and it is installed once per client by :func:`instrument`. It records a request when
its answer's headers arrived (a watch is counted when its stream starts, as client-go does), or
when it failed without one (code ``<error>``, client-go's word). Besides client-go's pair it
keeps requests by Kubernetes verb (``list``, ``watch``, ``get``, ``patch`` …), API group,
resource and subresource, read off the request path by :func:`request_attributes`, so
``rate(interlock_kube_requests_total{verb="list"}[5m])`` shows relists and
``{resource="httproutes",subresource="status",code="409"}`` shows write conflicts. Labels are
verbs, resource names, codes and the API server's host: never an object's name or content.
"""

from __future__ import annotations

import asyncio
import time
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

from interlock.kube.library import ApiClient, ApiException

REQUEST_BUCKETS: tuple[float, ...] = (
    0.005,
    0.025,
    0.1,
    0.25,
    0.5,
    1.0,
    2.0,
    4.0,
    8.0,
    15.0,
    30.0,
    60.0,
)
"""client-go's buckets for ``rest_client_request_duration_seconds`` (seconds, ``le``)."""

ERROR_CODE = "<error>"
"""The code of a request that got no HTTP answer (refused, reset, timed out), as client-go
labels it."""

_K = TypeVar("_K")

_METHOD_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "HEAD": "get"}


@dataclass(frozen=True, slots=True)
class RequestAttributes:
    """What a request did, in the API server's own terms (``apiserver_request_total``'s)."""

    verb: str
    """``get``, ``list``, ``watch``, ``create``, ``update``, ``patch``, ``delete``,
    ``deletecollection``, or ``discover`` for the discovery documents (``/api``, ``/apis/…``)."""
    group: str
    """The API group (``""`` for the core group, ``gateway.networking.k8s.io`` …)."""
    resource: str
    """The plural resource (``services``, ``httproutes``); ``""`` for discovery."""
    subresource: str
    """``status``, ``scale`` … or ``""``."""


def request_attributes(
    method: str, path: str, query: Sequence[tuple[str, str]] = ()
) -> RequestAttributes:
    """The verb, group, resource and subresource of ``method`` on ``path`` (pure).

    ``/api/v1/namespaces/default/services`` with ``watch=true`` is a ``watch`` of ``services``;
    ``/apis/gateway.networking.k8s.io/v1/namespaces/default/httproutes/web/status`` with PATCH a
    ``patch`` of ``httproutes`` ``status``; ``/apis/gateway.networking.k8s.io`` is ``discover``.
    """
    parts = [part for part in path.split("/") if part]
    if parts[:1] == ["api"]:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, rest = parts[1], parts[3:]
    else:
        return RequestAttributes(verb="discover", group="", resource="", subresource="")
    if len(rest) >= 2 and rest[0] == "namespaces":
        # /namespaces/NS/RESOURCE/... ; /namespaces/NS alone is the namespace object itself.
        rest = rest[2:] if len(rest) > 2 else ["namespaces", rest[1]]
    if not rest:
        return RequestAttributes(verb="discover", group=group, resource="", subresource="")
    resource = rest[0]
    named = len(rest) >= 2
    subresource = rest[2] if len(rest) >= 3 else ""
    method = method.upper()
    if method == "GET":
        watching = any(name == "watch" and value in ("true", "1") for name, value in query)
        verb = "watch" if watching else ("get" if named else "list")
    elif method == "DELETE":
        verb = "delete" if named else "deletecollection"
    else:
        verb = _METHOD_VERBS.get(method, method.lower())
    return RequestAttributes(verb=verb, group=group, resource=resource, subresource=subresource)


class Histogram:
    """Observations in :data:`REQUEST_BUCKETS` (mutable, internal): per-bucket counts, not
    cumulative, the last slot for those slower than the last bound, and their sum."""

    __slots__ = ("buckets", "total")

    def __init__(self) -> None:
        self.buckets = [0] * (len(REQUEST_BUCKETS) + 1)
        self.total = 0.0

    def observe(self, seconds: float) -> None:
        self.total += seconds
        self.buckets[bisect_left(REQUEST_BUCKETS, seconds)] += 1


@dataclass(frozen=True, slots=True)
class HistogramSnapshot:
    buckets: tuple[int, ...]
    """Per bucket of :data:`REQUEST_BUCKETS`, not cumulative; the last slot is ``+Inf``."""
    total: float
    """The sum of the observed seconds."""


@dataclass(frozen=True, slots=True)
class KubeClientStatistics:
    """A snapshot of every request counted so far."""

    requests: dict[tuple[str, str, str], int]
    """client-go's ``(code, method, host)`` → requests."""
    durations: dict[tuple[str, str], HistogramSnapshot]
    """client-go's ``(verb, host)`` (verb being the HTTP method, as client-go has it) → seconds
    until the answer's headers."""
    resource_requests: dict[tuple[str, str, str, str, str], int]
    """``(verb, group, resource, subresource, code)`` → requests."""
    resource_durations: dict[tuple[str, str, str], HistogramSnapshot]
    """``(verb, group, resource)`` → seconds until the answer's headers."""
    in_flight: dict[tuple[str, str, str], int]
    """``(verb, group, resource)`` → requests sent whose answer's headers have not arrived
    (a watch counts until its stream starts); every key seen so far, 0 included."""


class KubeClientMetrics:
    """The counters of one API client's requests; :func:`instrument` feeds them."""

    def __init__(self, *, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self._requests: dict[tuple[str, str, str], int] = {}
        self._durations: dict[tuple[str, str], Histogram] = {}
        self._resource_requests: dict[tuple[str, str, str, str, str], int] = {}
        self._resource_durations: dict[tuple[str, str, str], Histogram] = {}
        self._in_flight: dict[tuple[str, str, str], int] = {}

    def sent(
        self, *, method: str, url: str, query: Sequence[tuple[str, str]]
    ) -> tuple[str, str, str]:
        """One more request of ``method`` to ``url`` waiting for its answer; the key to give
        :meth:`answered` when it got one (or none)."""
        attributes = request_attributes(method.upper(), urlsplit(url).path, query)
        key = (attributes.verb, attributes.group, attributes.resource)
        self._in_flight[key] = self._in_flight.get(key, 0) + 1
        return key

    def answered(self, key: tuple[str, str, str]) -> None:
        """The request :meth:`sent` returned ``key`` for is no longer waiting."""
        self._in_flight[key] -= 1

    def observe(
        self,
        *,
        method: str,
        url: str,
        query: Sequence[tuple[str, str]],
        code: str,
        seconds: float,
    ) -> None:
        """Count one request of ``method`` to ``url`` answered with ``code`` after ``seconds``."""
        parts = urlsplit(url)
        host = parts.netloc
        method = method.upper()
        attributes = request_attributes(method, parts.path, query)
        key = (code, method, host)
        self._requests[key] = self._requests.get(key, 0) + 1
        _histogram(self._durations, (method, host)).observe(seconds)
        verb, group, resource = attributes.verb, attributes.group, attributes.resource
        resource_key = (verb, group, resource, attributes.subresource, code)
        self._resource_requests[resource_key] = self._resource_requests.get(resource_key, 0) + 1
        _histogram(self._resource_durations, (verb, group, resource)).observe(seconds)

    def statistics(self) -> KubeClientStatistics:
        return KubeClientStatistics(
            requests=dict(self._requests),
            durations=_snapshots(self._durations),
            resource_requests=dict(self._resource_requests),
            resource_durations=_snapshots(self._resource_durations),
            in_flight=dict(self._in_flight),
        )


def _histogram(histograms: dict[_K, Histogram], key: _K) -> Histogram:
    found = histograms.get(key)
    if found is None:
        found = histograms[key] = Histogram()
    return found


def _snapshots(histograms: dict[_K, Histogram]) -> dict[_K, HistogramSnapshot]:
    return {
        key: HistogramSnapshot(buckets=tuple(found.buckets), total=found.total)
        for key, found in histograms.items()
    }


_ATTRIBUTE = "_interlock_client_metrics"


def instrument(api: ApiClient, metrics: KubeClientMetrics | None = None) -> KubeClientMetrics:
    """Count every request ``api`` sends from now on; returns the counters.

    Installed once: a client already instrumented keeps its counters (``metrics`` is then
    ignored), so two callers never count a request twice.
    """
    rest: Any = api.rest_client
    found = getattr(rest, _ATTRIBUTE, None)
    if isinstance(found, KubeClientMetrics):
        return found
    counters = metrics if metrics is not None else KubeClientMetrics()
    send = rest.request
    clock = counters.clock

    async def request(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        query = kwargs.get("query_params") or (args[0] if args else None) or ()
        started = clock()
        waiting = counters.sent(method=method, url=url, query=query)
        try:
            response = await send(method, url, *args, **kwargs)
        except ApiException as error:
            # A non-2xx answer read in full (``_preload_content``): it has a code.
            code = str(error.status) if error.status else ERROR_CODE
            counters.observe(
                method=method, url=url, query=query, code=code, seconds=clock() - started
            )
            raise
        except asyncio.CancelledError:
            raise  # our own choice (shutdown, a stopped informer), not the API server's answer
        except BaseException:
            counters.observe(
                method=method, url=url, query=query, code=ERROR_CODE, seconds=clock() - started
            )
            raise
        finally:
            counters.answered(waiting)
        counters.observe(
            method=method,
            url=url,
            query=query,
            code=str(response.status),
            seconds=clock() - started,
        )
        return response

    rest.request = request
    setattr(rest, _ATTRIBUTE, counters)
    return counters


def client_metrics(api: ApiClient | None) -> KubeClientMetrics | None:
    """The counters :func:`instrument` installed on ``api``, if any."""
    if api is None:
        return None
    found = getattr(api.rest_client, _ATTRIBUTE, None)
    return found if isinstance(found, KubeClientMetrics) else None
