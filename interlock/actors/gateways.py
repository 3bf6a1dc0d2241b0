"""GatewayController: the one actor that decides everything about interlock's Gateways.

Gateways are few (one per team or environment, not one per route) and everything about them is
entangled: a Gateway's address depends on the other Gateways (one pool), a listener's
``attachedRoutes`` on every route naming it, a route's status on the Gateway's listeners and on
its namespace's labels. So one actor holds the GatewayClasses, Gateways, the routes that name a
Gateway, and the Namespaces' labels (told by the informer router), follows the Services,
ReferenceGrants, Secrets and ConfigMaps those reference (subscribed, so each arrives with its
current value and every change after), and on every change recomputes the whole picture with the
pure functions of ``model/gateway_class.py``, ``gateway_listeners.py`` and ``gateway_routes.py``. A
burst of changes costs one recompute: while more messages wait in its mailbox the recompute
waits for them.

It publishes only what changed:

* the desired status of each of our GatewayClasses and Gateways (``status:gateway``), written by
  the StatusWriter;
* each route's ``status.parents`` entries for our Gateways (``gateway-parents:...``), which the
  route's RouteActor writes beside its Service parents' entries — one writer per route status;
* what each Gateway with an address serves (``gateway-serving``), which the data-plane actor
  turns into listeners.

Routes without a Gateway parent never reach it, so a mesh of 50,000 Service-parented routes
costs it nothing.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from loguru import logger

from interlock.actors.edge_messages import (
    SecretData,
)
from interlock.actors.gateway_messages import (
    CA_BUNDLE_KEY,
    GATEWAY_CONTROLLER,
    GATEWAY_PARENTS_KEY,
    CABundle,
    DesiredGatewayService,
    DesiredGatewayStatus,
    GatewayParentEntries,
    PortFailures,
    Recompute,
)
from interlock.actors.messages import (
    SERVICE_KEY,
    ObjectParsed,
)
from interlock.actors.topics import (
    CA_BUNDLE,
    GATEWAY_PARENTS,
    GATEWAY_SERVICES_TOPIC,
    GATEWAY_SERVING_TOPIC,
    GATEWAY_STATUS_TOPIC,
    GRANTS,
    MODULESET,
    SECRET,
    SERVICE,
    KindKey,
)
from interlock.mailbox import (
    DONE,
    Actor,
    BackoffPolicy,
    Published,
    Reconciler,
    TransientError,
    Unpublished,
)
from interlock.mailbox.reconciler import Result
from interlock.model.backend_tls import (
    BackendTLSPolicy,
    backend_tls_status,
    ca_dependencies,
    client_certificate,
    client_certificate_dependency,
    resolve_backend_tls,
    serve_backend_tls,
    serving_backends,
)
from interlock.model.gateway import (
    HTTPRequestMirrorFilter,
    ReferenceGrant,
)
from interlock.model.gateway_class import (
    GATEWAY_CONTROLLER_NAME,
    GatewayClass,
    gateway_class_status,
)
from interlock.model.gateway_infrastructure import gateway_service
from interlock.model.gateway_listeners import (
    AddressProblem,
    Gateway,
    assign_addresses,
    certificate_dependencies,
    frontend_ca_dependencies,
    gateway_status,
    listener_certificate_dependencies,
    listener_problems,
)
from interlock.model.gateway_mirrors import (
    mirror_dependencies,
    resolve_mirrors,
)
from interlock.model.gateway_modules import (
    listener_module_names,
    module_dependencies,
    modules_condition,
    resolve_listener_modules,
    resolve_rule_modules,
)
from interlock.model.gateway_route_input import GatewayRouteInput
from interlock.model.gateway_routes import (
    GatewayRoute,
    GatewayServing,
    GatewayView,
    RejectedRoute,
    RouteId,
    attach_routes,
    statuses_equal,
)
from interlock.model.listener_sets import (
    ListenerSet,
    listener_set_outcomes,
    listener_set_status,
    parent_accepted,
)
from interlock.model.meta import ObjectKey
from interlock.model.moduleset import ModuleSet, SecretValue
from interlock.model.route_dependencies import route_grant_namespaces, route_service_dependencies
from interlock.model.service import Service

GATEWAY_ROUTE_KINDS = frozenset({"HTTPRoute", "GRPCRoute", "TLSRoute"})
"""The route kinds HTTP and HTTPS listeners carry, and TLS (Passthrough) ones."""

_K = TypeVar("_K")
_V = TypeVar("_V")

MAX_DEFERRED = 256
"""Changes a recompute may wait behind before it runs anyway (a mailbox that never empties)."""


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _status_key(kind: str, key: ObjectKey) -> str:
    return f"{kind}/{key}"


@dataclass(eq=False, slots=True)
class GatewayTables:
    """What the GatewayController holds, kept outside its instances (see ``__init__``)."""

    classes: dict[str, GatewayClass] = field(default_factory=dict)
    gateways: dict[ObjectKey, Gateway] = field(default_factory=dict)
    listener_sets: dict[ObjectKey, ListenerSet] = field(default_factory=dict)
    routes: dict[RouteId, GatewayRoute | RejectedRoute] = field(default_factory=dict)
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)
    services: dict[ObjectKey, Service] = field(default_factory=dict)
    grants: dict[str, dict[str, ReferenceGrant]] = field(default_factory=dict)
    secrets: dict[ObjectKey, SecretData] = field(default_factory=dict)
    module_sets: dict[ObjectKey, ModuleSet] = field(default_factory=dict)
    module_names: dict[RouteId, dict[int, tuple[str, ...]]] = field(default_factory=dict)
    """Per route: the ModuleSets each rule's ExtensionRef filters name."""
    mirror_filters: dict[RouteId, dict[int, tuple[HTTPRequestMirrorFilter | str, ...]]] = field(
        default_factory=dict
    )
    """Per route: each rule's RequestMirror filters (as written, or why they do not parse)."""
    inputs: set[str] = field(default_factory=set)
    status: dict[str, DesiredGatewayStatus] = field(default_factory=dict)
    parents: dict[RouteId, tuple[dict[str, Any], ...]] = field(default_factory=dict)
    serving: dict[ObjectKey, GatewayServing] = field(default_factory=dict)
    gateway_services: dict[str, DesiredGatewayService] = field(default_factory=dict)
    """What was published on ``gateway-services``, per Gateway (``ns/name``)."""
    port_failures: dict[str, dict[int, str]] = field(default_factory=dict)
    """Per Gateway (``ns/name``): the ports the data plane could not open, with why."""
    addresses: dict[ObjectKey, str] = field(default_factory=dict)
    """Per Gateway: the address it was last given (kept before its status's, which lags)."""
    backend_tls_policies: dict[ObjectKey, BackendTLSPolicy] = field(default_factory=dict)
    ca_bundles: dict[ObjectKey, str | None] = field(default_factory=dict)
    """The ``ca.crt`` of the ConfigMaps the policies name (None: it has none)."""


class GatewayController(Actor):
    """Keeps interlock's GatewayClasses, Gateways and their routes; see the module docstring."""

    reconciles = "Gateway"

    def __init__(
        self,
        *,
        address_pool: Sequence[str],
        tables: GatewayTables | None = None,
        now: Callable[[], datetime] = _utc_now,
    ) -> None:
        """``tables`` outlive the instance: a restarted controller keeps every object it was
        told (they are not told again) and knows what it published."""
        self.address_pool = tuple(address_pool)
        self.now = now
        tables = tables or GatewayTables()
        self.classes = tables.classes
        self.gateways = tables.gateways
        self.listener_sets = tables.listener_sets
        self.routes = tables.routes
        self.namespaces = tables.namespaces
        self.services = tables.services
        self.grants = tables.grants
        self.secrets = tables.secrets
        self.module_sets = tables.module_sets
        self.module_names = tables.module_names
        self.mirror_filters = tables.mirror_filters
        self.inputs = tables.inputs
        self.sent_status = tables.status
        self.sent_parents = tables.parents
        self.sent_serving = tables.serving
        self.sent_services = tables.gateway_services
        self.port_failures = tables.port_failures
        self.assigned_addresses = tables.addresses
        self.backend_tls_policies = tables.backend_tls_policies
        self.ca_bundles = tables.ca_bundles
        self.deferred = 0
        self.dirty = True

    async def started(self) -> None:
        # A restarted instance recomputes from the tables its predecessor filled.
        self.tell(self.address, Recompute())

    async def receive(self, message: object) -> object | None:
        if isinstance(message, ObjectParsed):
            self._take_object(message)
        elif isinstance(message, PortFailures):
            failures = dict(message.failures)
            if self.port_failures.get(message.gateway, {}) == failures:
                return None
            if failures:
                self.port_failures[message.gateway] = failures
            else:
                self.port_failures.pop(message.gateway, None)
            self.dirty = True
        elif isinstance(message, Published | Unpublished):
            self._take_input(message)
        elif not isinstance(message, Recompute):
            return None
        if not self.dirty:
            return None
        if self.mail_waiting() and self.deferred < MAX_DEFERRED:
            self.deferred += 1
            self.tell(self.address, Recompute())
            return None
        self._recompute()
        return None

    # --- inputs -------------------------------------------------------------------------------

    def _take_object(self, change: ObjectParsed) -> None:
        """Keep a parsed object, or forget it (deleted, or unreadable: the router logged why).
        A route is never unreadable: one that does not parse arrives as a ``RejectedRoute``."""
        kind, key, value = change.kind, change.key, None if change.deleted else change.value
        if kind == "GatewayClass":
            self._store(self.classes, key.name, value, GatewayClass)
        elif kind == "Gateway":
            self._store(self.gateways, key, value, Gateway)
        elif kind == "ListenerSet":
            self._store(self.listener_sets, key, value, ListenerSet)
        elif kind == "BackendTLSPolicy":
            self._store(self.backend_tls_policies, key, value, BackendTLSPolicy)
        elif kind == "Namespace":
            labels = value if isinstance(value, dict) else None
            if self.namespaces.get(key.name) == labels:
                return
            if labels is None:
                self.namespaces.pop(key.name, None)
            else:
                self.namespaces[key.name] = labels
        elif kind in GATEWAY_ROUTE_KINDS:
            if not self._take_route((kind, key), value):
                return
        else:
            return
        self.dirty = True

    def _take_route(self, route: RouteId, value: object | None) -> bool:
        """Keep a route naming a Gateway, or forget it; whether anything changed."""
        if not isinstance(value, GatewayRouteInput) or value.route is None:
            self.module_names.pop(route, None)
            self.mirror_filters.pop(route, None)
            return self.routes.pop(route, None) is not None
        if isinstance(value.route, RejectedRoute):
            logger.warning("{}; not served by its Gateways until it is fixed", value.route.message)
        self.routes[route] = value.route
        if value.mirror_filters:
            self.mirror_filters[route] = dict(value.mirror_filters)
        else:
            self.mirror_filters.pop(route, None)
        if value.module_names:
            self.module_names[route] = dict(value.module_names)
        else:
            self.module_names.pop(route, None)
        return True

    @staticmethod
    def _store(table: dict[_K, _V], key: _K, value: object | None, model: type[_V]) -> None:
        """Keep ``value`` if it is a ``model``, or forget the key's (deleted, or invalid)."""
        if isinstance(value, model):
            table[key] = value
        else:
            table.pop(key, None)

    def _take_input(self, message: Published | Unpublished) -> None:
        if message.topic not in self.inputs:
            return
        value = message.value if isinstance(message, Published) else None
        topic = message.topic
        if (key := SERVICE.key_of(topic)) is not None:
            self._store(self.services, key, value, Service)
        elif (namespace := GRANTS.key_of(topic)) is not None:
            grants = self.grants.setdefault(namespace, {})
            if isinstance(value, ReferenceGrant):
                if grants.get(message.key) is value:
                    return
                grants[message.key] = value
            elif grants.pop(message.key, None) is None:
                return
        elif (key := SECRET.key_of(topic)) is not None:
            data = value if isinstance(value, SecretData) else None
            if self.secrets.get(key) == data:
                return
            if data is None:
                self.secrets.pop(key, None)
            else:
                self.secrets[key] = data
        elif (key := CA_BUNDLE.key_of(topic)) is not None:
            if isinstance(value, CABundle):
                if key in self.ca_bundles and self.ca_bundles[key] == value.pem:
                    return
                self.ca_bundles[key] = value.pem
            elif key in self.ca_bundles:
                del self.ca_bundles[key]
            else:
                return
        elif (key := MODULESET.key_of(topic)) is not None:
            module_set = value if isinstance(value, ModuleSet) else None
            if self.module_sets.get(key) is module_set:
                return
            if module_set is None:
                self.module_sets.pop(key, None)
            else:
                self.module_sets[key] = module_set
        self.dirty = True

    def _follow_inputs(self, ours: dict[ObjectKey, Gateway]) -> None:
        wanted: set[str] = set()
        for route in self.routes.values():
            if not isinstance(route, RejectedRoute):
                wanted.update(SERVICE.topic(key) for key in route_service_dependencies(route))
                wanted.update(GRANTS.topic(ns) for ns in route_grant_namespaces(route))
        for (_, route_key), mirrors in self.mirror_filters.items():
            mirror_services, mirror_grants = mirror_dependencies(route_key.namespace, mirrors)
            wanted.update(SERVICE.topic(key) for key in mirror_services)
            wanted.update(GRANTS.topic(namespace) for namespace in mirror_grants)
        for (_, route_key), names in self.module_names.items():
            sets, secrets = module_dependencies(route_key.namespace, names, self.module_sets)
            wanted.update(MODULESET.topic(key) for key in sets)
            wanted.update(SECRET.topic(key) for key in secrets)
        for gateway in ours.values():
            annotations = gateway.metadata.annotations
            for listener in (None, *(listener.name for listener in gateway.spec.listeners)):
                if found_names := listener_module_names(annotations, listener):
                    sets, secrets = module_dependencies(
                        gateway.metadata.namespace, {0: found_names}, self.module_sets
                    )
                    wanted.update(MODULESET.topic(key) for key in sets)
                    wanted.update(SECRET.topic(key) for key in secrets)
            client = client_certificate_dependency(gateway)
            for key in (*certificate_dependencies(gateway), *(() if client is None else (client,))):
                wanted.add(SECRET.topic(key))
                if key.namespace != gateway.metadata.namespace:
                    wanted.add(GRANTS.topic(key.namespace))
            for key in frontend_ca_dependencies(gateway):
                wanted.add(CA_BUNDLE.topic(key))
                if key.namespace != gateway.metadata.namespace:
                    wanted.add(GRANTS.topic(key.namespace))
        for listener_set in self.listener_sets.values():
            if listener_set.parent() not in ours:
                continue
            namespace = listener_set.metadata.namespace
            for key in listener_certificate_dependencies(namespace, listener_set.spec.listeners):
                wanted.add(SECRET.topic(key))
                if key.namespace != namespace:
                    wanted.add(GRANTS.topic(key.namespace))
        for policy in self.backend_tls_policies.values():
            wanted.update(CA_BUNDLE.topic(key) for key in ca_dependencies(policy))
        for topic in self.inputs - wanted:
            self.unsubscribe(topic)
            self._forget(topic)
        for topic in sorted(wanted - self.inputs):
            self._load(topic, self.subscribe(topic))
        self.inputs.clear()
        self.inputs.update(wanted)

    def _forget(self, topic: str) -> None:
        if (key := SERVICE.key_of(topic)) is not None:
            self.services.pop(key, None)
        elif (key := SECRET.key_of(topic)) is not None:
            self.secrets.pop(key, None)
        elif (key := MODULESET.key_of(topic)) is not None:
            self.module_sets.pop(key, None)
        elif (key := CA_BUNDLE.key_of(topic)) is not None:
            self.ca_bundles.pop(key, None)
        elif (namespace := GRANTS.key_of(topic)) is not None:
            self.grants.pop(namespace, None)

    def _load(self, topic: str, retained: Mapping[str, object]) -> None:
        """Take a new subscription's retained values now (their notifications follow and are
        taken again, unchanged)."""
        if (key := SERVICE.key_of(topic)) is not None:
            service = retained.get(SERVICE_KEY)
            if isinstance(service, Service):
                self.services[key] = service
        elif (key := SECRET.key_of(topic)) is not None:
            for value in retained.values():
                if isinstance(value, SecretData):
                    self.secrets[key] = value
        elif (key := MODULESET.key_of(topic)) is not None:
            for value in retained.values():
                if isinstance(value, ModuleSet):
                    self.module_sets[key] = value
        elif (key := CA_BUNDLE.key_of(topic)) is not None:
            found = retained.get(CA_BUNDLE_KEY)
            if isinstance(found, CABundle):
                self.ca_bundles[key] = found.pem
        elif (namespace := GRANTS.key_of(topic)) is not None:
            self.grants[namespace] = {
                k: v for k, v in retained.items() if isinstance(v, ReferenceGrant)
            }

    # --- outputs ------------------------------------------------------------------------------

    def _recompute(self) -> None:
        self.dirty = False
        self.deferred = 0
        now = self.now()
        ours_classes = {name: cls for name, cls in self.classes.items() if cls.is_ours}
        ours = {
            key: gateway
            for key, gateway in self.gateways.items()
            if gateway.spec.gateway_class_name in ours_classes
        }
        self._follow_inputs(ours)
        # The follow may have loaded ModuleSets naming Secrets not yet followed: once more.
        self._follow_inputs(ours)
        grants = [grant for table in self.grants.values() for grant in table.values()]
        certificates = {key: dict(data.values) for key, data in self.secrets.items()}
        secret_models = {
            key: data.to_model()
            for key, data in self.secrets.items()
            if any(key.namespace == route.namespace for _, route in self.module_names)
            or any(key.namespace == gateway.namespace for gateway in ours)
        }
        rule_modules = {
            key: resolve_rule_modules(key[1].namespace, names, self.module_sets, secret_models)
            for key, names in self.module_names.items()
            if key in self.routes
        }
        mirrors = {
            key: resolve_mirrors(
                key[0], key[1].namespace, filters, services=self.services, grants=grants
            )
            for key, filters in self.mirror_filters.items()
            if key in self.routes
        }
        addresses = assign_addresses(ours.values(), self.address_pool, self.assigned_addresses)
        self.assigned_addresses.clear()
        self.assigned_addresses.update(
            (key, found) for key, found in addresses.items() if isinstance(found, str)
        )
        views = {
            key: self._view(gateway, addresses[key], certificates, grants)
            for key, gateway in ours.items()
        }
        listener_modules = {
            key: resolve_listener_modules(
                key.namespace,
                view.gateway.metadata.annotations,
                ((check.owner, check.listener.name) for check in view.attached_checks()),
                self.module_sets,
                secret_models,
            )
            for key, view in views.items()
        }
        outcome = attach_routes(
            views,
            self.routes.values(),
            services=self.services,
            grants=grants,
            namespace_labels=self.namespaces,
            now=now,
            rule_modules=rule_modules,
            rule_mirrors={key: found[0] for key, found in mirrors.items()},
            mirror_problems={key: found[1] for key, found in mirrors.items() if found[1]},
            listener_modules={
                (key, owner, name): found
                for key, by_listener in listener_modules.items()
                for (owner, name), found in by_listener.items()
            },
        )
        statuses: dict[str, DesiredGatewayStatus] = {}
        for name, gateway_class in ours_classes.items():
            key = ObjectKey(namespace="", name=name)
            statuses[_status_key("GatewayClass", key)] = DesiredGatewayStatus(
                kind="GatewayClass",
                key=key,
                status=gateway_class_status(gateway_class, now=now),
                stored=gateway_class.status,
                uid=gateway_class.metadata.uid,
            )
        clients = {
            key: client_certificate(gateway, secrets=certificates, grants=grants)
            for key, gateway in ours.items()
        }
        for key, view in views.items():
            client = clients[key]
            statuses[_status_key("Gateway", key)] = DesiredGatewayStatus(
                kind="Gateway",
                key=key,
                status=gateway_status(
                    view.gateway,
                    view.checks,
                    address=view.address,
                    attached=outcome.attached.get(key, {}),
                    now=now,
                    port_failures=self.port_failures.get(str(key)),
                    attached_listener_sets=sum(
                        1 for found in view.listener_sets.values() if found.accepted
                    ),
                    resolved_refs=(
                        None if client is None else (client.resolved, client.reason, client.message)
                    ),
                    listener_set_checks=view.attached_checks()[len(view.checks) :],
                    modules=modules_condition(
                        view.gateway.metadata.annotations,
                        (listener.name for listener in view.gateway.spec.listeners),
                        listener_modules[key].values(),
                    ),
                ),
                stored=view.gateway.status,
                uid=view.gateway.metadata.uid,
            )
            for set_key, found in view.listener_sets.items():
                listener_set = self.listener_sets[set_key]
                statuses[_status_key("ListenerSet", set_key)] = DesiredGatewayStatus(
                    kind="ListenerSet",
                    key=set_key,
                    status=listener_set_status(
                        listener_set,
                        found,
                        address=view.address,
                        attached=outcome.listener_set_attached.get(set_key, {}),
                        now=now,
                        port_failures=self.port_failures.get(str(key)),
                    ),
                    stored=listener_set.status,
                    uid=listener_set.metadata.uid,
                )
        resolution = resolve_backend_tls(
            self.backend_tls_policies.values(), services=self.services, ca_bundles=self.ca_bundles
        )
        backends = {key: serving_backends(served) for key, served in outcome.serving.items()}
        for key, policy in self.backend_tls_policies.items():
            status = backend_tls_status(
                policy, resolution, services=self.services, gateway_backends=backends, now=now
            )
            if status == {"ancestors": policy.status.get("ancestors", [])} and not any(
                entry.get("controllerName") == GATEWAY_CONTROLLER_NAME
                for entry in status["ancestors"]
            ):
                continue  # none of ours, now or stored: not ours to write
            statuses[_status_key("BackendTLSPolicy", key)] = DesiredGatewayStatus(
                kind="BackendTLSPolicy",
                key=key,
                status=status,
                stored={"ancestors": policy.status.get("ancestors", [])},
                uid=policy.metadata.uid,
            )
        self._publish_statuses(statuses)
        self._publish_services(
            {
                str(key): DesiredGatewayService(key, gateway_service(view.gateway, view.address))
                for key, view in views.items()
            }
        )
        self._publish_parents(dict(outcome.parents))
        self._publish_serving(
            {
                key: serve_backend_tls(
                    served,
                    resolution,
                    None if (client := clients.get(key)) is None else client.pair,
                )
                for key, served in outcome.serving.items()
            }
        )

    def _view(
        self,
        gateway: Gateway,
        address: str | AddressProblem,
        certificates: Mapping[ObjectKey, Mapping[str, SecretValue]],
        grants: Sequence[ReferenceGrant],
    ) -> GatewayView:
        """A Gateway with its listeners checked and the ListenerSets naming it."""
        checks = listener_problems(
            gateway, secrets=certificates, grants=grants, ca_bundles=self.ca_bundles
        )
        return GatewayView(
            gateway=gateway,
            checks=checks,
            address=address,
            listener_sets=listener_set_outcomes(
                gateway,
                checks,
                (ls for ls in self.listener_sets.values() if ls.parent() == gateway.key),
                accepted=parent_accepted(checks, address, self.port_failures.get(str(gateway.key))),
                namespace_labels=self.namespaces,
                secrets=certificates,
                grants=grants,
                ca_bundles=self.ca_bundles,
            ),
        )

    def _publish_services(self, services: dict[str, DesiredGatewayService]) -> None:
        for key in sorted(set(self.sent_services) - set(services)):
            self.unpublish(GATEWAY_SERVICES_TOPIC, key)
            del self.sent_services[key]
        for key, desired in services.items():
            if self.sent_services.get(key) != desired:
                self.sent_services[key] = desired
                self.publish(GATEWAY_SERVICES_TOPIC, key, desired)

    def _publish_statuses(self, statuses: dict[str, DesiredGatewayStatus]) -> None:
        for key in sorted(set(self.sent_status) - set(statuses)):
            self.unpublish(GATEWAY_STATUS_TOPIC, key)
            del self.sent_status[key]
        for key, desired in statuses.items():
            sent = self.sent_status.get(key)
            if (
                sent is not None
                and statuses_equal(sent.status, desired.status)
                and (sent.stored == desired.stored)
            ):
                continue
            self.sent_status[key] = desired
            self.publish(GATEWAY_STATUS_TOPIC, key, desired)

    def _publish_parents(self, parents: dict[RouteId, tuple[dict[str, Any], ...]]) -> None:
        wanted = {key: entries for key, entries in parents.items() if entries}
        for key in sorted(set(self.sent_parents) - set(wanted), key=str):
            self.unpublish(GATEWAY_PARENTS.topic(KindKey(key[0], key[1])), GATEWAY_PARENTS_KEY)
            del self.sent_parents[key]
        for key, entries in wanted.items():
            sent = self.sent_parents.get(key)
            if sent is not None and statuses_equal(list(sent), list(entries)):
                continue
            self.sent_parents[key] = entries
            self.publish(
                GATEWAY_PARENTS.topic(KindKey(key[0], key[1])),
                GATEWAY_PARENTS_KEY,
                GatewayParentEntries(entries),
            )

    def _publish_serving(self, serving: dict[ObjectKey, GatewayServing]) -> None:
        for key in sorted(set(self.sent_serving) - set(serving), key=str):
            self.unpublish(GATEWAY_SERVING_TOPIC, str(key))
            del self.sent_serving[key]
        for key, served in serving.items():
            if self.sent_serving.get(key) == served:
                continue
            self.sent_serving[key] = served
            self.publish(GATEWAY_SERVING_TOPIC, str(key), served)


class AppliedGateway(Protocol):
    """What applying a Gateway did (``edge/gateway_ports.Applied``)."""

    @property
    def failures(self) -> Mapping[int, str]:
        """Ports that could not be opened, with why."""
        ...

    @property
    def transient(self) -> bool:
        """A rule's modules failed in a way worth retrying without an input change."""
        ...


class GatewayFrontDoors(Protocol):
    """What the data-plane actor drives (``edge/gateway_ports.GatewayPorts`` in a controller)."""

    async def apply(self, key: str, serving: GatewayServing) -> AppliedGateway:
        """Serve a Gateway."""
        ...

    async def remove(self, key: str) -> None:
        """Stop serving a Gateway."""
        ...


DEFAULT_GATEWAY_BACKOFF = BackoffPolicy(initial=0.5, maximum=60.0, jitter=0.5)
"""Retry delays of modules that failed transiently: 0.5 s doubling to 60 s, plus up to 50 %."""


class GatewayDataPlane(Reconciler[str]):
    """Opens, reprograms and closes the Gateways' listeners as ``gateway-serving`` changes.

    A :class:`~interlock.mailbox.Reconciler` keyed by Gateway, reconciled one at a time
    (opening a socket awaits); a newer value of one Gateway queued behind the one being applied
    replaces it, so the latest configuration is what ends up served. Modules that failed
    transiently (an identity provider not answering) and ports another process holds are
    applied again after the runtime's backoff; other failures wait for an input change, which
    arrives as a new value.
    """

    reconciles = "Gateway"

    def __init__(
        self,
        *,
        front_doors: GatewayFrontDoors,
        backoff: BackoffPolicy = DEFAULT_GATEWAY_BACKOFF,
        rng: random.Random | None = None,
    ) -> None:
        super().__init__(backoff=backoff, rng=rng)
        self.front_doors = front_doors
        self.serving: dict[str, GatewayServing] = {}
        """What each Gateway should serve (``gateway-serving``'s retained values)."""
        self.reported: dict[str, tuple[tuple[int, str], ...]] = {}
        """The port failures last told to the GatewayController, per Gateway."""

    async def started(self) -> None:
        self.subscribe(GATEWAY_SERVING_TOPIC)

    async def handle(self, message: object) -> object | None:
        if isinstance(message, Published) and isinstance(message.value, GatewayServing):
            self.serving[message.key] = message.value
            self.request(message.key)
        elif isinstance(message, Unpublished):
            self.serving.pop(message.key, None)
            self.request(message.key)
        return None

    async def reconcile(self, key: str) -> Result:
        serving = self.serving.get(key)
        if serving is None:
            if self.reported.pop(key, ()):
                self.tell(GATEWAY_CONTROLLER, PortFailures(key, ()))
            await self.front_doors.remove(key)
            return DONE
        applied = await self.front_doors.apply(key, serving)
        failures = tuple(sorted(applied.failures.items()))
        if self.reported.get(key, ()) != failures:
            self.reported[key] = failures
            self.tell(GATEWAY_CONTROLLER, PortFailures(key, failures))
        # A port another process holds may be freed: try again, as for transient modules.
        if applied.transient or failures:
            ports = ", ".join(f"{port}: {why}" for port, why in failures)
            raise TransientError(ports or "modules failed transiently")
        return DONE
