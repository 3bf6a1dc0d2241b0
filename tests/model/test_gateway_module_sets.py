"""ModuleSets a Gateway's annotations name: which listeners get them, how they combine with a
rule's own, and the Gateway's condition."""

from __future__ import annotations

from typing import Any

from interlock.model.edge import ModuleError
from interlock.model.gateway_modules import (
    RuleModules,
    listener_module_names,
    modules_condition,
    resolve_listener_modules,
    with_listener_modules,
)
from interlock.model.meta import ObjectKey
from interlock.model.moduleset import ModuleSet, Secret, SecretValue, parse_module_set

WIDE = "interlock.dev/module-sets"


def module_set(namespace: str, name: str, modules: dict[str, Any]) -> ModuleSet:
    return parse_module_set(
        {
            "apiVersion": "interlock.dev/v1alpha1",
            "kind": "ModuleSet",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"modules": modules},
        }
    )


def secret(namespace: str, name: str, **values: str) -> Secret:
    return Secret.model_validate(
        {"metadata": {"name": name, "namespace": namespace}, "stringData": values}
    )


def sets(*found: ModuleSet) -> dict[ObjectKey, ModuleSet]:
    return {m.key: m for m in found}


def resolve(
    names: tuple[str, ...],
    module_sets: dict[ObjectKey, ModuleSet],
    secrets: dict[ObjectKey, Secret] | None = None,
    namespace: str = "edge",
) -> RuleModules:
    found = resolve_listener_modules(
        namespace, {WIDE: ",".join(names)}, [(None, "web")], module_sets, secrets or {}
    )
    return found[(None, "web")]


def test_the_gateway_wide_sets_come_first_then_the_listeners_own_without_duplicates() -> None:
    annotations = {WIDE: " a, b ,", f"{WIDE}.web": "b,c", f"{WIDE}.alt": "d"}
    assert listener_module_names(annotations, "web") == ("a", "b", "c")
    assert listener_module_names(annotations, "other") == ("a", "b")
    # A ListenerSet's listener: only the Gateway-wide annotation reaches it.
    assert listener_module_names(annotations, None) == ("a", "b")
    assert listener_module_names({}, "web") == ()


def test_only_listeners_named_get_modules() -> None:
    office = module_set("edge", "office", {"ipRestriction": {"allow": ["10.0.0.0/8"]}})
    found = resolve_listener_modules(
        "edge",
        {f"{WIDE}.web": "office"},
        [(None, "web"), (None, "alt"), (ObjectKey(namespace="edge", name="set"), "web")],
        sets(office),
        {},
    )
    assert list(found) == [(None, "web")]
    assert found[(None, "web")].modules.ip_restriction is not None


def test_the_listeners_setting_wins_per_module_type_and_the_rules_fill_the_rest() -> None:
    gateway = resolve(
        ("office",),
        sets(module_set("edge", "office", {"ipRestriction": {"allow": ["10.0.0.0/8"]}})),
    )
    rule = resolve(
        ("loose",),
        sets(
            module_set(
                "team",
                "loose",
                {
                    "ipRestriction": {"allow": ["0.0.0.0/0"]},
                    "headers": {"request": {"add": {"X-Team": "blue"}}},
                },
            )
        ),
        namespace="team",
    )
    combined = with_listener_modules(gateway, rule)
    assert combined.error is None
    assert combined.modules.ip_restriction == gateway.modules.ip_restriction
    assert combined.modules.headers == rule.modules.headers
    assert combined.names == ("office", "loose")
    assert with_listener_modules(gateway, None) is gateway


def test_a_module_the_listener_sets_reads_the_gateways_secret_not_the_rules() -> None:
    def auth(namespace: str, value: str) -> RuleModules:
        return resolve(
            ("auth",),
            sets(
                module_set(
                    namespace, "auth", {"basicAuth": {"secretRef": {"name": "users", "key": "a"}}}
                )
            ),
            {ObjectKey(namespace=namespace, name="users"): secret(namespace, "users", a=value)},
            namespace=namespace,
        )

    gateway, rule = auth("edge", "gateway-users"), auth("team", "team-users")
    assert gateway.error is None and rule.error is None, (gateway.error, rule.error)
    combined = with_listener_modules(gateway, rule)
    assert combined.error is None
    assert list(combined.secrets.values()) == [SecretValue(b"gateway-users")]


def test_an_error_on_either_side_is_the_rules_the_listeners_first() -> None:
    missing = resolve(("gone",), {})
    assert missing.error is not None and missing.error.reason == "ModuleSetNotFound"
    invalid = RuleModules(
        names=("bad",),
        modules=missing.modules,
        secrets={},
        error=ModuleError(permanent=True, reason="InvalidModuleSet", message="bad"),
    )
    assert with_listener_modules(missing, invalid).error == missing.error
    fine = resolve(("ok",), sets(module_set("edge", "ok", {})))
    assert fine.error is None
    assert with_listener_modules(fine, invalid).error == invalid.error


def test_the_gateways_condition_names_the_module_set_or_the_listener_not_found() -> None:
    assert modules_condition({}, ["web"], []) is None
    missing = resolve(("gone",), {})
    status, reason, message = modules_condition({WIDE: "gone"}, ["web"], [missing]) or (
        True,
        "",
        "",
    )
    assert (status, reason) == (False, "ModuleSetNotFound") and "edge/gone" in message
    fine = resolve(("ok",), sets(module_set("edge", "ok", {})))
    assert modules_condition({WIDE: "ok", f"{WIDE}.web": "ok"}, ["web"], [fine]) == (
        True,
        "ModuleSetsApplied",
        "ModuleSets applied to its listeners: ok",
    )
    assert modules_condition({WIDE: "ok", f"{WIDE}.wbe": "ok"}, ["web"], [fine]) == (
        False,
        "ListenerNotFound",
        f"no listener of this Gateway: annotation {WIDE}.wbe",
    )
