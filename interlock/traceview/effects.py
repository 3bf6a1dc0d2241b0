"""What a message *did*, in a platform engineer's words, from its trace record (pure).

A trace record names a message by its type and a redacted summary of its fields
(``Unpublished(topic='service:default/echo-v2', key='service')``): exact, but it reads like a
repr. The viewer labels each arrow with the message's effect instead (``echo-v2 exists →
false``), names participants by kind first (``route/…/default/echo-split``, never
``…default/echo-split`` with the kind cut away), tells start-up and retained-value deliveries
apart so they can be hidden, and gives each correlation a short name. Everything here works on
the record's text alone, so old traces read the same way and nothing is added to the runtime.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from interlock.traceview.load import Message

_PUBLISHED = re.compile(
    r"^(Published|Unpublished)\(topic='([^']*)', key='([^']*)'(?:, value=(\w+))?"
)
_OBJECT_KEY = re.compile(r"ObjectKey\(namespace='([^']*)', name='([^']*)'\)")
_CALL = re.compile(r"^(\w+)\((.*)\)$", re.DOTALL)
_EVENT = re.compile(r"^(Upserted|Deleted) (\w+) (\S*) rv=(\S*)$")

_TOPIC_KINDS = {
    "ingress": "Ingress",
    "moduleset": "ModuleSet",
    "secret": "Secret",
}

INTERNAL_TYPES = frozenset({"Started"})
"""Message types that are the runtime's own bookkeeping: an actor starting."""


def is_internal(message: Message) -> bool:
    """Actor start-up (``Started``) and retained-value deliveries (a ``Published`` an actor
    gets when it subscribes: the runtime sends it on the subscriber's own behalf, so the sender
    is the recipient). Both are hidden unless asked for; what they cause is shown."""
    if message.type in INTERNAL_TYPES:
        return True
    return message.type == "Published" and message.sender == message.recipient


@dataclass
class EffectNamer:
    """Names effects in trace order, remembering what each recipient already knew, so the
    first ``Published`` of a Service to a route reads ``exists → true`` and the next ones
    ``changed``."""

    _known: dict[tuple[str, str, str], bool] = field(default_factory=dict)

    def effect(self, message: Message) -> str:
        summary = message.summary
        published = _PUBLISHED.match(summary)
        if published is not None:
            verb, topic, key, value = published.groups()
            return self._topic(message, verb == "Published", topic, key, value)
        event = _EVENT.match(summary)
        if event is not None:
            verb, kind, name, version = event.groups()
            what = "deleted" if verb == "Deleted" else "changed"
            return f"{kind} {name.lstrip('/')} {what} (rv {version})"
        if message.type == "Started":
            return "start"
        if message.type == "ServiceUpserted":
            return f"Service {_after_type(message)} changed"
        if message.type == "ServiceDeleted":
            return f"Service {_after_type(message)} deleted"
        if message.type == "ReconcileFinished":
            parts = _after_type(message).rsplit(" ", 1)
            return f"{parts[0]} reconciled: {parts[1]}" if len(parts) == 2 else "reconciled"
        if message.type == "RecordEvent":
            parts = _after_type(message).split(" ")
            if len(parts) >= 4:
                return f"Event {parts[3]} ({parts[2]}) on {parts[0]} {parts[1]}"
        return _plain(message)

    def _topic(
        self, message: Message, published: bool, topic: str, key: str, value: str | None
    ) -> str:
        prefix, _, rest = topic.partition(":")
        remembered = (message.recipient, topic, key)
        known = self._known.get(remembered)
        self._known[remembered] = published
        if prefix == "service":
            name = rest.rpartition("/")[2]
            if not published:
                return f"{name} exists → false"
            return f"{name} exists → true" if not known else f"Service {rest} changed"
        if prefix == "parent":
            route = _route_name(key)
            target = _watch_target(message.recipient) or f"Service {rest}"
            if not published:
                return f"policy {target}: {route} withdrawn"
            return f"policy {target}: {route} resolved"
        if prefix == "status":
            if rest == "route":  # all four route kinds; the key names which
                name = _route_name(key)
            else:
                kind = _TOPIC_KINDS.get(rest, rest)
                name = _route_name(key) if "/" in key else f"{kind} {key}"
                if not name.startswith(kind):
                    name = f"{kind} {name}"
            return f"{name}: status to write" if published else f"{name}: status dropped"
        if prefix == "route":  # route:<Kind>:<ns>/<name>
            kind, _, name = rest.partition(":")
            return f"{kind} {name} {'changed' if published else 'deleted'}"
        if prefix in _TOPIC_KINDS:
            kind = _TOPIC_KINDS[prefix]
            return f"{kind} {rest} {'changed' if published else 'deleted'}"
        if prefix == "host":
            return f"edge {rest}: Ingress {key} {'routes' if published else 'withdrawn'}"
        if prefix == "endpoints":
            what = "changed" if published else "deleted"
            return f"endpoints of Service {rest}: {key} {what}"
        if prefix == "grants":
            return f"ReferenceGrant {rest}/{key} {'changed' if published else 'deleted'}"
        if prefix == "ingressclasses":
            return f"IngressClass {key} {'changed' if published else 'deleted'}"
        shown = f"{topic} [{key}]"
        return (
            f"{shown} ← {value}"
            if published and value
            else f"{shown} {'set' if published else 'gone'}"
        )


def _route_name(identity: str) -> str:
    """``gateway.networking.k8s.io/default/web`` → ``HTTPRoute default/web``;
    ``gateway.networking.k8s.io/GRPCRoute/default/web`` → ``GRPCRoute default/web``."""
    parts = identity.split("/")
    if len(parts) == 3:
        return f"HTTPRoute {parts[1]}/{parts[2]}"
    if len(parts) == 4:
        return f"{parts[1]} {parts[2]}/{parts[3]}"
    return identity


def _watch_target(address: str) -> str | None:
    """``watch/default/echo/80/default`` → ``default/echo:80`` (``from NS`` when the client
    namespace differs)."""
    parts = address.split("/")
    if len(parts) != 5 or parts[0] != "watch":
        return None
    _, namespace, service, port, client = parts
    seen = f" from {client}" if client != namespace else ""
    return f"{namespace}/{service}:{port}{seen}"


def _after_type(message: Message) -> str:
    summary = message.summary
    if summary.startswith(message.type + " "):
        return summary[len(message.type) + 1 :]
    return summary


def _plain(message: Message) -> str:
    """A summary without the repr's punctuation: ``TrackService(key=ObjectKey(namespace='default',
    name='echo'), follower='edge')`` → ``TrackService key=default/echo, follower=edge``."""
    summary = _OBJECT_KEY.sub(r"\1/\2", message.summary)
    if summary == message.type or not summary:
        return message.type
    call = _CALL.match(summary)
    if call is not None and call.group(1) == message.type:
        arguments = call.group(2).replace("'", "")
        return f"{message.type} {arguments}" if arguments else message.type
    if summary.startswith(message.type + " "):
        return summary
    return f"{message.type} {summary}"


def short_name(address: str, limit: int = 30) -> str:
    """A participant's name that fits ``limit`` characters, cut from the right so the kind
    stays visible: a dotted API group is elided first (``route/…/default/echo-split``)."""
    if len(address) <= limit:
        return address
    parts = address.split("/")
    if len(parts) > 2 and "." in parts[1]:
        address = "/".join([parts[0], "…", *parts[2:]])
        if len(address) <= limit:
            return address
    return address[: limit - 1] + "…"


def correlation_name(correlation_id: str, first_effect: str | None = None) -> str:
    """A correlation as a person reads it: ``Deleted Service default/echo-v2 rv=28`` →
    ``Service default/echo-v2 deleted``; one the runtime numbered itself (``69``: no external
    event, such as a leadership change) by what its first message did; others as they are."""
    event = _EVENT.match(correlation_id)
    if event is None:
        if correlation_id.isdigit() and first_effect:
            return first_effect
        return correlation_id
    verb, kind, name, _version = event.groups()
    return f"{kind} {name.lstrip('/')} {'deleted' if verb == 'Deleted' else 'changed'}"


def effects(messages: list[Message]) -> dict[str, str]:
    """Each message's effect by id, named in the order the messages were sent."""
    namer = EffectNamer()
    return {m.id: namer.effect(m) for m in sorted(messages, key=lambda m: m.at)}
