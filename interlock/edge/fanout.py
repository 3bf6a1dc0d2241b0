"""One provider over several data-plane workers: :class:`FanOutEdge` (``--edge-workers``).

Every call goes to every worker at once, and succeeds only when every worker carried it out:
the EdgeActor attaches a route's backend only after its modules applied, so with workers it
attaches only after they applied in *all* of them (the fail-closed order of
:mod:`interlock.edge.provider`, kept across processes).

A call that fails in some workers is undone in the others, so the route stays on its last good
configuration everywhere (an ``apply_modules`` or ``set_tls`` re-applies the previous one, an
``attach_backend`` attaches the previous backend or detaches); the error names the workers that
failed, and reaches the route's status as a single provider's would. A call that only closes
(``detach_backend``, ``remove_route``) is not undone: serving less is the fail-closed direction,
and the caller retries it.

What every worker last applied is kept (:attr:`FanOutEdge.desired`), so a worker that restarted
empty is reprogrammed with :meth:`FanOutEdge.replay` before it counts again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace

from loguru import logger

from interlock.dataplane.request_target import normalize_host
from interlock.edge.provider import (
    ApplyModules,
    BackendTarget,
    EdgeError,
    EdgeProvider,
    EdgeSnapshot,
    HostSnapshot,
    PermanentEdgeError,
    RouteSnapshot,
    TransientEdgeError,
)
from interlock.model.moduleset import SecretValue

RouteKey = tuple[str, str]
"""(normalized host, route id)."""

Call = Callable[[EdgeProvider], Awaitable[None]]


@dataclass
class Desired:
    """What every worker serves after the last calls that succeeded in all of them."""

    modules: dict[RouteKey, ApplyModules] = field(default_factory=dict)
    backends: dict[RouteKey, BackendTarget] = field(default_factory=dict)
    tls: dict[str, tuple[SecretValue, SecretValue]] = field(default_factory=dict)


class FanOutEdge:
    """An :class:`EdgeProvider` over ``workers``, all or nothing; see the module docstring."""

    def __init__(self, workers: Sequence[EdgeProvider]) -> None:
        """``workers`` may be empty until they run: every call then fails transiently."""
        self.workers: list[EdgeProvider] = list(workers)
        self.desired = Desired()

    # --- the provider calls ---------------------------------------------------------------------

    async def apply_modules(self, command: ApplyModules) -> None:
        key = (normalize_host(command.host), command.route_id)
        previous = self.desired.modules.get(key)

        async def undo(worker: EdgeProvider) -> None:
            if previous is not None:
                await worker.apply_modules(previous)

        await self._all(lambda worker: worker.apply_modules(command), undo=undo)
        self.desired.modules[key] = command

    async def attach_backend(self, *, host: str, route_id: str, backend: BackendTarget) -> None:
        key = (normalize_host(host), route_id)
        previous = self.desired.backends.get(key)

        async def undo(worker: EdgeProvider) -> None:
            if previous is None:
                await worker.detach_backend(host=host, route_id=route_id)
            else:
                await worker.attach_backend(host=host, route_id=route_id, backend=previous)

        await self._all(
            lambda worker: worker.attach_backend(host=host, route_id=route_id, backend=backend),
            undo=undo,
        )
        self.desired.backends[key] = backend

    async def detach_backend(self, *, host: str, route_id: str) -> None:
        await self._all(lambda worker: worker.detach_backend(host=host, route_id=route_id))
        self.desired.backends.pop((normalize_host(host), route_id), None)

    async def remove_route(self, *, host: str, route_id: str) -> None:
        await self._all(lambda worker: worker.remove_route(host=host, route_id=route_id))
        key = (normalize_host(host), route_id)
        self.desired.modules.pop(key, None)
        self.desired.backends.pop(key, None)

    async def set_tls(
        self, *, host: str, cert_pem: SecretValue | None, key_pem: SecretValue | None
    ) -> None:
        wanted = normalize_host(host)
        previous = self.desired.tls.get(wanted)

        async def undo(worker: EdgeProvider) -> None:
            old_cert, old_key = previous if previous is not None else (None, None)
            await worker.set_tls(host=host, cert_pem=old_cert, key_pem=old_key)

        await self._all(
            lambda worker: worker.set_tls(host=host, cert_pem=cert_pem, key_pem=key_pem),
            undo=undo,
        )
        if cert_pem is None or key_pem is None:
            self.desired.tls.pop(wanted, None)
        else:
            self.desired.tls[wanted] = (cert_pem, key_pem)

    async def snapshot(self) -> EdgeSnapshot:
        """What all workers serve: a route they do not all serve alike is shown unapplied and
        without a backend, so an EdgeActor adopting it applies it again."""
        if not self.workers:
            raise TransientEdgeError("edge workers: none running yet")
        results = await asyncio.gather(
            *(worker.snapshot() for worker in self.workers), return_exceptions=True
        )
        snapshots: list[EdgeSnapshot] = []
        for result in results:
            if isinstance(result, BaseException):
                raise result
            snapshots.append(result)
        return merged(snapshots)

    # --- a restarted worker ---------------------------------------------------------------------

    async def replay(
        self,
        worker: EdgeProvider,
        *,
        before_backend: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Program ``worker`` (one restarted empty) with everything the others serve: TLS, then
        each route's modules, then its backend. Raises the first failure.

        ``before_backend``: awaited after a route's backend is read and before it is attached
        (the workers' upstream tables brought up to date: a backend attached to the others
        while this replay runs has its table only since then)."""
        for host, (cert, key) in sorted(self.desired.tls.items()):
            await worker.set_tls(host=host, cert_pem=cert, key_pem=key)
        for route_key, command in sorted(self.desired.modules.items()):
            await worker.apply_modules(command)
            backend = self.desired.backends.get(route_key)
            if backend is not None:
                if before_backend is not None:
                    await before_backend()
                await worker.attach_backend(
                    host=command.host, route_id=command.route_id, backend=backend
                )

    # --- all or nothing -------------------------------------------------------------------------

    async def _all(self, call: Call, *, undo: Call | None = None) -> None:
        workers = list(self.workers)
        if not workers:
            raise TransientEdgeError("edge workers: none running yet")
        results = await asyncio.gather(
            *(call(worker) for worker in workers), return_exceptions=True
        )
        errors: list[tuple[int, EdgeError]] = []
        for index, result in enumerate(results):
            if isinstance(result, EdgeError):
                errors.append((index, result))
            elif isinstance(result, BaseException):
                raise result  # a bug, not a data plane's answer
        if not errors:
            return
        if undo is not None:
            for index, result in enumerate(results):
                if result is None:
                    try:
                        await undo(workers[index])
                    except EdgeError as error:
                        logger.warning(
                            "edge worker {}: undoing a call the other workers refused failed: {}",
                            index + 1,
                            error.message,
                        )
        raise combined(errors, total=len(workers))


def combined(errors: Sequence[tuple[int, EdgeError]], *, total: int) -> EdgeError:
    """One error for the failures of some of ``total`` workers (``index`` from 0): transient if
    any was (a retry may then succeed everywhere), naming each worker and its message."""
    if total == 1:
        return errors[0][1]
    text = "; ".join(f"edge worker {index + 1} of {total}: {e.message}" for index, e in errors)
    transient = [e for _, e in errors if isinstance(e, TransientEdgeError)]
    if transient:
        delays = [e.retry_after for e in transient if e.retry_after is not None]
        return TransientEdgeError(text, retry_after=max(delays) if delays else None)
    return PermanentEdgeError(text)


def merged(snapshots: Sequence[EdgeSnapshot]) -> EdgeSnapshot:
    """The routes any worker serves; one the workers do not all serve alike is unapplied and
    without a backend."""
    if all(snapshot == snapshots[0] for snapshot in snapshots[1:]):
        return snapshots[0]
    routes: dict[str, dict[str, list[RouteSnapshot]]] = {}
    tls: dict[str, list[bool]] = {}
    for snapshot in snapshots:
        for host in snapshot.hosts:
            tls.setdefault(host.host, []).append(host.tls)
            for route in host.routes:
                routes.setdefault(host.host, {}).setdefault(route.route_id, []).append(route)
    hosts: list[HostSnapshot] = []
    count = len(snapshots)
    for host_name in sorted(tls):
        shown: list[RouteSnapshot] = []
        for versions in (v for _, v in sorted(routes.get(host_name, {}).items())):
            alike = len(versions) == count and all(v == versions[0] for v in versions)
            shown.append(
                versions[0] if alike else replace(versions[0], applied=False, backend=None)
            )
        hosts.append(
            HostSnapshot(
                host=host_name,
                tls=len(tls[host_name]) == count and all(tls[host_name]),
                routes=tuple(shown),
            )
        )
    return EdgeSnapshot(hosts=tuple(hosts))
