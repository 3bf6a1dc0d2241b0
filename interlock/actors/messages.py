"""Messages exchanged by the outbound actors (and read by the policy API).

One module so that senders and receivers agree on one name per concept, and so that each
message states how it is traced (``trace_summary``) and coalesced (``coalesce_key``: in a full
mailbox, a newer message with the same key replaces the queued one — latest state wins).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class PolicyUpdate:
    """A policy as pushed to a watch's subscribers: the model object and its JSON body.

    The body is serialized once per change and shared by every reader of that policy.
    """

    policy: Any
    body: bytes

    def trace_summary(self) -> str:
        return f"PolicyUpdate {len(self.body)} bytes"
