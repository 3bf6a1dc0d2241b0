"""The gRPC server of Linkerd's ``OutboundPolicies`` API (``--grpc-addr``), on grpcio's asyncio
server.

Each call turns its ``TrafficSpec`` into a target (:mod:`interlock.api.grpc.target`): a Service
port seen from the workload's namespace, found by authority or by cluster IP
(:class:`~interlock.model.cluster_ips.ServiceAddresses`). A Service port is read from the same
:class:`~interlock.api.policy.PolicySource` as the JSON API, one latest-value slot per call, so
a ``Watch`` sends the current policy and then one message per change, and a slow reader
coalesces to the newest. Each policy is encoded (:mod:`interlock.api.grpc.encode`) once per
change and the bytes are shared by every stream of that target, as the JSON API shares its body.
An address that is no Service's answers as Linkerd does: an unknown port of a Service is
``Forbidden``, an address outside the cluster's networks is forwarded (egress), one inside them
is ``NOT_FOUND``.

Before the initial sync a call waits (at most ``first_policy_timeout``) and then answers
``UNAVAILABLE``, as the JSON API answers 503; :meth:`GrpcPolicyServer.stop` ends every stream
with ``OK`` (the slots close) before the server stops.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import grpc
from grpc import aio

from interlock.api.grpc.counters import METHOD_TYPES, SERVICE, GrpcApiCounters
from interlock.api.grpc.encode import (
    DEFAULT_CLUSTER_DOMAIN,
    egress_fallback,
    encode_policy,
    serialized,
    undefined_port,
)
from interlock.api.grpc.proto import outbound_pb2
from interlock.api.grpc.target import (
    DEFAULT_CLUSTER_NETWORKS,
    TargetError,
    in_networks,
    ip_from_fields,
    parse_authority,
    source_namespace,
)
from interlock.api.policy import PolicySource
from interlock.api.policy_target import BadRequest, watch_target
from interlock.config import Address
from interlock.mailbox.slot import LatestValueSlot, SlotClosed
from interlock.model.cluster_ips import ServiceAddresses
from interlock.model.policy_watch import PolicyUpdate, WatchTarget

_STATUS = {
    "INVALID_ARGUMENT": grpc.StatusCode.INVALID_ARGUMENT,
    "NOT_FOUND": grpc.StatusCode.NOT_FOUND,
}


class _Abort(Exception):
    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _identity(body: bytes) -> bytes:
    return body


class GrpcPolicyServer:
    """Serves ``OutboundPolicies.Get`` and ``Watch`` from ``source``."""

    def __init__(
        self,
        *,
        source: PolicySource,
        addresses: ServiceAddresses,
        wait_ready: Callable[[], Awaitable[object]] | None = None,
        counters: GrpcApiCounters | None = None,
        cluster_domain: str = DEFAULT_CLUSTER_DOMAIN,
        cluster_networks: tuple[str, ...] = DEFAULT_CLUSTER_NETWORKS,
        first_policy_timeout: float = 10.0,
    ) -> None:
        self.source = source
        self.addresses = addresses
        self.wait_ready = wait_ready
        self.counters = counters if counters is not None else GrpcApiCounters()
        self.cluster_domain = cluster_domain
        self.cluster_networks = cluster_networks
        self.first_policy_timeout = first_policy_timeout
        self.address: Address | None = None
        """The bound address once started (never port 0)."""
        self._server: aio.Server | None = None
        self._stopping = asyncio.Event()
        self._slots: set[LatestValueSlot[PolicyUpdate]] = set()
        self._encoded: dict[WatchTarget, tuple[PolicyUpdate, bytes]] = {}
        self._readers: dict[WatchTarget, int] = {}

    # -- lifecycle

    async def start(self, address: Address) -> Address:
        """Listen on ``address`` (port 0: any free port); returns the bound address."""
        server = aio.server()
        handlers = {
            "Get": grpc.unary_unary_rpc_method_handler(
                self._get,
                request_deserializer=outbound_pb2.TrafficSpec.FromString,
                response_serializer=_identity,
            ),
            "Watch": grpc.unary_stream_rpc_method_handler(
                self._watch,
                request_deserializer=outbound_pb2.TrafficSpec.FromString,
                response_serializer=_identity,
            ),
        }
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
        host = address.host or "0.0.0.0"
        shown = f"[{host}]" if ":" in host else host
        port = server.add_insecure_port(f"{shown}:{address.port}")
        if port == 0:
            raise OSError(f"cannot listen on {address}")
        await server.start()
        self._server = server
        self.address = Address(host=address.host, port=port)
        return self.address

    async def stop(self, grace: float = 5.0) -> None:
        """End every stream (``OK``), then stop the server, waiting at most ``grace``."""
        self._stopping.set()
        for slot in list(self._slots):
            slot.close()
        if self._server is not None:
            await self._server.stop(grace)
            self._server = None

    # -- calls

    async def _get(self, spec: outbound_pb2.TrafficSpec, context: aio.ServicerContext) -> bytes:
        counters = self.counters
        counters.start("Get")
        try:
            found = await self._resolve(spec)
            if isinstance(found, bytes):
                body = found
            else:
                slot = await self._open(found)
                try:
                    update = slot.latest
                    assert update is not None
                    body = self._encode(found, update)
                finally:
                    self._close(found, slot)
        except _Abort as abort:
            counters.end("Get", abort.code.name)
            await context.abort(abort.code, abort.message)
        counters.message("Get")
        counters.end("Get", "OK")
        return body

    async def _watch(
        self, spec: outbound_pb2.TrafficSpec, context: aio.ServicerContext
    ) -> AsyncIterator[bytes]:
        counters = self.counters
        counters.start("Watch")
        try:
            found = await self._resolve(spec)
            slot = None if isinstance(found, bytes) else await self._open(found)
        except _Abort as abort:
            counters.end("Watch", abort.code.name)
            await context.abort(abort.code, abort.message)
        code = "OK"
        counters.watches_open += 1
        try:
            if slot is None or isinstance(found, bytes):
                # Not a Service port: one answer that never changes, held until shutdown.
                assert isinstance(found, bytes)
                counters.message("Watch")
                yield found
                await self._stopping.wait()
                return
            version = 0
            while not slot.closed:
                update = slot.latest
                if update is not None and slot.version > version:
                    version = slot.version
                    counters.message("Watch")
                    yield self._encode(found, update)
                await slot.wait(after=version)
        except asyncio.CancelledError:
            code = "CANCELLED"  # the client went away
            raise
        finally:
            counters.watches_open -= 1
            counters.end("Watch", code)
            if slot is not None and not isinstance(found, bytes):
                self._close(found, slot)

    # -- targets, slots, encodings

    async def _resolve(self, spec: outbound_pb2.TrafficSpec) -> WatchTarget | bytes:
        """The Service port ``spec`` asks for, or the fixed answer for what is no Service port."""
        if self.wait_ready is not None:
            try:
                await asyncio.wait_for(self.wait_ready(), timeout=self.first_policy_timeout)
            except TimeoutError:
                raise _Abort(
                    grpc.StatusCode.UNAVAILABLE,
                    "the controller has not finished its initial sync; retry",
                ) from None
        try:
            which = spec.WhichOneof("target")
            if which is None:
                raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, "target is required")
            client_namespace = source_namespace(spec.source_workload)
            if which == "authority":
                namespace, name, port = parse_authority(
                    spec.authority, cluster_domain=self.cluster_domain
                )
                return self._target(namespace, name, port, client_namespace)
            return self._by_address(spec.addr, client_namespace)
        except TargetError as error:
            raise _Abort(_STATUS[error.status], error.message) from None

    def _by_address(self, addr: object, client_namespace: str) -> WatchTarget | bytes:
        assert isinstance(addr, type(outbound_pb2.TrafficSpec().addr))
        if not 0 < addr.port < 65536:
            raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, "port outside valid range")
        which = addr.ip.WhichOneof("ip")
        ip = ip_from_fields(
            addr.ip.ipv4 if which == "ipv4" else None,
            (addr.ip.ipv6.first, addr.ip.ipv6.last) if which == "ipv6" else None,
        )
        service = self.addresses.lookup(ip)
        if service is None:
            if in_networks(ip, self.cluster_networks):
                raise _Abort(grpc.StatusCode.NOT_FOUND, "No such service")
            return serialized(egress_fallback(ip, addr.port))
        namespace, name = service.metadata.namespace, service.metadata.name
        if service.port_by_number(addr.port) is None:
            return serialized(undefined_port(namespace, name, addr.port))
        return self._target(namespace, name, addr.port, client_namespace)

    @staticmethod
    def _target(namespace: str, name: str, port: int, client_namespace: str) -> WatchTarget:
        try:
            return watch_target(
                namespace=namespace,
                service=name,
                port_text=str(port),
                client_namespace=client_namespace,
            )
        except BadRequest as error:
            raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, str(error)) from None

    async def _open(self, target: WatchTarget) -> LatestValueSlot[PolicyUpdate]:
        slot = self.source.open_watch(target)
        self._slots.add(slot)
        self._readers[target] = self._readers.get(target, 0) + 1
        if slot.version == 0:
            try:
                await asyncio.wait_for(slot.next(after=0), timeout=self.first_policy_timeout)
            except TimeoutError:
                self._close(target, slot)
                raise _Abort(
                    grpc.StatusCode.UNAVAILABLE, f"no policy for {target} yet; retry"
                ) from None
            except SlotClosed:
                pass
        if slot.closed or slot.latest is None:
            self._close(target, slot)
            raise _Abort(grpc.StatusCode.UNAVAILABLE, "the controller is shutting down")
        return slot

    def _close(self, target: WatchTarget, slot: LatestValueSlot[PolicyUpdate]) -> None:
        if slot not in self._slots:
            return
        self._slots.discard(slot)
        self.source.close_watch(target, slot)
        left = self._readers.get(target, 1) - 1
        if left > 0:
            self._readers[target] = left
        else:
            self._readers.pop(target, None)
            self._encoded.pop(target, None)

    def _encode(self, target: WatchTarget, update: PolicyUpdate) -> bytes:
        cached = self._encoded.get(target)
        if cached is not None and cached[0] is update:
            return cached[1]
        body = serialized(encode_policy(update.policy, cluster_domain=self.cluster_domain))
        self._encoded[target] = (update, body)
        return body


__all__ = ["METHOD_TYPES", "GrpcPolicyServer"]
