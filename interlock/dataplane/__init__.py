"""One data-plane engine for both front doors: the edge (Ingress traffic) and the mesh listener.

An outbound policy is only worth what a data plane enforces of it. This package is the one
place that turns a Service port's :class:`~interlock.model.outbound.OutboundPolicy` into what
happens on the wire, so that the edge and the mesh listener cannot drift apart: route-rule
choice, filters, weighted backends, failure injection, timeouts, retries, failure accrual and
the answers the data plane makes itself. Edge modules (auth, IP restriction, …) are not here:
they run in the edge before the engine, and the mesh listener has none.

The API, in the order a request meets it::

    engine = Engine(source=my_source, forwarder=forwarder, body_timeout=30.0)
    target = ServicePortKey("shop", "web", 80)           # which Service port
    info = RequestInfo(method=..., path=..., forward_path=..., query=..., query_params=...,
                       headers=..., scheme=..., host=...)  # what the request is
    decision = engine.route(target, info)                # pure: Forward | Answer
    if isinstance(decision, Answer):                     # redirect, 404, 500 of a missing backend
        return answer_response(decision)
    result = await engine.forward(request, decision, query=..., headers=upstream_headers,
                                  body=None, hooks=NO_HOOKS, where="mesh shop/web:80")
    return answer_response(result) if isinstance(result, Answer) else result

* :class:`PolicySource` — the boundary: ``policy(target)`` (None while unknown: the request
  goes to the Service port itself) and ``addresses(target)`` (ready endpoints, or an
  ``UpstreamError``). Neither awaits. The controller's is ``UpstreamIndex``.
* :mod:`~interlock.dataplane.plan` — pure: :func:`compile_policy` once per policy change,
  :func:`decide` per request (rule by the Gateway API's precedence, RequestRedirect, weighted
  backend with an injected random number, failure injector, URL rewrite).
* :mod:`~interlock.dataplane.filters` — pure: header modifiers, path rewrites, ``Location``.
* :mod:`~interlock.dataplane.accrual` — consecutive-failure accrual, clock and jitter injected.
* :mod:`~interlock.dataplane.engine` — :class:`Engine`: endpoints, deadlines (504), retries,
  accrual, the relayed answer with response filters, over the pooled ``proxy.Forwarder``.
* :mod:`~interlock.dataplane.answers` and :mod:`~interlock.dataplane.wire` — the one format of
  the data plane's own answers (``X-Interlock-Reason`` and ``<reason>: <sentence>``,
  ``docs/answers.md``), without a ``Server`` banner.

The wire both front doors speak is here too, so that neither imports the other (nor this
package ``interlock.edge``: ``tests/dataplane/test_layers.py``): the HTTP/1.1 and HTTP/2 servers
(``http1_server``, ``http2_server``) handing each request over as a ``request_stream.H2Request``,
the upstream clients (``proxy.Forwarder`` over ``http1``, ``http2_client``), upgrades
(``websocket``, ``tunnel``), what one client may hold (``limits.ProxyLimits``) and how a
``Host`` and a request-target are read (``request_target``). ``docs/design.md`` ("Layers") lists
every module.

``docs/design.md`` ("One engine, two front doors") describes the request flow. The package
re-exports only its pure, dependency-free surface; the aiohttp halves are imported from
``interlock.dataplane.engine`` (``Engine``, ``NO_HOOKS``) and ``interlock.dataplane.wire``
(``answer_response``).
"""

from typing import TYPE_CHECKING, Any

from interlock.dataplane.answers import REASON_HEADER, REASONS, Answer, answer
from interlock.dataplane.source import Address, PolicySource, UpstreamError
from interlock.model.service import ServicePortKey

if TYPE_CHECKING:
    from interlock.dataplane.plan import (
        Deadlines,
        Forward,
        PolicyPlan,
        RequestInfo,
        RetryPlan,
        compile_policy,
        decide,
    )

_PLAN = frozenset(
    ("Deadlines", "Forward", "PolicyPlan", "RequestInfo", "RetryPlan", "compile_policy", "decide")
)
"""Re-exported from :mod:`~interlock.dataplane.plan` on first use: the plan imports the Gateway
API's filter and route models, which a controller without a data plane never needs (issue 29
item 5; ``tests/controller/test_start_up_imports.py``)."""


def __getattr__(name: str) -> Any:
    if name in _PLAN:
        from interlock.dataplane import plan

        return getattr(plan, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "REASONS",
    "REASON_HEADER",
    "Address",
    "Answer",
    "Deadlines",
    "Forward",
    "PolicyPlan",
    "PolicySource",
    "RequestInfo",
    "RetryPlan",
    "ServicePortKey",
    "UpstreamError",
    "answer",
    "compile_policy",
    "decide",
]
