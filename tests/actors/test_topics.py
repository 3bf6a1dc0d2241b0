"""TopicFamily: a topic made from a key gives that key back, and a topic of another family
gives ``None`` (how a subscriber of several families tells them apart)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from interlock.actors.topics import ATTACH, GRANTS, PARENT, SERVICE, STATUS, KindKey
from interlock.model.meta import ObjectKey

# Kubernetes names: DNS labels and subdomains, never a "/" or ":".
names = st.from_regex(r"[a-z0-9]([-a-z0-9.]{0,20}[a-z0-9])?", fullmatch=True)
object_keys = st.builds(ObjectKey, namespace=names, name=names)
kinds = st.sampled_from(["HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute"])


@given(object_keys)
def test_an_object_topic_gives_its_key_back(key: ObjectKey) -> None:
    topic = SERVICE.topic(key)
    assert topic == f"service:{key.namespace}/{key.name}"
    assert SERVICE.key_of(topic) == key and topic in SERVICE
    assert PARENT.key_of(topic) is None and topic not in PARENT


@given(kinds, object_keys)
def test_a_kind_and_object_topic_gives_both_back(kind: str, key: ObjectKey) -> None:
    topic = ATTACH.topic(KindKey(kind, key))
    assert ATTACH.key_of(topic) == KindKey(kind, key)
    assert SERVICE.key_of(topic) is None


def test_text_keyed_families() -> None:
    assert GRANTS.key_of(GRANTS.topic("shared")) == "shared"
    assert STATUS.topic("route") == "status:route"
    assert GRANTS.key_of("grantsx:shared") is None
