"""A real OpenID Connect provider for the identity tests: zitadel's example OpenID provider.

``hack/build-idp.sh`` builds it from its Go module into the cache (``make test`` and CI run that
script first when Go is installed). :class:`TestIdp` starts it on a
free loopback port with static users (a JSON file) and the static clients the example registers
(``web`` / ``secret``, confidential, client_secret_basic), waits until discovery answers, and
stops it. :meth:`TestIdp.restart` keeps the port but the provider generates a new signing key
with a new ``kid``: that is how the tests rotate the provider's keys.

The process is a plain ``subprocess.Popen``, not an asyncio subprocess, so that one provider can
outlive the event loop of the test that started it: the identity tests share one per session
(``tests/e2e/test_identity.py``), on both lanes, instead of paying a start per test.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

REPO = Path(__file__).resolve().parents[2]
ZITADEL_OIDC_VERSION = "v3.52.0"
BUILD_COMMAND = f"{REPO}/hack/build-idp.sh"
CLIENT_ID = "web"
CLIENT_SECRET = "secret"


def idp_binary() -> Path:
    """The cached provider binary (``make test`` builds it first when Go is installed).

    With no Go toolchain the identity tests cannot have their provider: they skip with the
    reason on a Python-only machine (the README's ``make test``), and fail when
    ``INTERLOCK_REQUIRE_BINARIES=1`` says the binaries must be there (CI sets it). With Go and
    no binary (pytest run directly), they fail with the build command.
    """
    cache = Path(os.environ.get("INTERLOCK_CACHE", Path.home() / ".cache" / "interlock"))
    binary = cache / "bin" / f"zitadel-oidc-{ZITADEL_OIDC_VERSION}" / "oidc-example-server"
    if os.access(binary, os.X_OK):
        return binary
    if shutil.which("go") is None:
        message = (
            f"the test OpenID provider needs Go to build ({binary} is missing): {BUILD_COMMAND}"
        )
        if os.environ.get("INTERLOCK_REQUIRE_BINARIES") == "1":
            pytest.fail(message)
        pytest.skip(message)
    pytest.fail(f"the test OpenID provider is not built ({binary} is missing): run {BUILD_COMMAND}")


@dataclass(frozen=True)
class User:
    id: str
    username: str
    password: str
    email: str


ALICE = User("u-alice", "alice", "wonderland-pw", "alice@example.com")
MALLORY = User("u-mallory", "mallory", "mallory-pw", "mallory@evil.test")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class TestIdp:
    """One provider process (see the module docstring)."""

    __test__ = False

    def __init__(self, *, redirect_uris: list[str], users: tuple[User, ...] = (ALICE, MALLORY)):
        self.redirect_uris = redirect_uris
        self.users = users
        self.port = _free_port()
        self._dir = tempfile.TemporaryDirectory(prefix="interlock-idp-")
        self._process: subprocess.Popen[bytes] | None = None
        self._log = Path(self._dir.name) / "idp.log"

    @property
    def issuer(self) -> str:
        return f"http://localhost:{self.port}/"

    async def start(self) -> None:
        users = {
            user.id: {
                "ID": user.id,
                "Username": user.username,
                "Password": user.password,
                "FirstName": user.username.title(),
                "LastName": "Test",
                "Email": user.email,
                "EmailVerified": True,
                "PreferredLanguage": "en",
            }
            for user in self.users
        }
        users_file = Path(self._dir.name) / "users.json"
        users_file.write_text(json.dumps(users))
        env = {
            **os.environ,
            "PORT": str(self.port),
            "REDIRECT_URI": ",".join(self.redirect_uris),
            "USERS_FILE": str(users_file),
        }
        self._spawn(env)
        await self._wait_ready()

    def _spawn(self, env: dict[str, str]) -> None:
        with self._log.open("ab") as log:
            self._process = subprocess.Popen(
                [str(idp_binary())], env=env, stdout=log, stderr=subprocess.STDOUT
            )

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    async def _wait_ready(self, within: float = 30.0) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        url = f"{self.issuer}.well-known/openid-configuration"
        async with aiohttp.ClientSession() as session:
            while True:
                assert self._process is not None
                if self._process.poll() is not None:
                    raise RuntimeError(
                        f"the test OpenID provider exited ({self._process.returncode}): "
                        + self._log.read_text()[-2000:]
                    )
                with contextlib.suppress(aiohttp.ClientError, OSError):
                    async with session.get(url) as response:
                        if response.status == 200:
                            return
                if loop.time() > deadline:
                    raise RuntimeError(f"the test OpenID provider did not answer {url}")
                await asyncio.sleep(0.05)

    async def stop(self) -> None:
        await asyncio.to_thread(self.stop_now)

    def stop_now(self) -> None:
        """:meth:`stop` for synchronous code (the session's teardown, with no loop running)."""
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(60)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None

    async def restart(self) -> None:
        """Stop and start on the same port: a new signing key (a key rotation)."""
        await self.stop()
        await self.start()

    async def close(self) -> None:
        await self.stop()
        self._dir.cleanup()

    def close_now(self) -> None:
        self.stop_now()
        self._dir.cleanup()


StartIdp = Callable[[list[str]], Awaitable[TestIdp]]
