"""Behaviour of the kube layer that needs no API server: paths, backoff, events' redaction."""

from __future__ import annotations

import random

import pytest

from interlock.kube.events import reference_to, truncate_message
from interlock.kube.informer import Deleted, ReconnectBackoff, Upserted
from interlock.kube.lease import LeaderElector
from interlock.kube.resources import HTTP_ROUTE, INGRESS_CLASS, SECRET, SERVICE
from interlock.kube.status import StatusCache
from interlock.kube.transport import KubeApiError, status_error
from interlock.mailbox.backoff import BackoffPolicy


def test_paths_for_core_group_and_cluster_scoped_kinds() -> None:
    assert SERVICE.collection_path(namespace="default") == "/api/v1/namespaces/default/services"
    assert SERVICE.collection_path() == "/api/v1/services"
    assert (
        HTTP_ROUTE.status_path(namespace="team-a", name="web")
        == "/apis/gateway.networking.k8s.io/v1/namespaces/team-a/httproutes/web/status"
    )
    assert INGRESS_CLASS.object_path(namespace="ignored", name="interlock") == (
        "/apis/networking.k8s.io/v1/ingressclasses/interlock"
    )
    assert HTTP_ROUTE.api_version == "gateway.networking.k8s.io/v1"
    assert SERVICE.api_version == "v1"


def test_namespaced_object_path_without_namespace_names_the_object() -> None:
    with pytest.raises(ValueError, match="HTTPRoute web: a namespace is required"):
        HTTP_ROUTE.object_path(namespace=None, name="web")


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _backoff(clock: FakeClock, *, initial: float, jitter: float, seed: int) -> ReconnectBackoff:
    """A reconnect backoff capped at 30 s that resets after two healthy minutes."""
    return ReconnectBackoff(
        policy=BackoffPolicy(initial=initial, maximum=30.0, jitter=jitter),
        healthy_reset=120.0,
        rng=random.Random(seed),
        clock=clock,
    )


def _failures(
    backoff: ReconnectBackoff, clock: FakeClock, *, count: int, apart: float
) -> list[float]:
    """The delays ``backoff`` gives for ``count`` failures ``apart`` seconds from each other."""
    delays = []
    for _ in range(count):
        delays.append(backoff.next_delay())
        clock.now += apart
    return delays


def test_backoff_grows_to_the_cap_and_resets_after_a_healthy_period() -> None:
    clock = FakeClock()
    backoff = _backoff(clock, initial=0.8, jitter=1.0, seed=7)
    delays = _failures(backoff, clock, count=8, apart=1.0)
    bases = [min(30.0, 0.8 * 2**i) for i in range(8)]
    for delay, base in zip(delays, bases, strict=True):
        assert base <= delay <= 2 * base
    assert delays[-1] >= 30.0
    clock.now += 120.0  # two minutes without a failure
    assert 0.8 <= backoff.next_delay() <= 1.6


def test_backoff_does_not_reset_while_failures_keep_coming() -> None:
    clock = FakeClock()
    backoff = _backoff(clock, initial=1.0, jitter=0.0, seed=1)
    assert _failures(backoff, clock, count=5, apart=119.0) == [1.0, 2.0, 4.0, 8.0, 16.0]


def test_informer_events_never_show_secret_data() -> None:
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"namespace": "default", "name": "users", "resourceVersion": "42"},
        "data": {"htpasswd": "c2VjcmV0LXZhbHVl"},
    }
    for event in (Upserted(SECRET, secret), Deleted(SECRET, secret)):
        assert "c2VjcmV0LXZhbHVl" not in repr(event)
        assert "c2VjcmV0LXZhbHVl" not in str(event)
        assert event.trace_summary() == "Secret default/users rv=42"
        assert event.__trace_redact__ == frozenset({"obj"})
        assert event.key == "default/users"
        assert (event.namespace, event.name, event.resource_version) == ("default", "users", "42")


def test_event_message_is_cut_to_one_kibibyte_without_splitting_characters() -> None:
    assert truncate_message("short") == "short"
    cut = truncate_message("é" * 2000)
    assert len(cut.encode("utf-8")) <= 1024
    assert cut.endswith("...")
    assert cut.startswith("é" * 500)


def test_reference_to_a_raw_object() -> None:
    route = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"namespace": "default", "name": "web", "uid": "u-1"},
    }
    assert reference_to(route) == {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "namespace": "default",
        "name": "web",
        "uid": "u-1",
    }


def test_api_errors_say_what_failed_and_whether_to_retry() -> None:
    error = status_error(
        what="patch status of HTTPRoute default/web",
        code=422,
        body={"reason": "Invalid", "message": "status.parents: Required value"},
    )
    assert str(error) == (
        "patch status of HTTPRoute default/web: 422 Invalid: status.parents: Required value"
    )
    assert not error.retryable
    assert status_error(what="x", code=503, body=None).retryable
    assert status_error(what="x", code=429, body=None).retryable
    assert KubeApiError(what="x", code=0, reason="ClientConnectorError", message="").retryable
    assert status_error(what="x", code=410, body=None).expired


def test_status_cache_skips_only_identical_content() -> None:
    cache = StatusCache()
    status = {"parents": [{"conditions": [{"type": "Accepted", "status": "True"}]}]}
    assert not cache.is_current(HTTP_ROUTE, "default", "web", status)
    cache.remember(HTTP_ROUTE, "default", "web", status)
    assert cache.is_current(HTTP_ROUTE, "default", "web", dict(status))
    assert not cache.is_current(HTTP_ROUTE, "default", "other", status)
    cache.forget(HTTP_ROUTE, "default", "web")
    assert not cache.is_current(HTTP_ROUTE, "default", "web", status)
    assert cache.statistics().skipped == 1


def test_leader_elector_rejects_timings_that_allow_two_leaders() -> None:
    with pytest.raises(ValueError, match="Lease kube-system/interlock: need lease_duration"):
        LeaderElector(
            object(),
            namespace="kube-system",
            identity="a",
            lease_duration=5.0,
            renew_deadline=10.0,
        )
