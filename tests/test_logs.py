"""Log lines for people (text) and machines (JSON, controller-runtime's keys), one logger for all.

What an operator's log pipeline relies on: one JSON object a line, ``level``/``ts``/``logger``/
``msg``, the object's ``kind``/``namespace``/``name`` as fields, UTC times; and that library
logging (aiohttp, kubernetes-asyncio) arrives the same way — never kubernetes-asyncio's DEBUG
response bodies, which carry Secrets.
"""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from loguru import logger

from interlock.logs import configure_logging, module_logger


@pytest.fixture
def stream() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    kube_level = logging.getLogger("kubernetes_asyncio").level
    out = io.StringIO()
    try:
        yield out
    finally:
        logger.remove()
        logger.add(sys.stderr)
        root.handlers[:] = handlers
        root.setLevel(level)
        logging.getLogger("kubernetes_asyncio").setLevel(kube_level)


def _json_lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_json_lines_carry_controller_runtime_keys_and_the_object(stream) -> None:
    configure_logging("INFO", format="json", stream=stream)
    logger.warning("HTTPRoute shop/web: backend ref 2: port is required")
    logger.bind(kind="Ingress", namespace="shop", name="front").info("edge attached")
    logger.info("initial sync done: {} actors", 4)
    logger.debug("not at INFO")

    first, second, third = _json_lines(stream)
    assert first["level"] == "warn"
    assert first["msg"] == "HTTPRoute shop/web: backend ref 2: port is required"
    assert (first["kind"], first["namespace"], first["name"]) == ("HTTPRoute", "shop", "web")
    assert str(first["logger"]).endswith("test_logs")
    ts = datetime.fromisoformat(str(first["ts"]).replace("Z", "+00:00"))
    assert str(first["ts"]).endswith("Z") and ts.utcoffset() is not None
    assert ts.utcoffset().total_seconds() == 0
    assert str(first["caller"]).startswith("test_logs.py:")
    assert (second["kind"], second["namespace"], second["name"]) == ("Ingress", "shop", "front")
    assert second["level"] == "info"
    assert "kind" not in third and third["msg"] == "initial sync done: 4 actors"


def test_a_logged_exception_is_a_stacktrace_field(stream) -> None:
    configure_logging("INFO", format="json", stream=stream)
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        logger.exception("Lease default/interlock: renew raised")
    (line,) = _json_lines(stream)
    assert line["level"] == "error"
    assert "RuntimeError: boom" in str(line["stacktrace"])
    assert line["kind"] == "Lease"


def test_library_logging_goes_through_the_same_logger(stream) -> None:
    configure_logging("DEBUG", format="json", stream=stream)
    logging.getLogger("aiohttp.server").warning("Error handling request from %s", "10.0.0.1")
    logging.getLogger("kubernetes_asyncio.client.rest").debug("response body: %s", "SECRET")
    logging.getLogger("kubernetes_asyncio.client.rest").info("a line worth having")

    lines = _json_lines(stream)
    assert [line["logger"] for line in lines] == [
        "aiohttp.server",
        "kubernetes_asyncio.client.rest",
    ]
    assert lines[0]["msg"] == "Error handling request from 10.0.0.1"
    assert lines[0]["level"] == "warn"
    assert str(lines[0]["caller"]).startswith("test_logs.py:")
    assert "SECRET" not in stream.getvalue()


def test_text_lines_read_as_sentences(stream) -> None:
    configure_logging("INFO", format="text", stream=stream)
    logger.warning("HTTPRoute shop/web: backend ref 2: port is required")
    logging.getLogger("aiohttp.access").info("GET /readyz 200")
    first, second = stream.getvalue().splitlines()
    stamp, level, _logger, rest = first.split(maxsplit=3)
    assert stamp.endswith("Z") and level == "WARN"
    assert rest.endswith("port is required  kind=HTTPRoute namespace=shop name=web")
    assert "|" not in first, "loguru's default format (with source positions) is gone"
    assert second.split()[1:3] == ["INFO", "aiohttp.access"]


def test_a_module_logger_names_lines_after_its_module_whoever_runs_them(
    stream: io.StringIO,
) -> None:
    # As a compiled module's lines: the nearest Python frame (this test's) is not the module's.
    configure_logging("DEBUG", format="json", stream=stream)
    module_logger("interlock.dataplane.http1_server").debug("edge: malformed request refused")
    module_logger(__name__).info("from the module itself")
    compiled, own = _json_lines(stream)
    assert compiled["logger"] == "dataplane.http1_server"
    assert compiled["caller"] == "http1_server.py"  # no line: a compiled function's is not known
    assert str(own["logger"]).endswith("test_logs")
    assert str(own["caller"]).startswith("test_logs.py:")


def test_a_module_loggers_record_names_its_file_and_no_caller(stream: io.StringIO) -> None:
    seen: list[Any] = []
    logger.add(lambda message: seen.append(message.record), level="DEBUG")
    module_logger("interlock.edge.steps").debug("edge a.example: refused")
    (record,) = seen
    assert (record["name"], record["module"], record["function"], record["line"]) == (
        "interlock.edge.steps",
        "steps",
        "",
        0,
    )
    assert record["file"].path.endswith("/interlock/edge/steps.py")
    assert record["file"].name == "steps.py"


def test_an_unknown_format_is_refused_by_name(stream) -> None:
    with pytest.raises(ValueError, match="--log-format: 'xml' is not one of text, json"):
        configure_logging("INFO", format="xml", stream=stream)  # type: ignore[arg-type]
