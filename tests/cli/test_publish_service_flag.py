"""``interlock run --publish-service NAMESPACE/NAME``: parsed into the config, refused by name
when it cannot work."""

from __future__ import annotations

import pytest

from interlock.cli import build_parser
from interlock.cli.run import config_from_args
from interlock.config import ControllerConfig
from interlock.model.meta import ObjectKey


def parse(argv: list[str]) -> ControllerConfig:
    return config_from_args(build_parser().parse_args(argv))


def test_the_flag_names_the_service(monkeypatch: pytest.MonkeyPatch) -> None:
    config = parse(["run", "--edge-addr", "0.0.0.0:8080", "--publish-service", "ingress/edge"])
    assert config.edge.publish_service == ObjectKey(namespace="ingress", name="edge")
    assert parse(["run", "--edge-addr", "0.0.0.0:8080"]).edge.publish_service is None
    monkeypatch.setenv("INTERLOCK_PUBLISH_SERVICE", "interlock-system/interlock-edge")
    from_env = parse(["run", "--edge-addr", "0.0.0.0:8080"])
    assert from_env.edge.publish_service == ObjectKey(
        namespace="interlock-system", name="interlock-edge"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--edge-addr", ":8080", "--publish-service", "edge"], "--publish-service: 'edge' is not"),
        (["--publish-service", "ingress/edge"], "--publish-service needs --edge-addr"),
        (
            ["--edge-addr", ":8080", "--publish-service", "ingress/edge", "--namespace", "shop"],
            "add --namespace ingress",
        ),
    ],
)
def test_unusable_values_are_refused_by_name(argv: list[str], message: str) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse(["run", *argv])
    assert message in str(exit_.value)
