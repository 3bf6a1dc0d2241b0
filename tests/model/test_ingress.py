"""Ingress and IngressClass parsing, and which Ingresses interlock serves."""

from typing import Any

import pytest

from interlock.model.ingress import (
    CONTROLLER_NAME,
    IngressClass,
    is_ours,
    parse_ingress,
    parse_ingress_class,
)
from interlock.model.meta import InvalidObject, ObjectKey


def ingress_class(name: str, controller: str = CONTROLLER_NAME, *, default: bool = False) -> Any:
    annotations = {"ingressclass.kubernetes.io/is-default-class": "true"} if default else {}
    return parse_ingress_class(
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "IngressClass",
            "metadata": {"name": name, "annotations": annotations},
            "spec": {"controller": controller},
        }
    )


def ingress(*, class_name: str | None = None, annotations: dict[str, str] | None = None) -> Any:
    spec: dict[str, Any] = {"rules": [{"host": "a.example.com"}]}
    if class_name is not None:
        spec["ingressClassName"] = class_name
    return parse_ingress(
        {
            "metadata": {"name": "web", "namespace": "default", "annotations": annotations or {}},
            "spec": spec,
        }
    )


OURS = ingress_class("interlock")
OURS_DEFAULT = ingress_class("interlock", default=True)
NGINX = ingress_class("nginx", "k8s.io/ingress-nginx")
NGINX_DEFAULT = ingress_class("nginx", "k8s.io/ingress-nginx", default=True)


@pytest.mark.parametrize(
    ("case", "class_name", "annotations", "classes", "expected"),
    [
        ("names our class", "interlock", None, [OURS, NGINX], True),
        ("names another controller's class", "nginx", None, [OURS_DEFAULT, NGINX], False),
        ("names a class that does not exist", "missing", None, [OURS_DEFAULT], False),
        ("no class, ours is the default", None, None, [OURS_DEFAULT, NGINX], True),
        ("no class, another is the default", None, None, [OURS, NGINX_DEFAULT], False),
        ("no class, no default", None, None, [OURS, NGINX], False),
        ("no class, no classes at all", None, None, [], False),
        ("empty class name, ours is the default", "", None, [OURS_DEFAULT], True),
        (
            "legacy annotation names ours",
            None,
            {"kubernetes.io/ingress.class": "interlock"},
            [OURS],
            True,
        ),
        (
            "legacy annotation names another, ours default",
            None,
            {"kubernetes.io/ingress.class": "nginx"},
            [OURS_DEFAULT, NGINX],
            False,
        ),
        (
            "ingressClassName beats the legacy annotation",
            "interlock",
            {"kubernetes.io/ingress.class": "nginx"},
            [OURS, NGINX],
            True,
        ),
    ],
)
def test_is_ours(
    case: str,
    class_name: str | None,
    annotations: dict[str, str] | None,
    classes: list[IngressClass],
    expected: bool,
) -> None:
    assert is_ours(ingress(class_name=class_name, annotations=annotations), classes) is expected


def test_default_annotation_must_be_exactly_true() -> None:
    assert ingress_class("interlock", default=True).is_default
    odd = parse_ingress_class(
        {
            "metadata": {
                "name": "interlock",
                "annotations": {"ingressclass.kubernetes.io/is-default-class": "yes"},
            },
            "spec": {"controller": CONTROLLER_NAME},
        }
    )
    assert not odd.is_default
    assert not is_ours(ingress(), [odd])


def test_parse_full_ingress() -> None:
    parsed = parse_ingress(
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "Ingress",
            "metadata": {
                "name": "web",
                "namespace": "shop",
                "annotations": {"interlock.dev/modules": " set-a, ,set-b "},
            },
            "spec": {
                "ingressClassName": "interlock",
                "defaultBackend": {"service": {"name": "fallback", "port": {"number": 80}}},
                "tls": [{"hosts": ["a.example.com"], "secretName": "a-tls"}],
                "rules": [
                    {
                        "host": "a.example.com",
                        "http": {
                            "paths": [
                                {
                                    "path": "/api",
                                    "pathType": "Prefix",
                                    "backend": {
                                        "service": {"name": "api", "port": {"name": "http"}}
                                    },
                                },
                                {
                                    "path": "/bucket",
                                    "pathType": "ImplementationSpecific",
                                    "backend": {
                                        "resource": {
                                            "apiGroup": "k8s.example.com",
                                            "kind": "StorageBucket",
                                            "name": "b",
                                        }
                                    },
                                },
                            ]
                        },
                    }
                ],
            },
        }
    )
    assert parsed.key == ObjectKey(namespace="shop", name="web")
    assert parsed.module_set_names() == ("set-a", "set-b")
    paths = parsed.spec.rules[0].http.paths  # type: ignore[union-attr]
    assert paths[0].backend.service is not None
    assert paths[0].backend.service.port.name == "http"
    assert paths[1].backend.resource is not None
    assert paths[1].backend.resource.kind == "StorageBucket"
    assert parsed.spec.tls[0].secret_name == "a-tls"
    assert parsed.spec.default_backend is not None


def test_unreadable_ingress_names_object_and_field() -> None:
    raw = {
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {
            "rules": [
                {
                    "host": "a",
                    "http": {
                        "paths": [
                            {
                                "path": "/",
                                "pathType": "Prefix",
                                "backend": {"service": {"name": "s", "port": {"number": "x"}}},
                            }
                        ]
                    },
                }
            ]
        },
    }
    with pytest.raises(InvalidObject) as err:
        parse_ingress(raw)
    assert str(err.value).startswith(
        "Ingress shop/web: spec.rules[0].http.paths[0].backend.service.port.number: "
    )
