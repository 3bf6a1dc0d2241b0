import pytest
from pydantic import Field

from interlock.model.meta import InvalidObject, KubeModel, ObjectMeta, parse_object


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
