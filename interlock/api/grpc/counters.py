"""What the gRPC API answered, for ``/metrics`` (``interlock_grpc_server_*``).

The names and labels follow go-grpc-prometheus (``grpc_server_started_total``,
``grpc_server_handled_total`` by service, method, type and code, ``grpc_server_msg_sent_total``),
which Linkerd's controller exports too, so one dashboard reads either. Counted here, where each
call starts and ends; no gRPC import (``interlock/api/metrics.py`` reads the statistics).
"""

from __future__ import annotations

from dataclasses import dataclass

SERVICE = "io.linkerd.proxy.outbound.OutboundPolicies"
METHOD_TYPES = {"Get": "unary", "Watch": "server_stream"}


@dataclass(frozen=True, slots=True)
class GrpcApiStatistics:
    """A snapshot of :class:`GrpcApiCounters`."""

    started: dict[str, int]
    """Method → calls started."""
    handled: dict[tuple[str, str], int]
    """``(method, code)`` → calls ended with that status (``OK``, ``NOT_FOUND``, …)."""
    sent: dict[str, int]
    """Method → messages sent (a watch sends one per change)."""
    watches_open: int
    """Watch streams open now."""


class GrpcApiCounters:
    __slots__ = ("handled", "sent", "started", "watches_open")

    def __init__(self) -> None:
        self.started: dict[str, int] = {}
        self.handled: dict[tuple[str, str], int] = {}
        self.sent: dict[str, int] = {}
        self.watches_open = 0

    def start(self, method: str) -> None:
        self.started[method] = self.started.get(method, 0) + 1

    def end(self, method: str, code: str) -> None:
        key = (method, code)
        self.handled[key] = self.handled.get(key, 0) + 1

    def message(self, method: str) -> None:
        self.sent[method] = self.sent.get(method, 0) + 1

    def statistics(self) -> GrpcApiStatistics:
        return GrpcApiStatistics(
            started=dict(self.started),
            handled=dict(self.handled),
            sent=dict(self.sent),
            watches_open=self.watches_open,
        )
