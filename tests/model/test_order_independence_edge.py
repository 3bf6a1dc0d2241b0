"""desired_edges must not depend on the order in which its inputs arrive.

Informers deliver objects in any order and actors see them at different times; if the result
depended on that order, two replicas (or one replica before and after a restart) could serve
different winners for the same host and path.
"""

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from interlock.model.edge import desired_edges, edge_from_parts, ingress_host_routes
from interlock.model.ingress import Ingress
from tests.kit.edge_builders import (
    OTHER_CLASS,
    OUR_DEFAULT_CLASS,
    ingress,
    module_set,
    secret,
    service,
)

NAMESPACES = ["a", "b"]
TIMESTAMPS = [None, "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"]
MODULE_SETS = {
    "ip": {"ipRestriction": {"allow": ["10.0.0.0/8"]}},
    "ip2": {"ipRestriction": {"deny": ["::1"]}},
    "auth": {"basicAuth": {"secretRef": {"name": "users", "key": "htpasswd"}}},
    "bad": {"rateLimit": {"requests": 0}},
}

paths = st.fixed_dictionaries(
    {
        "path": st.sampled_from(["/", "/x", "/x/", "/y"]),
        "pathType": st.sampled_from(["Prefix", "Exact", "ImplementationSpecific", "Regex"]),
        "backend": st.fixed_dictionaries(
            {
                "service": st.fixed_dictionaries(
                    {
                        "name": st.sampled_from(["s1", "s2"]),
                        "port": st.one_of(
                            st.fixed_dictionaries({"number": st.sampled_from([80, 81])}),
                            st.fixed_dictionaries({"name": st.sampled_from(["http", "grpc"])}),
                        ),
                    }
                )
            }
        ),
    }
)
rules = st.fixed_dictionaries(
    {
        "host": st.sampled_from(["h1", "h2", ""]),
        "http": st.fixed_dictionaries({"paths": st.lists(paths, max_size=3)}),
    }
)


@st.composite
def ingresses(draw: st.DrawFn) -> list[Ingress]:
    found: list[Ingress] = []
    for index in range(draw(st.integers(0, 5))):
        tls_hosts = draw(st.lists(st.sampled_from(["h1", "h2"]), max_size=2))
        found.append(
            ingress(
                f"ing{index}",
                *draw(st.lists(rules, max_size=3)),
                namespace=draw(st.sampled_from(NAMESPACES)),
                created=draw(st.sampled_from(TIMESTAMPS)),
                class_name=draw(st.sampled_from([None, "interlock", "nginx"])),
                modules=",".join(draw(st.lists(st.sampled_from(sorted(MODULE_SETS)), max_size=3))),
                tls=[{"hosts": tls_hosts, "secretName": f"tls{index}"}] if tls_hosts else None,
            )
        )
    return found


@settings(max_examples=150, deadline=None)
@given(
    ingress_list=ingresses(),
    set_names=st.sets(st.sampled_from(sorted(MODULE_SETS))),
    with_secret=st.booleans(),
    service_names=st.sets(st.sampled_from(["s1", "s2"])),
    seed=st.integers(),
)
def test_desired_edges_independent_of_input_order(
    ingress_list: list[Ingress],
    set_names: set[str],
    with_secret: bool,
    service_names: set[str],
    seed: int,
) -> None:
    sets = [module_set(n, MODULE_SETS[n], namespace=ns) for n in set_names for ns in NAMESPACES]
    secrets = [secret("users", namespace=ns, htpasswd="x") for ns in NAMESPACES if with_secret]
    services = [service(n, ("http", 80), namespace=ns) for n in service_names for ns in NAMESPACES]
    classes = [OUR_DEFAULT_CLASS, OTHER_CLASS]
    inputs: list[list[Any]] = [ingress_list, classes, sets, secrets, services]

    expected = desired_edges(*inputs)
    rng = random.Random(seed)
    shuffled = [rng.sample(items, len(items)) for items in inputs]
    assert desired_edges(*shuffled) == expected
    # Iterables are consumed once: generators work as well as lists.
    assert desired_edges(*(iter(items) for items in shuffled)) == expected


@settings(max_examples=150, deadline=None)
@given(ingress_list=ingresses(), seed=st.integers())
def test_edge_from_parts_independent_of_part_order(ingress_list: list[Ingress], seed: int) -> None:
    services = {s.key: s for s in (service("s1", ("http", 80), namespace=ns) for ns in NAMESPACES)}
    by_host: dict[str, dict[Any, Any]] = {}
    for item in ingress_list:
        for host, routes in ingress_host_routes(item, {}, {}, services).items():
            by_host.setdefault(host, {})[item.key] = routes
    rng = random.Random(seed)
    for host, parts in by_host.items():
        items = list(parts.items())
        shuffled = dict(rng.sample(items, len(items)))
        assert edge_from_parts(host, shuffled) == edge_from_parts(host, parts)
