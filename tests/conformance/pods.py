"""What the conformance pod runner decides about a Pod, as pure functions (no I/O, no clock).

The Gateway API conformance suite needs Pods that answer as its ``echo-basic`` backend does, and
these machines have no kubelet and no container engine. ``tests/conformance/podrunner.py`` plays
the kubelet: it runs each Pod's container as a process in a network namespace of its own. What
it must get exactly right — which program an image stands for, the container's environment
(``fieldRef``, Secret and ConfigMap references, ``$(VAR)`` expansion), the files of its volumes,
the paths a container names inside its volumes, the status the EndpointSlice controller reads,
and the slice of a container's log the API server asks for — lives here, so it is tested
without root, namespaces or an API server.

A container's volumes are plain folders on the runner's disk, not mounts: a Pod has no mount
namespace of its own here, so an env value or argument that names a path under a volume's
``mountPath`` is rewritten to the same path under that volume's folder (:func:`rewrite_paths`).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

Obj = dict[str, Any]

ECHO_BASIC = "echo-basic"
PLACEHOLDER = "placeholder"

# Images whose only role in the GATEWAY-HTTP profile is to exist and be Ready: the base manifests'
# UDP coredns backend, which no GATEWAY-HTTP test calls, but without which the suite's set-up
# never sees the gateway-conformance-infra namespace ready. Such a Pod runs a placeholder (a
# process that sleeps, listening on nothing) and is reported Ready at once.
PLACEHOLDER_IMAGES = ("registry.k8s.io/coredns/coredns",)


class PodConfigError(Exception):
    """A container cannot be configured yet (a Secret, ConfigMap or key it names is missing):
    the kubelet reports ``CreateContainerConfigError`` and tries again, and so does the runner."""


def image_repository(image: str) -> str:
    """An image without its tag or digest, a registry's port kept
    (``registry.k8s.io/gateway-api/echo-basic:v1.5.1`` -> ``.../gateway-api/echo-basic``)."""
    without_digest = image.split("@", 1)[0]
    last = without_digest.rsplit("/", 1)
    if ":" in last[-1]:
        last[-1] = last[-1].split(":", 1)[0]
    return "/".join(last)


def runnable_for(image: str) -> str | None:
    """What the runner runs for an image: ``echo-basic`` (the conformance backend, any tag or
    registry), ``placeholder`` (:data:`PLACEHOLDER_IMAGES`), or None (the Pod is marked Failed)."""
    repository = image_repository(image)
    if repository.rsplit("/", 1)[-1] == ECHO_BASIC:
        return ECHO_BASIC
    if repository in PLACEHOLDER_IMAGES:
        return PLACEHOLDER
    return None


@dataclass(frozen=True)
class PodFacts:
    """What a Pod's ``fieldRef`` env may name that is not in the Pod object itself."""

    pod_ip: str
    host_ip: str


def field_ref(pod: Obj, path: str, facts: PodFacts) -> str:
    """The value of a downward-API ``fieldRef.fieldPath``, as the kubelet gives it."""
    meta = pod.get("metadata", {})
    spec = pod.get("spec", {})
    simple = {
        "metadata.name": meta.get("name", ""),
        "metadata.namespace": meta.get("namespace", ""),
        "metadata.uid": meta.get("uid", ""),
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.hostIP": facts.host_ip,
        "status.hostIPs": facts.host_ip,
        "status.podIP": facts.pod_ip,
        "status.podIPs": facts.pod_ip,
    }
    if path in simple:
        return str(simple[path])
    match = re.fullmatch(r"metadata\.(labels|annotations)\['([^']*)'\]", path)
    if match:
        return str(meta.get(match.group(1), {}).get(match.group(2), ""))
    name = f"{meta.get('namespace')}/{meta.get('name')}"
    raise PodConfigError(f"Pod {name}: fieldRef.fieldPath {path!r} is not supported")


def _decoded(secret: Obj) -> dict[str, bytes]:
    data = {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}
    data.update({k: v.encode() for k, v in (secret.get("stringData") or {}).items()})
    return data


def _config_map_data(config_map: Obj) -> dict[str, bytes]:
    data = {k: v.encode() for k, v in (config_map.get("data") or {}).items()}
    data.update({k: base64.b64decode(v) for k, v in (config_map.get("binaryData") or {}).items()})
    return data


@dataclass(frozen=True)
class Sources:
    """The Secrets and ConfigMaps of the Pod's namespace, by name (what env and volumes read)."""

    secrets: Mapping[str, Obj]
    config_maps: Mapping[str, Obj]

    def secret(self, name: str, *, what: str, optional: bool) -> dict[str, bytes] | None:
        if name in self.secrets:
            return _decoded(self.secrets[name])
        if optional:
            return None
        raise PodConfigError(f"{what}: Secret {name!r} not found")

    def config_map(self, name: str, *, what: str, optional: bool) -> dict[str, bytes] | None:
        if name in self.config_maps:
            return _config_map_data(self.config_maps[name])
        if optional:
            return None
        raise PodConfigError(f"{what}: ConfigMap {name!r} not found")


_VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)|\$\$")


def expand(value: str, env: Mapping[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion: a defined variable is replaced, an undefined one is
    left as written, ``$$`` is a literal ``$``."""

    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env.get(name, match.group(0))

    return _VAR.sub(one, value)


def container_env(pod: Obj, container: Obj, sources: Sources, facts: PodFacts) -> dict[str, str]:
    """The environment of a container: ``envFrom`` first, then ``env`` in order (a later entry
    sees the earlier ones through ``$(VAR)``). Raises :class:`PodConfigError` naming the Pod,
    the container and the entry when something it names is missing."""
    meta = pod.get("metadata", {})
    where = f"Pod {meta.get('namespace')}/{meta.get('name')} container {container.get('name')}"
    env: dict[str, str] = {}
    for index, source in enumerate(container.get("envFrom") or []):
        prefix = source.get("prefix", "")
        what = f"{where}: envFrom[{index}]"
        data: dict[str, bytes] | None = None
        if "secretRef" in source:
            ref = source["secretRef"]
            data = sources.secret(ref["name"], what=what, optional=bool(ref.get("optional")))
        elif "configMapRef" in source:
            ref = source["configMapRef"]
            data = sources.config_map(ref["name"], what=what, optional=bool(ref.get("optional")))
        for key, value in (data or {}).items():
            env[prefix + key] = value.decode(errors="replace")
    for entry in container.get("env") or []:
        name = entry["name"]
        what = f"{where}: env {name}"
        if "value" in entry or "valueFrom" not in entry:
            env[name] = expand(str(entry.get("value", "")), env)
            continue
        value_from = entry["valueFrom"]
        if "fieldRef" in value_from:
            env[name] = field_ref(pod, value_from["fieldRef"]["fieldPath"], facts)
        elif "secretKeyRef" in value_from or "configMapKeyRef" in value_from:
            is_secret = "secretKeyRef" in value_from
            ref = value_from["secretKeyRef" if is_secret else "configMapKeyRef"]
            optional = bool(ref.get("optional"))
            read = sources.secret if is_secret else sources.config_map
            data = read(ref["name"], what=what, optional=optional)
            if data is None:
                continue
            if ref["key"] not in data:
                if optional:
                    continue
                kind = "Secret" if is_secret else "ConfigMap"
                raise PodConfigError(f"{what}: key {ref['key']!r} not in {kind} {ref['name']!r}")
            env[name] = data[ref["key"]].decode(errors="replace")
        elif "resourceFieldRef" in value_from:
            # No resource limits are enforced here: report the request's value, or 0.
            resource = value_from["resourceFieldRef"]["resource"]
            kind, _, res = resource.partition(".")
            requests = (container.get("resources") or {}).get(kind, {})
            env[name] = str(requests.get(res, "0"))
        else:
            raise PodConfigError(f"{what}: valueFrom {sorted(value_from)} is not supported")
    return env


def _items(data: Mapping[str, bytes], items: list[Obj] | None, what: str) -> dict[str, bytes]:
    if not items:
        return dict(data)
    files: dict[str, bytes] = {}
    for item in items:
        if item["key"] not in data:
            raise PodConfigError(f"{what}: key {item['key']!r} not found")
        files[item["path"]] = data[item["key"]]
    return files


def volume_files(pod: Obj, sources: Sources, facts: PodFacts) -> dict[str, dict[str, bytes] | None]:
    """Each volume's files (relative path -> content), by volume name; None for a volume the
    runner leaves empty (emptyDir, and anything it cannot fill: a service-account token, a
    hostPath, a persistent volume). Raises :class:`PodConfigError` when a Secret, ConfigMap or
    key is missing."""
    meta = pod.get("metadata", {})
    where = f"Pod {meta.get('namespace')}/{meta.get('name')}"
    volumes: dict[str, dict[str, bytes] | None] = {}
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        name = volume["name"]
        what = f"{where}: volume {name}"
        if "secret" in volume:
            ref = volume["secret"]
            data = sources.secret(ref["secretName"], what=what, optional=bool(ref.get("optional")))
            volumes[name] = _items(data or {}, ref.get("items"), what)
        elif "configMap" in volume:
            ref = volume["configMap"]
            data = sources.config_map(ref["name"], what=what, optional=bool(ref.get("optional")))
            volumes[name] = _items(data or {}, ref.get("items"), what)
        elif "projected" in volume:
            files: dict[str, bytes] = {}
            for source in volume["projected"].get("sources") or []:
                if "secret" in source:
                    ref = source["secret"]
                    data = sources.secret(
                        ref["name"], what=what, optional=bool(ref.get("optional"))
                    )
                    files.update(_items(data or {}, ref.get("items"), what))
                elif "configMap" in source:
                    ref = source["configMap"]
                    data = sources.config_map(
                        ref["name"], what=what, optional=bool(ref.get("optional"))
                    )
                    files.update(_items(data or {}, ref.get("items"), what))
                elif "downwardAPI" in source:
                    for item in source["downwardAPI"].get("items") or []:
                        if "fieldRef" in item:
                            value = field_ref(pod, item["fieldRef"]["fieldPath"], facts)
                            files[item["path"]] = value.encode()
            volumes[name] = files
        elif "downwardAPI" in volume:
            files = {}
            for item in volume["downwardAPI"].get("items") or []:
                if "fieldRef" in item:
                    files[item["path"]] = field_ref(
                        pod, item["fieldRef"]["fieldPath"], facts
                    ).encode()
            volumes[name] = files
        else:
            volumes[name] = None
    return volumes


def mount_map(container: Obj, volume_dirs: Mapping[str, str]) -> list[tuple[str, str]]:
    """(mountPath, folder on disk) for each of the container's volume mounts, longest mount path
    first (so a nested mount wins over its parent)."""
    mounts: list[tuple[str, str]] = []
    for mount in container.get("volumeMounts") or []:
        folder = volume_dirs.get(mount["name"])
        if folder is None:
            continue
        sub = mount.get("subPath")
        mounts.append((mount["mountPath"].rstrip("/") or "/", f"{folder}/{sub}" if sub else folder))
    return sorted(mounts, key=lambda m: len(m[0]), reverse=True)


def rewrite_paths(value: str, mounts: list[tuple[str, str]]) -> str:
    """A path under a mount path becomes the same path under that volume's folder; anything else
    is returned unchanged (see the module docstring for why)."""
    for mount_path, folder in mounts:
        if value == mount_path:
            return folder
        if value.startswith(mount_path + "/"):
            return folder + value[len(mount_path) :]
    return value


def rfc3339(moment: datetime) -> str:
    """A UTC timestamp as the API writes it (``2026-12-02T05:43:56Z``)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def running_status(
    pod: Obj,
    *,
    pod_ip: str,
    host_ip: str,
    started: datetime,
    ready: bool,
    restarts: int,
    now: datetime,
) -> Obj:
    """The ``status`` of a Pod whose containers run (``ready``: every container listens), with
    the conditions and container statuses the EndpointSlice controller and the suite read."""
    ready_text = "True" if ready else "False"
    at = rfc3339(now)
    conditions = [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": at},
        {"type": "Initialized", "status": "True", "lastTransitionTime": at},
        {"type": "ContainersReady", "status": ready_text, "lastTransitionTime": at},
        {"type": "Ready", "status": ready_text, "lastTransitionTime": at},
    ]
    containers = [
        {
            "name": c["name"],
            "image": c.get("image", ""),
            "imageID": c.get("image", ""),
            "containerID": f"process://{pod['metadata'].get('uid', '')}/{c['name']}",
            "ready": ready,
            "started": True,
            "restartCount": restarts,
            "state": {"running": {"startedAt": rfc3339(started)}},
        }
        for c in pod["spec"]["containers"]
    ]
    return {
        "phase": "Running",
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": rfc3339(started),
        "conditions": conditions,
        "containerStatuses": containers,
    }


def _not_ready(pod: Obj, *, reason: str, state: Obj, host_ip: str, now: datetime) -> Obj:
    """The part of a not-ready Pod's status its phases share: scheduled on ``host_ip``, not
    Ready for ``reason``, each container in ``state``."""
    at = rfc3339(now)
    return {
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": at},
            {"type": "Ready", "status": "False", "reason": reason, "lastTransitionTime": at},
        ],
        "containerStatuses": [
            {
                "name": c["name"],
                "image": c.get("image", ""),
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "state": state,
            }
            for c in pod["spec"]["containers"]
        ],
    }


def waiting_status(pod: Obj, *, reason: str, message: str, host_ip: str, now: datetime) -> Obj:
    """A Pod that is scheduled but whose containers cannot start yet (kept Pending)."""
    waiting = {"waiting": {"reason": reason, "message": message}}
    return {
        "phase": "Pending",
        **_not_ready(pod, reason=reason, state=waiting, host_ip=host_ip, now=now),
    }


def failed_status(pod: Obj, *, reason: str, message: str, host_ip: str, now: datetime) -> Obj:
    """A Pod the runner cannot run (phase Failed, with the reason)."""
    terminated = {"terminated": {"exitCode": 128, "reason": reason, "message": message}}
    return {
        "phase": "Failed",
        "reason": reason,
        "message": message,
        **_not_ready(pod, reason=reason, state=terminated, host_ip=host_ip, now=now),
    }


@dataclass(frozen=True)
class LogLine:
    """One line a container wrote, with when the runner read it."""

    at: datetime
    text: str


def parse_time(text: str) -> datetime:
    """An RFC 3339 time as the API server sends ``sinceTime`` (``Z`` or an offset, with or
    without fractions)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def select_log(
    lines: list[LogLine],
    *,
    since: datetime | None = None,
    tail: int | None = None,
    timestamps: bool = False,
    limit_bytes: int | None = None,
) -> str:
    """The text of ``GET /containerLogs`` for these query parameters: lines at or after
    ``since``, the last ``tail`` of them, each prefixed by its RFC 3339 time when
    ``timestamps``, cut at ``limit_bytes``."""
    chosen = [line for line in lines if since is None or line.at >= since]
    if tail is not None:
        chosen = chosen[-tail:] if tail > 0 else []
    text = "".join(
        (line.at.astimezone(UTC).isoformat().replace("+00:00", "Z") + " " if timestamps else "")
        + line.text
        + "\n"
        for line in chosen
    )
    if limit_bytes is not None:
        text = text.encode()[:limit_bytes].decode(errors="ignore")
    return text
