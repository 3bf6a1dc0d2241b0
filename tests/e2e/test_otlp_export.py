"""``--otlp-endpoint``: a running controller sends one span per handled message to a real
OTLP/HTTP receiver (protobuf decoded by ``opentelemetry-proto``); one Kubernetes event is one
trace whose spans hang from the message that caused them; no Secret value is ever sent."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import bcrypt
import pytest

from interlock.config import EdgeConfig, ObservabilityConfig
from tests.kit.e2e_clients import LOCAL, Cluster, StartController, eventually
from tests.kit.otlp_receiver import OtlpReceiver, ReceivedSpan

CRDS = Path(__file__).resolve().parents[2] / "manifests" / "crds"
PASSWORD = "otlp-pw-9f3c1d"
HTPASSWD = "alice:" + bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()
INGRESS_CLASS = {
    "apiVersion": "networking.k8s.io/v1",
    "kind": "IngressClass",
    "metadata": {"name": "interlock"},
    "spec": {"controller": "interlock.dev/ingress-controller"},
}


def _object(api_version: str, kind: str, name: str, **body: Any) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name, "namespace": "default", **body.pop("metadata", {})},
        **body,
    }


SERVICE = _object("v1", "Service", "web", spec={"ports": [{"port": 80, "protocol": "TCP"}]})
SECRET = _object(
    "v1", "Secret", "users", data={"htpasswd": base64.b64encode(HTPASSWD.encode()).decode()}
)
MODULE_SET = _object(
    "interlock.dev/v1alpha1",
    "ModuleSet",
    "auth",
    spec={
        "modules": {
            "basicAuth": {"realm": "shop", "secretRef": {"name": "users", "key": "htpasswd"}}
        }
    },
)
INGRESS = _object(
    "networking.k8s.io/v1",
    "Ingress",
    "shop",
    metadata={"annotations": {"interlock.dev/modules": "auth"}},
    spec={
        "ingressClassName": "interlock",
        "rules": [
            {
                "host": "shop.example",
                "http": {
                    "paths": [
                        {
                            "path": "/",
                            "pathType": "Prefix",
                            "backend": {"service": {"name": "web", "port": {"number": 80}}},
                        }
                    ]
                },
            }
        ],
    },
)


@pytest.fixture
async def receiver(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[OtlpReceiver]:
    # The receiver shares the test's event loop with the controller: on a loaded machine an
    # answer can take longer than the default 2 s export timeout, and a timed-out batch is lost.
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "30")
    found = OtlpReceiver()
    await found.start()
    yield found
    await found.stop()


def _linked(spans: list[ReceivedSpan]) -> bool:
    """One trace; one root; every other span's parent is a span of the same trace."""
    ids = {span.span_id for span in spans}
    roots = [span for span in spans if not span.parent_span_id]
    return (
        len({span.trace_id for span in spans}) == 1
        and len(roots) == 1
        and all(span.parent_span_id in ids for span in spans if span.parent_span_id)
    )


async def test_spans_reach_an_otlp_receiver_one_trace_per_event_and_never_a_secret(
    receiver: OtlpReceiver, cluster: Cluster, start_controller: StartController
) -> None:
    # The receiver is set up first so it outlives the controller, which flushes on stop.
    await cluster.apply_manifests([CRDS])
    await start_controller(
        identity="otlp",
        edge=EdgeConfig(addr=LOCAL),
        observability=ObservabilityConfig(otlp_endpoint=receiver.url),
    )
    await cluster.apply(INGRESS_CLASS)
    await cluster.apply(SERVICE)
    # The Secret last: the edge waits for it, and its arrival is what applies basicAuth.
    await cluster.apply(INGRESS)
    await cluster.apply(MODULE_SET)
    await cluster.apply(SECRET)

    def secret_reached_the_edge() -> bool:
        spans = receiver.by_correlation("Upserted Secret default/users")
        return any(str(s.attributes["interlock.recipient"]).startswith("edge/") for s in spans)

    await eventually(secret_reached_the_edge, message="the Secret's spans down to the edge")
    service_prefix = "Upserted Service default/web"
    await eventually(
        lambda: (
            _linked(receiver.by_correlation(service_prefix))
            and len(receiver.by_correlation(service_prefix)) >= 2
        ),
        message="the Service event's spans, linked",
    )

    assert receiver.content_types == {"application/x-protobuf"}
    assert {span.service_name for span in receiver.spans} == {"interlock"}
    service_spans = receiver.by_correlation(service_prefix)
    (root,) = [span for span in service_spans if not span.parent_span_id]
    assert root.name == "ObjectChanged"
    assert root.attributes["interlock.recipient"] == "informer-router"
    assert "interlock.causation_id" not in root.attributes
    upserted = [span for span in service_spans if span.name == "ServiceUpserted"]
    assert upserted and all(span.parent_span_id == root.span_id for span in upserted)
    assert all(
        span.attributes["interlock.causation_id"] == root.attributes["interlock.message.id"]
        for span in upserted
    )
    assert all(span.start_ns <= span.end_ns for span in receiver.spans)
    secret_spans = receiver.by_correlation("Upserted Secret default/users")
    assert {span.trace_id for span in secret_spans} != {root.trace_id}
    assert len({span.trace_id for span in secret_spans}) == 1

    # Whatever was sent, in any encoding a value could take, holds no Secret value.
    encoded = base64.b64encode(HTPASSWD.encode())
    for body in receiver.bodies:
        for leak in (PASSWORD.encode(), HTPASSWD.encode(), HTPASSWD.split(":")[1].encode()):
            assert leak not in body
        assert encoded not in body
