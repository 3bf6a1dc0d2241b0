"""webhookVerification: only requests signed with the shared secret reach the upstream.

Each provider signs differently; all use HMAC-SHA256 and every comparison is
``hmac.compare_digest`` so timing does not reveal how much of a signature was right:

- ``github``: ``X-Hub-Signature-256: sha256=<hex>`` over the raw body. GitHub signs no
  timestamp, so a captured delivery verifies again, forever. With ``replayWindow`` set, a
  delivery whose ``X-GitHub-Delivery`` id was already accepted within the window is refused
  (409), and one without the header is refused (401); ids are remembered only after the
  signature verified, so nobody without the secret can fill the memory, which is bounded
  (:data:`MAX_DELIVERIES`) anyway. The memory belongs to one compiled chain in one process: a
  changed Secret or another replica starts afresh, and GitHub's "Redeliver" (same id) is refused
  within the window. Off by default.
- ``stripe``: ``Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>…]`` over ``<t>.<body>``; any
  ``v1`` may match (Stripe sends several while a secret is rolled); ``t`` within
  :data:`TOLERANCE_SECONDS` of now, so a captured request cannot be replayed later.
- ``slack``: ``X-Slack-Signature: v0=<hex>`` over ``v0:<X-Slack-Request-Timestamp>:<body>``,
  the timestamp within :data:`TOLERANCE_SECONDS`.
- ``generic``: ``X-Signature: sha256=<hex>`` (or bare ``<hex>``) over the raw body.

The secret is the Secret's value with surrounding whitespace removed (``kubectl create secret
--from-file`` keeps the file's trailing newline, which no provider means as part of the key).
"""

from __future__ import annotations

import hashlib
import hmac
from collections import OrderedDict
from collections.abc import Callable, Mapping

from interlock.edge.modules.errors import (
    ModuleConfigError,
    describe_ref,
    lookup_secret,
)
from interlock.edge.modules.view import Rejection, reject
from interlock.model.moduleset import SecretValue, WebhookVerificationModule

TOLERANCE_SECONDS = 300.0

MAX_DELIVERIES = 100_000
"""GitHub delivery ids remembered at most (oldest forgotten first) when replayWindow is set."""

_UNAUTHORIZED = reject(401, "invalid webhook signature\n")
_NO_DELIVERY_ID = reject(401, "the webhook delivery has no X-GitHub-Delivery id\n")
_REPLAYED = reject(409, "webhook delivery already received\n")


class WebhookVerification:
    """Compiled provider and key; the key is kept out of the repr."""

    __slots__ = ("_deliveries", "_key", "_provider", "_ref", "_replay_window", "_wall_clock")

    def __init__(
        self,
        config: WebhookVerificationModule,
        secrets: Mapping[tuple[str, str], SecretValue],
        *,
        wall_clock: Callable[[], float],
        replay_window: float | None = None,
    ) -> None:
        """``replay_window``: ``config.replay_window`` in seconds (see ``ModuleSettings``)."""
        self._provider = config.provider
        self._ref = config.secret_ref
        self._wall_clock = wall_clock
        value = lookup_secret(secrets, config.secret_ref, field="webhookVerification.secretRef")
        self._key = value.reveal().strip()
        self._replay_window = replay_window
        self._deliveries: OrderedDict[str, float] = OrderedDict()
        if not self._key:
            raise ModuleConfigError(
                f"webhookVerification.secretRef ({describe_ref(config.secret_ref)})", "is empty"
            )

    def __repr__(self) -> str:
        return f"WebhookVerification({self.summary()})"

    def check(self, headers: Mapping[str, str], body: bytes | None) -> Rejection | None:
        if body is None:
            # The server did not read the body although the chain asked for it: fail closed.
            return _UNAUTHORIZED
        verified = {
            "github": self._github,
            "stripe": self._stripe,
            "slack": self._slack,
            "generic": self._generic,
        }[self._provider](headers, body)
        if not verified:
            return _UNAUTHORIZED
        window = self._replay_window
        return None if window is None else self._first_delivery(headers, window=window)

    def _first_delivery(self, headers: Mapping[str, str], *, window: float) -> Rejection | None:
        """Refuse a delivery id seen within the replay window; remember this one."""
        delivery = headers.get("X-GitHub-Delivery", "").strip()
        if not delivery:
            return _NO_DELIVERY_ID
        now = self._wall_clock()
        deliveries = self._deliveries
        while deliveries:
            oldest, seen = next(iter(deliveries.items()))
            if now - seen <= window and len(deliveries) < MAX_DELIVERIES:
                break
            del deliveries[oldest]
        seen_at = deliveries.get(delivery)
        if seen_at is not None and now - seen_at <= window:
            return _REPLAYED
        deliveries[delivery] = now
        deliveries.move_to_end(delivery)
        return None

    def _digest(self, message: bytes) -> str:
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def _github(self, headers: Mapping[str, str], body: bytes) -> bool:
        scheme, _, signature = headers.get("X-Hub-Signature-256", "").strip().partition("=")
        return scheme == "sha256" and _equal(signature, self._digest(body))

    def _generic(self, headers: Mapping[str, str], body: bytes) -> bool:
        value = headers.get("X-Signature", "").strip()
        if value.startswith("sha256="):
            value = value[len("sha256=") :]
        return _equal(value, self._digest(body))

    def _stripe(self, headers: Mapping[str, str], body: bytes) -> bool:
        timestamp = ""
        candidates: list[str] = []
        for item in headers.get("Stripe-Signature", "").split(","):
            key, _, value = item.strip().partition("=")
            if key == "t":
                timestamp = value
            elif key == "v1":
                candidates.append(value)
        if not self._fresh(timestamp) or not candidates:
            return False
        expected = self._digest(timestamp.encode() + b"." + body)
        # Compare against every candidate (no early exit) so timing does not say which matched.
        matches = [_equal(candidate, expected) for candidate in candidates]
        return any(matches)

    def _slack(self, headers: Mapping[str, str], body: bytes) -> bool:
        timestamp = headers.get("X-Slack-Request-Timestamp", "").strip()
        scheme, _, signature = headers.get("X-Slack-Signature", "").strip().partition("=")
        if scheme != "v0" or not self._fresh(timestamp):
            return False
        return _equal(signature, self._digest(b"v0:" + timestamp.encode() + b":" + body))

    def _fresh(self, timestamp: str) -> bool:
        if not timestamp.isascii() or not timestamp.isdigit():
            return False
        return abs(self._wall_clock() - int(timestamp)) <= TOLERANCE_SECONDS

    def summary(self) -> dict[str, object]:
        summary: dict[str, object] = {
            "provider": self._provider,
            "secretRef": {"name": self._ref.name, "key": self._ref.key},
        }
        if self._replay_window is not None:
            summary["replayWindowSeconds"] = self._replay_window
        return summary


def _equal(given: str, expected: str) -> bool:
    """Constant-time comparison of hex digests (case-insensitive, as hex is)."""
    try:
        given_bytes = given.strip().lower().encode("ascii")
    except UnicodeEncodeError:
        return False
    return hmac.compare_digest(given_bytes, expected.encode("ascii"))
