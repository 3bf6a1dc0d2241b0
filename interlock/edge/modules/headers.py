"""headers: add and remove request headers before the proxy, response headers after it.

Names and values were checked by :func:`~interlock.model.module_settings.module_settings`
before the module is built, so a value with a line break (header injection), a name that is not
an HTTP token, or a header that frames the message or steers the hop itself (``Host``,
``Content-Length``, ``Transfer-Encoding``, ``Connection`` …) never reaches a request.

``remove`` runs before ``add``, and ``add`` replaces any header of the same name, so a client
cannot smuggle its own value of a header the route adds (``X-Team``, say) to the upstream.
"""

from __future__ import annotations

import re
from collections.abc import MutableMapping

from multidict import CIMultiDict, istr

from interlock.dataplane.proxy import HeadEdit
from interlock.model.module_settings import HeaderRewriteSettings, HeadersSettings

_TAILS_MOST = 1024
"""Most ``X-Forwarded-*`` lines (one a client address and scheme) a change keeps its tail of
(emptied when full)."""

_SENSITIVE = re.compile(r"authorization|cookie|token|secret|key|password", re.IGNORECASE)


class HeaderRewrite:
    """One direction's compiled changes."""

    __slots__ = (
        "_add",
        "_added_keys",
        "_doomed",
        "_doomed_keys",
        "_remove",
        "_tails",
        "added",
        "head_edit",
        "request_cut",
        "request_lines",
    )

    def __init__(self, settings: HeaderRewriteSettings) -> None:
        self._remove = settings.remove
        self._add = settings.add
        self.added = frozenset(name.lower() for name, _ in self._add)
        """The names ``add`` sets, lower-cased."""
        self._doomed = self.added.union(self._remove)
        """What is removed before ``add``: ``remove``'s names and ``add``'s, lower-cased."""
        # For a CIMultiDict: ``istr`` names, which it looks up without folding their case again
        # (a ``str`` is folded on every look-up); ``add``'s as written (an ``istr`` is spelled
        # as the ``str`` it was made from).
        self._doomed_keys = tuple(istr(name) for name in sorted(self._doomed))
        self._added_keys: tuple[tuple[istr, str], ...] | None = (
            tuple((istr(name), value) for name, value in self._add)
            if len(self.added) == len(self._add)
            else None
        )
        """``add``'s names and values when no two names differ only in case: once ``doomed``
        is removed, adding each is what setting it does (None: set, the later one wins)."""
        added_alone: CIMultiDict[str] = CIMultiDict()
        self.apply(added_alone)
        self.head_edit = HeadEdit.of(self._doomed, list(added_alone.items()))
        """This change made on a response head's bytes (``HeadEdit``): every ``add`` name is
        removed first, so what :meth:`apply` adds does not depend on the headers it changes —
        what it adds to none. None when the rendering path must make it (``HeadEdit.of``)."""
        edit = self.head_edit
        self.request_cut = None if edit is None else HeadEdit(edit.removed, b"", None)
        """The same change on a request head as the client sent it (``steps.decide_now``): its
        lines of :attr:`_doomed` names cut out (each line of such a head ends with its CRLF,
        the request line first: the cut ends at the next one); :attr:`request_lines` then
        added. None as :attr:`head_edit`."""
        self.request_lines = b"" if edit is None or not edit.added else edit.added[2:] + b"\r\n"
        """``add``'s lines as a request head carries them (each with its CRLF)."""
        self._tails: dict[bytes, bytes] = {}
        """``X-Forwarded-*`` lines -> :meth:`request_tail`'s answer for them."""

    def request_tail(self, forwarded: bytes) -> bytes:
        """:attr:`request_lines` then ``forwarded`` (the ``X-Forwarded-*`` lines and the empty
        line that end a request head), the same object for the same lines: an object of this
        change's own, never ``forwarded`` itself (a join of two parts is always a new object;
        ``b"" + forwarded`` is ``forwarded``), so that a connection's kept head
        (``http1_server.KeptHead.added``, compared by identity) made with this change is never
        taken for one made without it, or with another."""
        tails = self._tails
        tail = tails.get(forwarded)
        if tail is None:
            if len(tails) >= _TAILS_MOST:
                tails.clear()
            tail = tails[forwarded] = b"".join((self.request_lines, forwarded))
        return tail

    def apply(self, headers: MutableMapping[str, str]) -> None:
        """Remove, then add (replacing), in place; names match case-insensitively."""
        doomed = self._doomed
        if isinstance(headers, CIMultiDict):  # the edge's: case-insensitive itself
            # ``in`` first: most names are absent, and a look-up costs less than a popall call.
            for folded in self._doomed_keys:
                if folded in headers:
                    headers.popall(folded)
            added = self._added_keys
            if added is not None:
                for written, value in added:
                    headers.add(written, value)
                return
        elif doomed:
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


def _shown(name: str, value: str) -> str:
    """Values of headers that usually carry credentials are not shown on /debug."""
    return "<redacted>" if _SENSITIVE.search(name) else value


class Headers:
    """Compiled request and response header changes."""

    __slots__ = ("request", "response")

    def __init__(self, settings: HeadersSettings) -> None:
        self.request = HeaderRewrite(settings.request)
        self.response = HeaderRewrite(settings.response)

    def __repr__(self) -> str:
        return f"Headers({self.summary()})"

    def summary(self) -> dict[str, object]:
        return {"request": self.request.summary(), "response": self.response.summary()}
