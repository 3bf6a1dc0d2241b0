"""ipRestriction: allow and deny CIDRs, checked first so a denied client costs nothing more.

Deny wins over allow; an empty allow list allows every address not denied. A client whose address
cannot be determined is refused whenever any rule exists: a rule the edge cannot evaluate must not
let a request through. Each list is indexed once, when the module is applied
(:class:`~interlock.model.address_ranges.AddressRanges`), so a check costs one bisection per list
however many entries it has: a 40,000-address list is as cheap per request as a short one.

The last verdict is kept with the address object it was given for: a client's requests come from
one peer, whose address ``addresses`` parses once and hands out as the same object, so its next
request is answered by an identity test (the look-up reads ``IPv4Address``'s ``version`` and
``__int__``, two Python calls). The memo holds that address (no secret) and the verdict; an
address is immutable and the lists do not change, so the same object always gets the same one.
"""

from __future__ import annotations

from interlock.edge.modules.addresses import IPAddress
from interlock.edge.modules.view import Rejection, reject
from interlock.model.address_ranges import AddressRanges
from interlock.model.module_settings import IpRestrictionSettings

FORBIDDEN = reject(403, "forbidden\n")


class IpRestriction:
    """Compiled allow/deny networks: kept as written for the summary, indexed for checks."""

    __slots__ = ("_allow", "_allowed", "_denied", "_deny", "_last")

    def __init__(self, settings: IpRestrictionSettings) -> None:
        self._allow = settings.allow
        self._deny = settings.deny
        self._allowed = AddressRanges(self._allow)
        self._denied = AddressRanges(self._deny)
        self._last: tuple[IPAddress, Rejection | None] | None = None
        """The last address checked (the very object) and its verdict."""

    def __repr__(self) -> str:
        return f"IpRestriction({self.summary()})"

    def check(self, address: IPAddress | None) -> Rejection | None:
        last = self._last
        if last is not None and last[0] is address:
            return last[1]
        verdict = self._verdict(address)
        if address is not None:
            self._last = (address, verdict)
        return verdict

    def _verdict(self, address: IPAddress | None) -> Rejection | None:
        if not self._allow and not self._deny:
            return None
        if address is None or (self._deny and address in self._denied):
            return FORBIDDEN
        if self._allow and address not in self._allowed:
            return FORBIDDEN
        return None

    def summary(self) -> dict[str, object]:
        return {"allow": [str(n) for n in self._allow], "deny": [str(n) for n in self._deny]}
