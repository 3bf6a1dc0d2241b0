"""The edge planner as a table: (desired, served, failures) → the next step, or none."""

from __future__ import annotations

from typing import Any

import pytest

from interlock.model.edge import DesiredRoute, EdgeBackend, ModuleError
from interlock.model.edge_plan import (
    TLS_KEY,
    BackendTarget,
    EdgeStep,
    ServedRoute,
    StepFailure,
    StepInputs,
    backend_target,
    plan,
)
from interlock.model.meta import ObjectKey
from interlock.model.moduleset import Modules, SecretValue
from interlock.model.service import ServicePortKey

HEADERS = Modules.model_validate({"headers": {"request": {"add": {"X-Team": "blue"}}}})
OTHER = Modules.model_validate({"compression": {"enabled": True}})
WEB = EdgeBackend(namespace="default", service="web", port=80)
TARGET = BackendTarget(ServicePortKey("default", "web", 80))
CERT = (SecretValue(b"cert"), SecretValue(b"key"))
NEW_CERT = (SecretValue(b"cert2"), SecretValue(b"key2"))
BROKEN = ModuleError(permanent=True, reason="InvalidModuleSet", message="bad CIDR")


def route(
    modules: Modules = HEADERS,
    *,
    error: ModuleError | None = None,
    backend: EdgeBackend = WEB,
) -> DesiredRoute:
    return DesiredRoute(
        route_id="Prefix:/",
        ingress=ObjectKey(namespace="default", name="shop"),
        ingress_created=None,
        path="/",
        path_type="Prefix",
        backend=backend,
        modules=modules,
        secrets={},
        module_error=error,
    )


def served(modules: Modules | None = HEADERS, backend: BackendTarget | None = TARGET) -> Any:
    return ServedRoute(modules=modules, secrets={}, backend=backend, reserved=modules is None)


def modules_inputs(desired: DesiredRoute) -> StepInputs:
    return (desired.path, desired.path_type, desired.modules, dict(desired.secrets))


def failed(inputs: StepInputs, *, permanent: bool = False, waiting: bool = True) -> StepFailure:
    return StepFailure(inputs=inputs, permanent=permanent, message="x", waiting=waiting)


R = route()
RESERVE_INPUTS: StepInputs = ("/", "Prefix")

CASES: list[tuple[str, DesiredRoute | None, ServedRoute | None, dict[Any, StepFailure], Any]] = [
    ("a new route gets its modules first", R, None, {}, ("modules", None)),
    ("then its backend", R, served(backend=None), {}, ("backend", TARGET)),
    ("in sync: nothing", R, served(), {}, None),
    ("changed modules before anything else", route(OTHER), served(), {}, ("modules", None)),
    (
        "a backend that does not exist is attached (it answers 500), port 0 sent as 1",
        route(backend=EdgeBackend(namespace="default", service="gone", port=0, exists=False)),
        served(backend=None),
        {},
        ("backend", BackendTarget(ServicePortKey("default", "gone", 1), exists=False)),
    ),
    ("an undesired route is removed", None, served(), {}, ("remove", None)),
    ("neither desired nor served: nothing", None, None, {}, None),
    (
        "unresolvable modules on a new route: reserved",
        route(error=BROKEN),
        None,
        {},
        ("reserve", None),
    ),
    ("unresolvable modules on a served route: kept as is", route(error=BROKEN), served(), {}, None),
    (
        "a permanent failure is not repeated on the same inputs",
        R,
        served(OTHER),
        {("modules", "Prefix:/"): failed(modules_inputs(R), permanent=True)},
        None,
    ),
    (
        "a transient failure waits for its retry",
        R,
        served(OTHER),
        {("modules", "Prefix:/"): failed(modules_inputs(R))},
        None,
    ),
    (
        "a transient failure whose retry is due runs again",
        R,
        served(OTHER),
        {("modules", "Prefix:/"): failed(modules_inputs(R), waiting=False)},
        ("modules", None),
    ),
    (
        "changed inputs retry a permanent failure at once",
        route(OTHER),
        served(),
        {("modules", "Prefix:/"): failed(modules_inputs(R), permanent=True)},
        ("modules", None),
    ),
    (
        "failed modules on a new route: its path is reserved (fail closed)",
        R,
        None,
        {("modules", "Prefix:/"): failed(modules_inputs(R))},
        ("reserve", None),
    ),
    (
        "a failed reservation waits too",
        route(error=BROKEN),
        None,
        {("reserve", "Prefix:/"): failed(RESERVE_INPUTS)},
        None,
    ),
]


@pytest.mark.parametrize(
    ("desired", "served_route", "failures", "expected"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_route_steps(
    desired: DesiredRoute | None,
    served_route: ServedRoute | None,
    failures: dict[Any, StepFailure],
    expected: Any,
) -> None:
    step = plan(
        "Prefix:/",
        desired={} if desired is None else {"Prefix:/": desired},
        served={} if served_route is None else {"Prefix:/": served_route},
        failures=failures,
    )
    if expected is None:
        assert step is None
        return
    kind, target = expected
    assert step is not None and step.kind == kind and step.route_id == "Prefix:/"
    assert step.target == target
    if kind in ("modules", "backend", "reserve"):
        assert step.route is desired


@pytest.mark.parametrize(
    ("wanted", "served_tls", "failures", "expected"),
    [
        (CERT, None, {}, "tls"),
        (None, CERT, {}, "tls"),  # the Secret went: the certificate is removed
        (CERT, CERT, {}, None),
        (NEW_CERT, CERT, {}, "tls"),
        (CERT, None, {("tls", TLS_KEY): failed(CERT, permanent=True)}, None),
        (NEW_CERT, None, {("tls", TLS_KEY): failed(CERT, permanent=True)}, "tls"),
    ],
    ids=["set", "remove", "in sync", "renewed", "failed for good", "changed after a failure"],
)
def test_tls_steps(
    wanted: Any, served_tls: Any, failures: dict[Any, StepFailure], expected: str | None
) -> None:
    step = plan(
        TLS_KEY, desired={}, served={}, failures=failures, tls_wanted=wanted, tls_served=served_tls
    )
    assert (None if step is None else step.kind) == expected
    if step is not None:
        assert step.inputs == wanted


def test_a_steps_failure_slot_is_its_kind_and_route() -> None:
    assert EdgeStep("backend", "Exact:/a", TARGET).slot == ("backend", "Exact:/a")


def test_backend_target_keeps_a_real_port() -> None:
    assert backend_target(WEB) == TARGET
