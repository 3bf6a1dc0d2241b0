import pytest
from pydantic import Field

from interlock.model.meta import InvalidObject, KubeModel, ObjectMeta, parse_object
from interlock.model.service import parse_service


class _Port(KubeModel):
    port: int


class _Spec(KubeModel):
    ports: list[_Port] = Field(default_factory=list)


class _Thing(KubeModel):
    metadata: ObjectMeta
    spec: _Spec


def test_bad_value_names_object_and_field_path():
    raw = {
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"ports": [{"port": 80}, {"port": "eighty"}]},
    }
    with pytest.raises(InvalidObject) as err:
        parse_object(_Thing, "Service", raw)
    assert str(err.value).startswith("Service default/web: spec.ports[1].port: ")
    assert err.value.field == "spec.ports[1].port"


def test_unknown_fields_are_ignored():
    raw = {"metadata": {"name": "a", "managedFields": []}, "spec": {"x": 1}, "status": {}}
    thing = parse_object(_Thing, "Thing", raw)
    assert thing.metadata.name == "a"
    assert thing.spec.ports == []


def _service(name: str) -> dict[str, object]:
    return {
        "metadata": {"namespace": "default", "name": name, "annotations": {"team": name}},
        "spec": {"clusterIP": "10.0.0.1", "ports": [{"name": "http", "port": 80}]},
    }


def test_parsed_objects_share_their_equal_frozen_parts_and_stay_what_they_were() -> None:
    a, b = parse_service(_service("a")), parse_service(_service("b"))
    # Equal immutable parts are one object, and so is each set of field names.
    assert a.spec.ports[0] is b.spec.ports[0]
    assert a.status is b.status
    assert a.metadata.__pydantic_fields_set__ is b.metadata.__pydantic_fields_set__
    assert a.metadata.namespace is b.metadata.namespace
    # Nothing a reader sees changed: values, equality, what was set, a copy with an update.
    assert a.spec.ports[0].port == 80 and a.metadata.name == "a" and a != b
    assert a == parse_service(_service("a"))
    assert a.metadata.model_fields_set == {"namespace", "name", "annotations"}
    renamed = a.metadata.model_copy(update={"generation": 3})
    assert renamed.model_fields_set == {"namespace", "name", "annotations", "generation"}
    assert b.metadata.model_fields_set == {"namespace", "name", "annotations"}
    assert a.model_dump(exclude_unset=True)["metadata"] == {
        "namespace": "default",
        "name": "a",
        "annotations": {"team": "a"},
    }
    # An empty dict field is one shared dict, which refuses to be filled.
    assert a.metadata.labels == {} and a.metadata.labels is b.metadata.labels
    with pytest.raises(TypeError):
        a.metadata.labels["app"] = "web"


def test_the_table_of_shared_parts_keeps_only_the_most_recent_ones() -> None:
    # The table of equal parts must not keep every part ever parsed: each version of each
    # route would stay for as long as the controller runs (the soak's growth:
    # docs/reliability.md, "Soak"). It keeps the most recently used ones, a bounded number.
    import gc
    import weakref

    from interlock.model.meta import RECENT_PARTS_LIMIT

    raw = _service("gone")
    raw["spec"] = {"clusterIP": "10.0.0.9", "ports": [{"name": "only-here", "port": 61873}]}
    service = parse_service(raw)
    port = weakref.ref(service.spec.ports[0])
    spec = weakref.ref(service.spec)
    del service
    for number in range(RECENT_PARTS_LIMIT):
        other = _service(f"other-{number}")
        other["spec"] = {"clusterIP": "10.0.1.1", "ports": [{"name": "p", "port": number + 1}]}
        parse_service(other)
    gc.collect()
    assert port() is None and spec() is None
    # And sharing still works for parts met again.
    a, b = parse_service(_service("a")), parse_service(_service("b"))
    assert a.spec is b.spec and a.spec.ports[0] is b.spec.ports[0]


def test_kubectls_copy_of_the_applied_object_is_not_kept() -> None:
    # `kubectl apply` writes the whole object again as an annotation on every object it
    # applies; nothing reads it, and parsed objects live as long as the controller.
    raw = _service("applied")
    raw["metadata"]["annotations"] = {  # type: ignore[index]
        "kubectl.kubernetes.io/last-applied-configuration": '{"apiVersion":"v1"}',
        "config.linkerd.io/opaque-ports": "3306",
    }
    service = parse_service(raw)
    assert service.metadata.annotations == {"config.linkerd.io/opaque-ports": "3306"}


def _patterns(schema: object) -> list[str]:
    """Every ``pattern`` in a pydantic core schema."""
    if isinstance(schema, dict):
        found = [schema["pattern"]] if isinstance(schema.get("pattern"), str) else []
        return found + [p for value in schema.values() for p in _patterns(value)]
    if isinstance(schema, list | tuple):
        return [p for value in schema for p in _patterns(value)]
    return []


def _kube_models() -> list[type[KubeModel]]:
    import importlib
    import pkgutil

    import interlock.model

    for module in pkgutil.iter_modules(interlock.model.__path__):
        importlib.import_module(f"interlock.model.{module.name}")
    found: list[type[KubeModel]] = []
    pending = [KubeModel]
    while pending:
        for sub in pending.pop().__subclasses__():
            found.append(sub)
            pending.append(sub)
    return found


def test_every_field_pattern_ends_where_the_value_ends():
    # KubeModel checks patterns with Python's re, whose ``$`` also matches before a final
    # newline: "web\n" would pass ``^[a-z]+$``. A pattern ends with ``\Z`` instead.
    import re

    assert KubeModel.model_config.get("regex_engine") == "python-re"
    patterns: set[str] = set()
    for model in _kube_models():
        if model.__module__.startswith("interlock."):
            model.model_rebuild()
            patterns.update(_patterns(model.__pydantic_core_schema__))
    assert len(patterns) >= 6  # the Gateway API's names, groups, kinds, headers, CORS origins
    for pattern in patterns:
        assert not re.search(r"(?<!\\)\$(\)*)(\||$)", pattern), pattern
