"""basicAuth: users and bcrypt hashes from an htpasswd Secret.

Only bcrypt (``$2y$``, ``$2b$``, ``$2a$``) is accepted: htpasswd's other formats (MD5-crypt
``$apr1$``, SHA1, crypt, plain text) are fast to brute-force, so a Secret holding them is a
configuration error, reported without the offending line (it holds a hash).

Checking must not reveal which users exist: a request naming an unknown user still pays for a
bcrypt check, against a dummy hash of the same cost as the real ones. bcrypt is deliberately slow
(tens of milliseconds at cost 10), so the edge server runs it in a small thread pool
(``interlock.edge.passwords``), never on the event loop, and each answer is cached, keyed by a
MAC of the ``Authorization`` value exactly as sent (keyed BLAKE2s, RFC 7693: a third of an
OpenSSL HMAC-SHA256's cost per request) under a key that lives only in this process: the caches
never hold a password or a hash, only those MACs. The value is MACed, not the credentials
decoded from it, so a cached answer costs no base64 decoding (the value determines the
credentials: two spellings of the same credentials are two entries, each paid for once). Successes
and failures have separate bounded caches (least recently used evicted first), so a client
retrying a stale password costs one bcrypt check, not one per request, while a guesser — every
guess new — still pays for each, and cannot flush the cache of good credentials. The caches
belong to one compiled chain: a changed Secret starts afresh.
"""

from __future__ import annotations

import binascii
import functools
import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import bcrypt
from multidict import istr

from interlock.edge.modules.errors import ModuleConfigError, describe_ref, lookup_secret
from interlock.edge.modules.view import Rejection, reject
from interlock.model.moduleset import BasicAuthModule, SecretValue

CACHE_SIZE = 1024
"""Successful, and separately failed, verifications remembered (per compiled module)."""

_BCRYPT = re.compile(rb"^\$2[aby]\$(\d\d)\$[./A-Za-z0-9]{53}$")

_AUTHORIZATION: Final = istr("Authorization")
"""An ``istr``: a case-insensitive multidict looks it up without folding its case again (half
the cost of a ``str`` key); a plain mapping finds it as the ``str`` it equals."""


class BasicAuth:
    """Compiled htpasswd users; holds hashes, so its repr shows only the realm and user count."""

    __slots__ = (
        "_accepted",
        "_challenge",
        "_dummy",
        "_hashes",
        "_last",
        "_mac",
        "_realm",
        "_ref",
        "_refused",
        "_uses",
    )

    def __init__(
        self, config: BasicAuthModule, secrets: Mapping[tuple[str, str], SecretValue]
    ) -> None:
        self._realm = config.realm
        self._ref = config.secret_ref
        secret = lookup_secret(secrets, config.secret_ref, field="basicAuth.secretRef")
        where = f"basicAuth.secretRef ({describe_ref(self._ref)})"
        self._hashes, cost = _parse_htpasswd(secret, where=where)
        self._dummy = _dummy_hash(cost)
        self._mac = hashlib.blake2s(key=os.urandom(32))
        """Keyed by a key that lives only here; each MAC is a copy of it given the value (a new
        one with ``key=`` parsed its keywords and took the key again on every request)."""
        # When each entry was last used (a count of uses): a hit sets its count (one dict
        # store, no reordering); the least recently used is looked for only when a cache is
        # full, after a bcrypt check (which costs a thousand times more).
        self._accepted: dict[bytes, int] = {}
        self._refused: dict[bytes, int] = {}
        self._uses = 0
        self._last: tuple[str, bytes] | None = None
        """The value last found among the successes, the very object, and its MAC: a
        connection hands its next request with the same headers the same objects (its kept
        headers), so a client's next request is known by an identity test — no MAC (~4,000
        instructions a request, compiled: three calls into hashlib) and no secret compared
        (an identity test takes the same time whatever the values; a string never changes,
        so the same object is the same credentials). Held as the connection holds it, shown
        nowhere (``summary`` and ``repr`` show neither); the caches still hold only MACs."""
        self._challenge = reject(
            401,
            "unauthorized\n",
            {"WWW-Authenticate": f'Basic realm="{config.realm}", charset="UTF-8"'},
        )

    def __repr__(self) -> str:
        return f"BasicAuth({self.summary()})"

    def check(self, headers: Mapping[str, str]) -> Rejection | None:
        """Check inline, bcrypt included (tests and tools; the edge server uses
        :meth:`lookup`, runs the :class:`PasswordCheck` off the event loop, then
        :meth:`record`)."""
        found = self.lookup(headers)
        if not isinstance(found, PasswordCheck):
            return found
        return self.record(found, valid=verify_password(found.password, found.hashed))

    def lookup(self, headers: Mapping[str, str]) -> Rejection | PasswordCheck | None:
        """The answer when it is known without bcrypt (no credentials, a cached answer), else
        the bcrypt check still to run — against the dummy hash for an unknown user, so that it
        costs what a known user's does."""
        authorization = headers.get(_AUTHORIZATION)
        if not authorization:
            return self._challenge
        last = self._last
        if last is not None and last[0] is authorization:
            fingerprint = last[1]
            accepted = self._accepted
            if accepted.get(fingerprint) is not None:  # (not forgotten since)
                accepted[fingerprint] = self._uses = self._uses + 1
                return None
        # The value exactly as sent: UTF-8 with surrogates passed is one-to-one on strings
        # (strict UTF-8, the compiled build's direct call, gives the same bytes when it can).
        try:
            sent = authorization.encode()
        except UnicodeEncodeError:
            sent = authorization.encode("utf-8", "surrogatepass")
        mac = self._mac.copy()
        mac.update(sent)
        fingerprint = mac.digest()
        uses = self._uses = self._uses + 1
        accepted = self._accepted
        if accepted.get(fingerprint) is not None:
            accepted[fingerprint] = uses
            self._last = (authorization, fingerprint)
            return None
        refused = self._refused
        if refused.get(fingerprint) is not None:
            refused[fingerprint] = uses
            return self._challenge
        credentials = _basic_credentials(authorization)
        if credentials is None:
            return self._challenge
        user, password = credentials
        stored = self._hashes.get(user)
        return PasswordCheck(
            fingerprint=fingerprint,
            password=password,
            hashed=stored if stored is not None else self._dummy,
            known=stored is not None,
        )

    def record(self, check: PasswordCheck, *, valid: bool) -> Rejection | None:
        """Remember the outcome of ``check`` and answer with it."""
        accepted = valid and check.known
        cache = self._accepted if accepted else self._refused
        uses = self._uses = self._uses + 1
        cache[check.fingerprint] = uses
        if len(cache) > CACHE_SIZE:
            del cache[min(cache, key=cache.__getitem__)]  # the least recently used
        return None if accepted else self._challenge

    def summary(self) -> dict[str, object]:
        return {
            "realm": self._realm,
            "secretRef": {"name": self._ref.name, "key": self._ref.key},
            "users": len(self._hashes),
        }


@dataclass(frozen=True, slots=True, repr=False)
class PasswordCheck:
    """A bcrypt check to run; holds a password, so its repr shows nothing of it."""

    fingerprint: bytes
    password: bytes
    hashed: bytes
    known: bool

    def __repr__(self) -> str:
        return "PasswordCheck(<redacted>)"


def verify_password(password: bytes, hashed: bytes) -> bool:
    """bcrypt's verdict (deliberately slow: run it off the event loop)."""
    # bcrypt reads at most 72 bytes (htpasswd -B hashed only those); the library refuses more.
    try:
        return bcrypt.checkpw(password[:72], hashed)
    except ValueError:
        # A hash of the right shape that bcrypt still refuses: nobody can log in with it.
        return False


@functools.cache
def _dummy_hash(cost: int) -> bytes:
    """A hash of a random password nobody knows, made once per cost: making one costs as much as
    a check, and routes sharing a ModuleSet would otherwise each pay for it on every compile."""
    return bcrypt.hashpw(os.urandom(16), bcrypt.gensalt(rounds=cost))


def _parse_htpasswd(secret: SecretValue, *, where: str) -> tuple[dict[bytes, bytes], int]:
    """The users' hashes and the highest bcrypt cost among them."""
    hashes: dict[bytes, bytes] = {}
    cost = 4
    for number, raw in enumerate(secret.reveal().splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(b"#"):
            continue
        user, sep, hashed = line.partition(b":")
        if not sep or not user:
            raise ModuleConfigError(where, f"line {number} is not of the form user:hash")
        match = _BCRYPT.match(hashed)
        if match is None:
            raise ModuleConfigError(
                where,
                f"line {number}: the hash is not bcrypt ($2y$, $2b$ or $2a$); "
                "create it with htpasswd -B",
            )
        if user in hashes:
            raise ModuleConfigError(where, f"line {number}: the user is listed twice")
        if not 4 <= int(match.group(1)) <= 31:
            raise ModuleConfigError(where, f"line {number}: the bcrypt cost must be 4 to 31")
        hashes[user] = hashed
        cost = max(cost, int(match.group(1)))
    if not hashes:
        raise ModuleConfigError(where, "holds no users")
    return hashes, cost


def _basic_credentials(authorization: str | None) -> tuple[bytes, bytes] | None:
    """(user, password) from ``Authorization: Basic …``, or None if absent or malformed."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "basic" or not token:
        return None
    try:
        # base64.b64decode(..., validate=True) is this call behind two Python frames.
        decoded = binascii.a2b_base64(token.strip(), strict_mode=True)
    except (binascii.Error, ValueError):
        return None
    user, sep, password = decoded.partition(b":")
    if not sep:
        return None
    return user, password
