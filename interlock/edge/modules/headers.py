"""headers: add and remove request headers before the proxy, response headers after it.

Names and values are validated when the module is compiled, so a value with a line break (header
injection) or a name that is not an HTTP token is a permanent configuration error rather than a
failure in the middle of a request. Headers that frame the message or steer the hop itself
(``Host``, ``Content-Length``, ``Transfer-Encoding``, ``Connection`` …) are owned by the proxy and
cannot be changed here: rewriting them would corrupt the message or the routing.

``remove`` runs before ``add``, and ``add`` replaces any header of the same name, so a client
cannot smuggle its own value of a header the route adds (``X-Team``, say) to the upstream.
"""

from __future__ import annotations

import re
from collections.abc import MutableMapping

from interlock.edge.modules.errors import ModuleConfigError
from interlock.model.moduleset import PROXY_OWNED_HEADERS, HeaderChanges, HeadersModule

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # fullmatch: no trailing newline
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


_SENSITIVE = re.compile(r"authorization|cookie|token|secret|key|password", re.IGNORECASE)


class HeaderRewrite:
    """One direction's compiled changes."""

    __slots__ = ("_add", "_remove")

    def __init__(self, changes: HeaderChanges, *, field: str) -> None:
        for index, name in enumerate(changes.remove):
            _check_name(name, field=f"{field}.remove[{index}]")
        for name, value in changes.add.items():
            where = f"{field}.add[{name!r}]"
            _check_name(name, field=where)
            if _BAD_VALUE.search(value):
                raise ModuleConfigError(where, "the value contains a control character")
        self._remove = tuple(name.lower() for name in changes.remove)
        self._add = tuple(changes.add.items())

    def apply(self, headers: MutableMapping[str, str]) -> None:
        """Remove, then add (replacing), in place; names match case-insensitively."""
        doomed = {name.lower() for name, _ in self._add}.union(self._remove)
        if doomed:
            for key in {key for key in headers if key.lower() in doomed}:
                if key in headers:
                    del headers[key]
        for name, value in self._add:
            headers[name] = value

    def summary(self) -> dict[str, object]:
        return {
            "add": {name: _shown(name, value) for name, value in self._add},
            "remove": list(self._remove),
        }


def _check_name(name: str, *, field: str) -> None:
    if not _TOKEN.fullmatch(name):
        raise ModuleConfigError(field, f"{name!r} is not a valid header name")
    if name.lower() in PROXY_OWNED_HEADERS:
        raise ModuleConfigError(field, f"{name} is managed by the proxy and cannot be changed")


def _shown(name: str, value: str) -> str:
    """Values of headers that usually carry credentials are not shown on /debug."""
    return "<redacted>" if _SENSITIVE.search(name) else value


class Headers:
    """Compiled request and response header changes."""

    __slots__ = ("request", "response")

    def __init__(self, config: HeadersModule) -> None:
        self.request = HeaderRewrite(config.request, field="headers.request")
        self.response = HeaderRewrite(config.response, field="headers.response")

    def __repr__(self) -> str:
        return f"Headers({self.summary()})"

    def summary(self) -> dict[str, object]:
        return {"request": self.request.summary(), "response": self.response.summary()}
