"""Password guessing on one route must not stall the other hosts.

bcrypt is replaced here by a check that blocks until the test lets it go — standing in for an
arbitrarily slow bcrypt, so nothing depends on how fast this machine hashes. While every
password worker is blocked, another host must still be served: on the event loop, the block
would have frozen the whole edge.
"""

from __future__ import annotations

import asyncio
import base64
import threading

import bcrypt

from interlock.edge.passwords import PasswordChecker
from interlock.edge.provider import BackendTarget
from interlock.model.moduleset import Modules, SecretValue
from interlock.model.service import ServicePortKey
from tests.kit.edge_routes import serve_route
from tests.kit.raw_http1 import Answer, send_raw

from .conftest import CountingBackend, Edge, running_edge, serve_host, wait_until

PROTECTED = "login.example.com"
OTHER = "other.example.com"
COST = 5
HASH = bcrypt.hashpw(b"right password", bcrypt.gensalt(rounds=COST))
MODULES = Modules.model_validate(
    {"basicAuth": {"realm": "app", "secretRef": {"name": "users", "key": "htpasswd"}}}
)


class BlockingBcrypt:
    """A password check that waits for :meth:`release`, recording the hashes it was given."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.hashes: list[bytes] = []

    def __call__(self, password: bytes, hashed: bytes) -> bool:
        self.hashes.append(hashed)
        if not self.gate.wait(timeout=120):
            raise AssertionError("the test never released the password checks")
        return bcrypt.checkpw(password, hashed)


def _guess(user: str, password: str) -> bytes:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return (
        f"GET / HTTP/1.1\r\nHost: {PROTECTED}\r\nAuthorization: Basic {token}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()


async def _protect(edge: Edge, backend: CountingBackend, checker: PasswordChecker) -> None:
    edge.server.passwords = checker
    await serve_host(edge, host=OTHER, service="other", address=backend.address)
    edge.upstreams.set(namespace="default", service="login", port=80, addresses=[backend.address])
    await serve_route(
        edge.edge,
        host=PROTECTED,
        modules=MODULES,
        secrets={("users", "htpasswd"): SecretValue(b"alice:" + HASH + b"\n")},
        backend=BackendTarget(ServicePortKey("default", "login", 80)),
    )


def _guesses(edge: Edge, count: int) -> list[asyncio.Task[Answer]]:
    """``count`` wrong passwords for alice, sent at once, each on its own connection."""
    return [
        asyncio.create_task(send_raw(edge.address, _guess("alice", f"guess-{n}")))
        for n in range(count)
    ]


async def test_guesses_on_one_route_leave_other_hosts_served(
    counting_backends: tuple[CountingBackend, CountingBackend],
) -> None:
    backend, _ = counting_backends
    slow = BlockingBcrypt()
    checker = PasswordChecker(workers=2, max_pending=64, verify=slow)
    async with running_edge() as edge:
        await _protect(edge, backend, checker)
        guesses = _guesses(edge, 10)
        try:
            await wait_until(
                lambda: checker.statistics().running == 2 and checker.statistics().pending == 10,
                what="both workers busy, every guess waiting",
            )
            answer = await send_raw(
                edge.address,
                f"GET / HTTP/1.1\r\nHost: {OTHER}\r\nConnection: close\r\n\r\n".encode(),
                deadline=60,
            )
            assert (answer.status, answer.body) == (200, b"backend-a")
            assert checker.statistics().pending == 10  # answered while every guess waited
        finally:
            slow.gate.set()
        answers = await asyncio.gather(*guesses)
        assert [a.status for a in answers] == [401] * 10
        assert backend.finished == 1  # only the other host's request reached a backend


async def test_checks_beyond_the_cap_are_refused_at_once(
    counting_backends: tuple[CountingBackend, CountingBackend],
) -> None:
    backend, _ = counting_backends
    slow = BlockingBcrypt()
    checker = PasswordChecker(workers=1, max_pending=4, verify=slow)
    async with running_edge() as edge:
        await _protect(edge, backend, checker)
        waiting = _guesses(edge, 4)
        try:
            await wait_until(lambda: checker.statistics().pending == 4, what="the queue is full")
            refused = await send_raw(edge.address, _guess("alice", "one more"), deadline=60)
            assert refused.status == 503
            assert refused.headers["retry-after"] == "1"
            assert checker.statistics().refused_busy == 1
        finally:
            slow.gate.set()
        assert [a.status for a in await asyncio.gather(*waiting)] == [401] * 4
        # A right password still gets in once the guesses are answered.
        answer = await send_raw(edge.address, _guess("alice", "right password"))
        assert answer.status == 200


async def test_an_unknown_user_costs_a_bcrypt_check_of_the_same_cost(
    counting_backends: tuple[CountingBackend, CountingBackend],
) -> None:
    backend, _ = counting_backends
    slow = BlockingBcrypt()
    slow.gate.set()
    checker = PasswordChecker(workers=1, max_pending=4, verify=slow)
    async with running_edge() as edge:
        await _protect(edge, backend, checker)
        assert (await send_raw(edge.address, _guess("mallory", "guess"))).status == 401
        assert (await send_raw(edge.address, _guess("alice", "guess"))).status == 401
    unknown, known = slow.hashes
    assert known == HASH
    assert unknown != HASH
    assert unknown[:7] == HASH[:7] == f"$2b${COST:02d}$".encode()  # the same cost
