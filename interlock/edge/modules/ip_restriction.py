"""ipRestriction: allow and deny CIDRs, checked first so a denied client costs nothing more.

Deny wins over allow; an empty allow list allows every address not denied. A client whose address
cannot be determined is refused whenever any rule exists: a rule the edge cannot evaluate must not
let a request through.
"""

from __future__ import annotations

from interlock.edge.modules.addresses import IPAddress, in_any, parse_networks
from interlock.edge.modules.view import Rejection, reject
from interlock.model.moduleset import IpRestrictionModule

FORBIDDEN = reject(403, "forbidden\n")


class IpRestriction:
    """Compiled allow/deny networks."""

    __slots__ = ("_allow", "_deny")

    def __init__(self, config: IpRestrictionModule) -> None:
        self._allow = parse_networks(config.allow, field="ipRestriction.allow")
        self._deny = parse_networks(config.deny, field="ipRestriction.deny")

    def __repr__(self) -> str:
        return f"IpRestriction({self.summary()})"

    def check(self, address: IPAddress | None) -> Rejection | None:
        if not self._allow and not self._deny:
            return None
        if address is None or in_any(address, self._deny):
            return FORBIDDEN
        if self._allow and not in_any(address, self._allow):
            return FORBIDDEN
        return None

    def summary(self) -> dict[str, object]:
        return {"allow": [str(n) for n in self._allow], "deny": [str(n) for n in self._deny]}
