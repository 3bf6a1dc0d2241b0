"""What the runtime logs: failures with their message summary, dead letters rate-limited."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from loguru import logger

from interlock.mailbox import Actor, ActorSystem
from interlock.mailbox.testing import ManualClock, ManualSleep, wait_idle, wait_until


@pytest.fixture
def logs() -> Iterator[list[str]]:
    lines: list[str] = []
    sink = logger.add(lambda message: lines.append(str(message)), level="DEBUG", diagnose=True)
    yield lines
    logger.remove(sink)


@dataclass(frozen=True)
class Login:
    __trace_redact__ = frozenset({"password"})
    user: str
    password: str


async def test_a_failure_is_logged_with_the_message_summary_and_no_secret(
    logs: list[str],
) -> None:
    class Rejects(Actor):
        async def receive(self, message: object) -> None:
            credentials = message  # a local holding the secret: must not be printed
            raise PermissionError(f"user {getattr(credentials, 'user', '?')} refused")

    system = ActorSystem(sleep=ManualSleep())
    system.spawn("auth/login", Rejects)
    system.tell("auth/login", Login(user="alice", password="pw-SECRET"))
    await wait_idle(system)
    await system.shutdown()
    text = "\n".join(logs)
    assert "auth/login: PermissionError while handling Login(user='alice'" in text
    assert "password=<redacted>" in text
    assert "Traceback" in text
    assert "SECRET" not in text


async def test_dead_letters_are_logged_at_most_once_per_interval(logs: list[str]) -> None:
    clock = ManualClock()
    system = ActorSystem(clock=clock, dead_letter_log_interval=0.05)
    for n in range(100):
        system.tell("nobody", n)
    reports = [line for line in logs if "dead letter" in line]
    assert len(reports) == 1
    assert "int to nobody (unknown)" in reports[0]
    # The 99 that were held back are reported once the interval has passed.
    await wait_until(lambda: len([line for line in logs if "dead letter" in line]) == 2)
    assert "99 dead letter(s) since the last report (100 in total)" in logs[-1]
    assert system.statistics().dead_letters == 100
    await system.shutdown()
