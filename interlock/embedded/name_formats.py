"""The name and number formats kube-apiserver checks, with its own error wording.

Object names, hosts, port names and port numbers are checked by many kinds (Service ports,
Ingress hosts and backends, EndpointSlice addresses). A user who gets a 422 from the embedded
server and one from a cluster should read the same sentence, so each check returns the message
apimachinery's ``validation`` package would, or None when the value is valid.
"""

from __future__ import annotations

import re

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = rf"{_DNS1123_LABEL_FMT}(\.{_DNS1123_LABEL_FMT})*"
_DNS1123_LABEL = re.compile(rf"^{_DNS1123_LABEL_FMT}$")
_DNS1123_SUBDOMAIN = re.compile(rf"^{_DNS1123_SUBDOMAIN_FMT}$")
_WILDCARD_DNS1123_SUBDOMAIN = re.compile(rf"^\*\.{_DNS1123_SUBDOMAIN_FMT}$")
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_IANA_SERVICE_NAME = re.compile(r"^[-a-z0-9]+$")
_HAS_LETTER = re.compile(r"[a-z]")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")

PORT_NUMBER_ERROR = "must be between 1 and 65535, inclusive"


def dns1123_label_error(value: str) -> str | None:
    if len(value) > 63:
        return "must be no more than 63 characters"
    if not _DNS1123_LABEL.match(value):
        return (
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
            "'-', and must start and end with an alphanumeric character (e.g. 'my-name',  or "
            "'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
        )
    return None


def dns1123_subdomain_error(value: str) -> str | None:
    if len(value) > 253:
        return "must be no more than 253 characters"
    if not _DNS1123_SUBDOMAIN.match(value):
        return (
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
            "'-' or '.', and must start and end with an alphanumeric character (e.g. "
            "'example.com', regex used for validation is "
            "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        )
    return None


def wildcard_dns1123_subdomain_error(value: str) -> str | None:
    """For hosts containing ``*``: only a leading ``*.`` label is allowed (``*.example.com``)."""
    if len(value) > 253:
        return "must be no more than 253 characters"
    if not _WILDCARD_DNS1123_SUBDOMAIN.match(value):
        return (
            "a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS "
            "subdomain, which must consist of lower case alphanumeric characters, '-' or '.' and "
            "end with an alphanumeric character (e.g. '*.example.com', regex used for validation "
            "is '\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        )
    return None


def dns1035_label_error(value: str) -> str | None:
    if len(value) > 63:
        return "must be no more than 63 characters"
    if not _DNS1035_LABEL.match(value):
        return (
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start "
            "with an alphabetic character, and end with an alphanumeric character (e.g. "
            "'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
        )
    return None


def port_name_errors(value: str) -> list[str]:
    """An IANA service name (``http``, ``grpc-web``), as a Service or container port is named."""
    errors: list[str] = []
    if len(value) > 15:
        errors.append("must be no more than 15 characters")
    if not _IANA_SERVICE_NAME.match(value):
        errors.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if "--" in value:
        errors.append("must not contain consecutive hyphens")
    if not _HAS_LETTER.search(value):
        errors.append("must contain at least one letter (a-z)")
    if value.startswith("-") or value.endswith("-"):
        errors.append("must not begin or end with a hyphen")
    return errors


def path_segment_name_errors(value: str) -> list[str]:
    """A name that becomes one segment of a URL path (a resource backend's kind and name)."""
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{bad}'" for bad in ("/", "%") if bad in value]


def qualified_name_error(key: str) -> str | None:
    """A label or annotation key, or an appProtocol: ``[prefix/]name``."""
    prefix, _, name = key.rpartition("/")
    if prefix and dns1123_subdomain_error(prefix):
        return "prefix part " + str(dns1123_subdomain_error(prefix))
    if not name or len(name) > 63 or not _QUALIFIED_NAME.match(name):
        return (
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
            "and end with an alphanumeric character, at most 63 characters"
        )
    return None
