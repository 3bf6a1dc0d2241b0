"""Sessions of the oauth and oidc modules, sealed in a cookie with ``cryptography``'s Fernet.

A session is a small JSON object (who signed in, when, when they were last seen and last
re-checked with the provider, and the provider's tokens for that re-check). Fernet encrypts it
(AES-128-CBC) and signs it (HMAC-SHA256), so the browser holds it but can neither read nor
change it, and the edge keeps no session table: every replica of the edge accepts the same
cookie and a restart logs nobody out.

Keys come from a Secret, one per line; each line (at least 32 bytes) is stretched with HKDF into
a Fernet key. :class:`SessionSealer` seals with the first key and opens with any of them
(``MultiFernet``): to rotate, put the new key first and keep the old one until the sessions it
sealed have expired — nobody is logged out. When no session Secret is configured, the key is
derived from the OAuth client secret (with its own HKDF label), so rotating the client secret
ends all sessions.

A sealed session cannot be taken back once it is out, so a logout alone would not end it: the
holder of a copied cookie could go on using it. :class:`RevokedSessions` is the edge's memory of
sessions ended by a logout before their time — each session carries a random id, a logout adds
it with the moment the session would have ended anyway (``maximumDuration`` after the login),
and the entry is forgotten after that moment. It is per process (see ``docs/modules.md``): with
several replicas, a logout on one is not seen by the others, where ``authCheckInterval`` and
``maximumDuration`` bound the session instead.

Nothing here logs, and :class:`SessionSealer`'s ``repr`` shows no key.
"""

from __future__ import annotations

import base64
import heapq
import hmac
import json
from collections.abc import Sequence
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

MIN_KEY_BYTES = 32
"""A session key line shorter than this is refused (a guessable key forges sessions)."""


class SessionKeyError(ValueError):
    """A session key that cannot be used; the message never contains the key."""


def derive_key(secret: bytes, *, label: bytes) -> bytes:
    """A Fernet key (urlsafe base64 of 32 bytes) stretched from ``secret`` with HKDF-SHA256."""
    raw = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=label).derive(secret)
    return base64.urlsafe_b64encode(raw)


def session_keys(text: bytes) -> list[bytes]:
    """The key lines of a session Secret: non-empty lines, first one sealing."""
    lines = [line.strip() for line in text.splitlines()]
    keys = [line for line in lines if line]
    if not keys:
        raise SessionKeyError("holds no key (one key per line, the first one seals)")
    for index, key in enumerate(keys):
        if len(key) < MIN_KEY_BYTES:
            raise SessionKeyError(
                f"key line {index + 1} is {len(key)} bytes; at least {MIN_KEY_BYTES} are required"
            )
    return keys


class SessionSealer:
    """Seals and opens JSON payloads; the first key seals, every key opens."""

    __slots__ = ("_fernet",)

    def __init__(self, secrets: Sequence[bytes], *, label: bytes) -> None:
        if not secrets:
            raise SessionKeyError("no key")
        self._fernet = MultiFernet([Fernet(derive_key(s, label=label)) for s in secrets])

    def __repr__(self) -> str:
        return "SessionSealer(<keys redacted>)"

    def seal(self, payload: dict[str, Any], *, now: float) -> str:
        data = json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()
        return self._fernet.encrypt_at_time(data, int(now)).decode("ascii")

    def open(self, token: str, *, now: float, max_age: float) -> dict[str, Any] | None:
        """The payload, or None when the token is forged, damaged, or older than ``max_age``."""
        try:
            data = self._fernet.decrypt_at_time(
                token.encode("ascii"), ttl=max(1, int(max_age)), current_time=int(now)
            )
            payload = json.loads(data)
        except (InvalidToken, UnicodeError, ValueError):
            return None
        return payload if isinstance(payload, dict) else None


MAX_REVOKED_SESSIONS = 100_000
"""How many logged-out sessions :class:`RevokedSessions` remembers at most (about 10 MiB). Each
entry needs a completed sign-in and logout; past this many unexpired ones, those whose sessions
end soonest are forgotten first (down to 90%, so that a full table is not pruned at each
logout)."""


class RevokedSessions:
    """Session ids ended by a logout, each until the session would have ended anyway."""

    __slots__ = ("_capacity", "_until")

    def __init__(self, *, capacity: int = MAX_REVOKED_SESSIONS) -> None:
        self._capacity = capacity
        self._until: dict[str, float] = {}

    def __len__(self) -> int:
        return len(self._until)

    def revoke(self, session_id: str, *, until: float, now: float) -> None:
        """Refuse ``session_id`` from now until the wall-clock time ``until``."""
        if until <= now:
            return
        self._until[session_id] = max(until, self._until.get(session_id, until))
        if len(self._until) > self._capacity:
            self._until = {key: end for key, end in self._until.items() if end > now}
            # Down to 90%: a full table is not scanned again at the very next logout.
            excess = len(self._until) - self._capacity * 9 // 10
            if len(self._until) > self._capacity and excess > 0:
                for key, _ in heapq.nsmallest(excess, self._until.items(), key=lambda e: e[1]):
                    del self._until[key]

    def is_revoked(self, session_id: str, *, now: float) -> bool:
        until = self._until.get(session_id)
        if until is None:
            return False
        if until <= now:
            del self._until[session_id]
            return False
        return True


REVOKED_SESSIONS = RevokedSessions()
"""The process's logged-out sessions, shared by every route's oauth/oidc module: a route's
module is compiled again whenever its ModuleSet or Secrets change, and a logout must outlive
that."""


def same_secret(given: object, expected: object) -> bool:
    """Whether ``given`` is the text ``expected``, in time that does not tell how much of it
    matched. Compared as UTF-8 bytes: ``hmac.compare_digest`` on ``str`` raises ``TypeError``
    for any non-ASCII character, so a client's ``?state=é`` would be an error, not a mismatch
    (lone surrogates are kept, never an error either). Either not a ``str`` (a claim or a field
    that is missing) matches nothing."""
    if not isinstance(given, str) or not isinstance(expected, str):
        return False
    return hmac.compare_digest(
        given.encode("utf-8", "surrogatepass"), expected.encode("utf-8", "surrogatepass")
    )
