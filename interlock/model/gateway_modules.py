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
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
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
    module_secret_refs,
)

MODULESET_GROUP = "interlock.dev"


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
