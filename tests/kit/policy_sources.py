"""A real :class:`~interlock.api.policy.PolicySource` for the policy API's tests (HTTP and gRPC):
the test sets each target's current policy, and every watch open on the target gets it, as the
service-port watches give theirs."""

from __future__ import annotations

from interlock.api.policy import PolicySource
from interlock.mailbox.slot import LatestValueSlot
from interlock.model.policy_watch import PolicyUpdate, WatchTarget


class ControlledSource(PolicySource):
    """One current policy per target, pushed to every open slot; ``asked`` lists the targets
    watches were opened on, in order."""

    def __init__(self) -> None:
        self.current: dict[WatchTarget, PolicyUpdate] = {}
        self.open: dict[WatchTarget, list[LatestValueSlot[PolicyUpdate]]] = {}
        self.asked: list[WatchTarget] = []

    def put(self, target: WatchTarget, update: PolicyUpdate) -> None:
        self.current[target] = update
        for slot in self.open.get(target, []):
            slot.put(update)

    def open_watch(self, target: WatchTarget) -> LatestValueSlot[PolicyUpdate]:
        self.asked.append(target)
        slot: LatestValueSlot[PolicyUpdate] = LatestValueSlot()
        self.open.setdefault(target, []).append(slot)
        if target in self.current:
            slot.put(self.current[target])
        return slot

    def close_watch(self, target: WatchTarget, slot: LatestValueSlot[PolicyUpdate]) -> None:
        self.open[target].remove(slot)

    def readers(self, target: WatchTarget) -> int:
        return len(self.open.get(target, []))
