"""An edge worker's pushed tables answer as the controller's own tables do."""

from __future__ import annotations

from interlock.actors.upstream_cache import UpstreamTables
from interlock.dataplane.pushed_upstreams import PushedUpstreams
from interlock.model.meta import ObjectKey
from interlock.model.service import ServicePortKey, parse_service
from interlock.model.upstream_table import (
    ServiceEndpoints,
    TableChanges,
    UpstreamTable,
    table_changes,
)
from tests.kit.grpc_policies import policy_of

WEB = ObjectKey(namespace="default", name="web")
SERVICE = {
    "metadata": {"name": "web", "namespace": "default"},
    "spec": {"ports": [{"name": "http", "port": 80}, {"name": "admin", "port": 9090}]},
}
ASKED = [
    ServicePortKey("default", "web", 80),  # ready addresses
    ServicePortKey("default", "web", 9090),  # none ready
    ServicePortKey("default", "web", 81),  # no such port
    ServicePortKey("default", "ghost", 80),  # no such Service
    ServicePortKey("default", "later", 80),  # not known yet
]


def controller_tables() -> UpstreamTables:
    tables = UpstreamTables()
    ghost = ObjectKey(namespace="default", name="ghost")
    tables.known |= {WEB, ghost}
    tables.services[WEB] = parse_service(SERVICE)
    tables.addresses[ServicePortKey("default", "web", 80)] = [("10.0.0.1", 8080)]
    tables.addresses[ServicePortKey("default", "web", 9090)] = []
    return tables


def pushed_copy() -> PushedUpstreams:
    """What the controller pushes for the same state (``edge_table``'s rows)."""
    pushed = PushedUpstreams()
    pushed.apply(
        table_changes(
            None,
            UpstreamTable(
                services={
                    WEB: ServiceEndpoints(
                        known=True, exists=True, ports=((80, (("10.0.0.1", 8080),)), (9090, ()))
                    ),
                    ObjectKey(namespace="default", name="ghost"): ServiceEndpoints(
                        known=True, exists=False
                    ),
                    ObjectKey(namespace="default", name="later"): ServiceEndpoints(
                        known=False, exists=False
                    ),
                }
            ),
        )
    )
    return pushed


def test_every_answer_is_the_controller_s() -> None:
    tables, pushed = controller_tables(), pushed_copy()
    for target in ASKED:
        expected = tables.addresses.get(target) or tables.unavailable(target)
        assert pushed.addresses(target) == expected, target


def test_a_patch_moves_the_endpoints_and_a_replace_forgets_the_rest() -> None:
    pushed = pushed_copy()
    web = ServicePortKey("default", "web", 80)
    moved = ServiceEndpoints(known=True, exists=True, ports=((80, (("10.0.0.9", 8080),)),))
    pushed.apply(TableChanges(services=((WEB, moved),)))
    assert pushed.addresses(web) == [("10.0.0.9", 8080)]
    assert pushed.addresses(ServicePortKey("default", "web", 9090)).status == 500

    policy = policy_of(SERVICE)
    pushed.apply(TableChanges(policies=((web, policy),)))
    assert pushed.has_policy(web) and pushed.policy(web) == policy
    pushed.apply(TableChanges(removed_services=(WEB,), removed_policies=(web,)))
    assert not pushed.has_policy(web)
    assert pushed.addresses(web).message == ("Service default/web port 80: endpoints not known yet")
    pushed.apply(TableChanges(replace=True))
    assert pushed.counts() == {"policies": 0, "services": 0, "pushes": 5}
