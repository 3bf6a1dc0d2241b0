"""interlock's modules on Gateway routes: ModuleSets named by an HTTPRoute rule's ExtensionRef.

A rule of an HTTPRoute served by one of interlock's Gateways may carry filters of type
``ExtensionRef`` naming a ModuleSet of the route's namespace::

    filters:
    - type: ExtensionRef
      extensionRef: {group: interlock.dev, kind: ModuleSet, name: office-only}

Its requests then pass that ModuleSet's modules (IP restriction, auth, rate limit, …) before
any backend sees them, with the guarantees of the Ingress edge: a rule whose modules cannot be
applied never forwards (a new one answers 503; one that served keeps its last good modules
and backends), an invalid ModuleSet is a permanent error, a missing ModuleSet or Secret a
transient one that resolves when it appears. Several ModuleSets on one rule merge in filter
order (the last set listed wins per module, as in the Ingress annotation).

The HTTPRoute parser refuses ExtensionRef filters, and must: a mesh client's route has no
edge to run modules, and skipping a filter is forbidden. So the Gateway side takes the
ModuleSet filters out of the route *before* parsing (:func:`take_module_filters`), keeping
which rule named which sets; any other ExtensionRef stays and is refused as before.

A Gateway may name ModuleSets of its own namespace for all its listeners, and for one
listener, by annotation::

    interlock.dev/module-sets: office-only            # every listener (ListenerSets' too)
    interlock.dev/module-sets.https: strict-auth      # the Gateway's listener ``https``

Every rule served on such a listener then runs those modules as well
(:func:`with_listener_modules`): one chain per rule, where per module type the listener's
setting wins over the Gateway-wide one and both win over the rule's own (a route cannot
loosen its Gateway's ``ipRestriction``); the module types the Gateway leaves unset come from
the rule. A missing or invalid Gateway-level ModuleSet is an error of every rule on the
listener, with the guarantees above (a rule that never served answers 503, one that did
keeps its last good chain).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from interlock.model.edge import ModuleError, resolve_module_sets
from interlock.model.meta import ObjectKey
from interlock.model.moduleset import (
    Modules,
    ModuleSet,
    Secret,
    SecretValue,
    merge_modules,
    module_secret_ref_fields,
    module_secret_refs,
)

MODULESET_GROUP = "interlock.dev"
GATEWAY_MODULE_SETS = "interlock.dev/module-sets"
"""The Gateway annotation naming ModuleSets for all its listeners (``…/module-sets.<listener>``:
for that listener only)."""


@dataclass(frozen=True, slots=True)
class RuleModules:
    """A rule's merged modules, the Secret values they read, and why they cannot be applied."""

    names: tuple[str, ...]
    modules: Modules
    secrets: Mapping[tuple[str, str], SecretValue] = field(repr=False)
    error: ModuleError | None = None


def _names_module_set(entry: object) -> str | None:
    if not isinstance(entry, dict) or entry.get("type") != "ExtensionRef":
        return None
    ref = entry.get("extensionRef")
    if not isinstance(ref, dict):
        return None
    if ref.get("group") == MODULESET_GROUP and ref.get("kind") == "ModuleSet":
        name = ref.get("name")
        return name if isinstance(name, str) and name else None
    return None


def take_module_filters(raw: dict[str, Any]) -> tuple[dict[str, Any], dict[int, tuple[str, ...]]]:
    """``raw`` without its rules' ModuleSet ExtensionRef filters, and the sets each rule named
    (by rule index, in filter order, without duplicates). ``raw`` itself is not changed."""
    spec = raw.get("spec")
    rules = spec.get("rules") if isinstance(spec, dict) else None
    if not isinstance(rules, list) or not any(
        isinstance(rule, dict)
        and isinstance(rule.get("filters"), list)
        and any(_names_module_set(f) for f in rule["filters"])
        for rule in rules
    ):
        return raw, {}
    stripped = copy.deepcopy(raw)
    names: dict[int, tuple[str, ...]] = {}
    for index, rule in enumerate(stripped["spec"]["rules"]):
        filters = rule.get("filters") if isinstance(rule, dict) else None
        if not isinstance(filters, list):
            continue
        found = [name for f in filters if (name := _names_module_set(f)) is not None]
        if found:
            names[index] = tuple(dict.fromkeys(found))
            rule["filters"] = [f for f in filters if _names_module_set(f) is None]
    return stripped, names


def module_dependencies(
    namespace: str, names: Mapping[int, tuple[str, ...]], module_sets: Mapping[ObjectKey, ModuleSet]
) -> tuple[tuple[ObjectKey, ...], tuple[ObjectKey, ...]]:
    """The ModuleSets a route's rules name and the Secrets their valid modules read (to follow)."""
    sets = tuple(
        dict.fromkeys(
            ObjectKey(namespace=namespace, name=name) for rule in names.values() for name in rule
        )
    )
    secrets: list[ObjectKey] = []
    for rule in names.values():
        usable = [
            found
            for name in rule
            if (found := module_sets.get(ObjectKey(namespace=namespace, name=name))) is not None
            and not found.problems
        ]
        for ref in module_secret_refs(merge_modules(usable)):
            key = ObjectKey(namespace=namespace, name=ref.name)
            if key not in secrets:
                secrets.append(key)
    return sets, tuple(secrets)


def resolve_rule_modules(
    namespace: str,
    names: Mapping[int, tuple[str, ...]],
    module_sets: Mapping[ObjectKey, ModuleSet],
    secrets: Mapping[ObjectKey, Secret],
) -> dict[int, RuleModules]:
    """Each rule's :class:`RuleModules` (only rules that name a ModuleSet)."""
    resolved: dict[int, RuleModules] = {}
    for index, rule_names in names.items():
        modules, values, error = resolve_module_sets(namespace, rule_names, module_sets, secrets)
        resolved[index] = RuleModules(
            names=rule_names, modules=modules, secrets=values, error=error
        )
    return resolved


def _split_names(value: str | None) -> list[str]:
    return [name.strip() for name in (value or "").split(",") if name.strip()]


def listener_module_names(annotations: Mapping[str, str], listener: str | None) -> tuple[str, ...]:
    """The ModuleSets a Gateway's annotations name for a listener: the Gateway-wide ones, then
    the listener's own (``listener``: the Gateway's own listener name, None for a ListenerSet's
    listener, which only the Gateway-wide annotation reaches)."""
    names = _split_names(annotations.get(GATEWAY_MODULE_SETS))
    if listener is not None:
        names += _split_names(annotations.get(f"{GATEWAY_MODULE_SETS}.{listener}"))
    return tuple(dict.fromkeys(names))


def with_listener_modules(listener: RuleModules, rule: RuleModules | None) -> RuleModules:
    """A rule's modules under its listener's: per module type the listener's setting wins, the
    rule's fill the types it leaves unset (see the module docstring). The first error (the
    listener's, then the rule's) stays: the rule cannot be applied."""
    if rule is None:
        return listener
    if listener.error is not None or rule.error is not None:
        return RuleModules(
            names=listener.names + rule.names,
            modules=listener.modules,
            secrets={},
            error=listener.error or rule.error,
        )
    merged: dict[str, Any] = {}
    from_listener: set[str] = set()
    for name, info in Modules.model_fields.items():
        config = getattr(listener.modules, name)
        if config is not None:
            merged[name] = config
            from_listener.add(info.alias or name)
        elif (own := getattr(rule.modules, name)) is not None:
            merged[name] = own
    modules = Modules(**merged)
    secrets: dict[tuple[str, str], SecretValue] = {}
    for module, _, ref in module_secret_ref_fields(modules):
        source = listener if module in from_listener else rule
        entry = (ref.name, ref.key)
        value = source.secrets.get(entry)
        if value is None:
            continue
        if entry in secrets and secrets[entry] != value:
            # Both read a Secret of this name, in two namespaces: one chain cannot hold both.
            return RuleModules(
                names=listener.names + rule.names,
                modules=listener.modules,
                secrets={},
                error=ModuleError(
                    permanent=True,
                    reason="InvalidModuleSet",
                    message=f"the Gateway's and the route's modules read two Secrets named "
                    f"{ref.name} (key {ref.key}); rename one",
                ),
            )
        secrets[entry] = value
    return RuleModules(names=listener.names + rule.names, modules=modules, secrets=secrets)


def names_modules(annotations: Mapping[str, str]) -> bool:
    """Whether a Gateway's annotations name ModuleSets (for it or one of its listeners)."""
    return any(
        key == GATEWAY_MODULE_SETS or key.startswith(GATEWAY_MODULE_SETS + ".")
        for key in annotations
    )


def resolve_listener_modules(
    namespace: str,
    annotations: Mapping[str, str],
    listeners: Iterable[tuple[ObjectKey | None, str]],
    module_sets: Mapping[ObjectKey, ModuleSet],
    secrets: Mapping[ObjectKey, Secret],
) -> dict[tuple[ObjectKey | None, str], RuleModules]:
    """The modules a Gateway's annotations name for each of its ``listeners`` (the ListenerSet
    declaring it, None for the Gateway's own, and its name) that gets some."""
    found: dict[tuple[ObjectKey | None, str], RuleModules] = {}
    for owner, listener in listeners:
        names = listener_module_names(annotations, listener if owner is None else None)
        if names:
            modules, values, error = resolve_module_sets(namespace, names, module_sets, secrets)
            found[(owner, listener)] = RuleModules(
                names=names, modules=modules, secrets=values, error=error
            )
    return found


def modules_condition(
    annotations: Mapping[str, str], listeners: Iterable[str], resolved: Iterable[RuleModules]
) -> tuple[bool, str, str] | None:
    """The Gateway's ``interlock.dev/ModuleSets`` condition as ``(status, reason, message)``
    (None: its annotations name no ModuleSet): False with the first listener's error, else
    False ``ListenerNotFound`` for an annotation naming none of its own ``listeners`` (a typo
    must not leave the listener meant unguarded in silence)."""
    if not names_modules(annotations):
        return None
    listed = list(resolved)
    error = next((m.error for m in listed if m.error is not None), None)
    if error is not None:
        return False, error.reason, error.message
    known = set(listeners)
    unknown = sorted(
        key
        for key in annotations
        if key.startswith(GATEWAY_MODULE_SETS + ".")
        and key[len(GATEWAY_MODULE_SETS) + 1 :] not in known
    )
    if unknown:
        return (
            False,
            "ListenerNotFound",
            "no listener of this Gateway: annotation " + ", ".join(unknown),
        )
    names = sorted({name for m in listed for name in m.names})
    return True, "ModuleSetsApplied", "ModuleSets applied to its listeners: " + ", ".join(names)
