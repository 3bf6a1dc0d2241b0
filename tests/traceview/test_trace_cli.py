"""`interlock trace` on a trace recorded from the real runtime."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from interlock.cli.trace import parse_since
from interlock.traceview import load_trace, render_tree, select
from interlock.traceview.diagram import render_html, render_mermaid


def test_tree_nests_messages_under_their_cause(trace_file: Path) -> None:
    log = load_trace(trace_file)
    assert log.bad_lines == 1
    text = render_tree(select(log, correlation="corr-one"))
    lines = text.splitlines()
    assert "correlation corr-one" in lines[0]
    assert "external event" in lines[0]
    assert "ServiceChanged Service default/db → services" in lines[1]
    children = [line for line in lines[2:] if line.strip()]
    assert len(children) == 2
    assert children[0].lstrip().startswith("├─ Recompute")
    assert children[1].lstrip().startswith("└─ Recompute")
    assert any("route/default/api" in c and "FAILED (RuntimeError: boom)" in c for c in children)
    assert "corr-two" not in text


def test_object_filter_selects_chains_touching_the_object(trace_file: Path) -> None:
    log = load_trace(trace_file)
    chosen = select(log, object_spec="Service/default/cache")
    assert [root.correlation_id for root in chosen.roots] == ["corr-two"]
    assert len(chosen.messages) == 3
    with pytest.raises(ValueError, match="KIND/NAMESPACE/NAME"):
        select(log, object_spec="justaname")


def test_mermaid_has_participants_and_arrows(trace_file: Path) -> None:
    text = render_mermaid(select(load_trace(trace_file)))
    assert text.startswith("sequenceDiagram\n")
    assert "participant p0 as external" in text
    assert text.count("->>") + text.count("-x") == 6
    assert "-x" in text  # the failed message


def test_html_is_self_contained(trace_file: Path) -> None:
    page = render_html(select(load_trace(trace_file)))
    assert "<svg" in page and 'class="message handled"' in page
    assert "<script" not in page and "http://" not in page.replace(
        'xmlns="http://www.w3.org/2000/svg"', ""
    )


def test_cli_writes_each_format(trace_file: Path, tmp_path: Path, capsys) -> None:
    from interlock.cli import main

    assert main(["trace", str(trace_file), "--correlation", "corr-two"]) == 0
    out = capsys.readouterr()
    assert "corr-two" in out.out and "timeline" in out.out
    assert "skipped 1 lines" in out.err
    html_path = tmp_path / "trace.html"
    assert main(["trace", str(trace_file), "--format", "html", "-o", str(html_path)]) == 0
    assert html_path.read_text().startswith("<!doctype html>")
    assert main(["trace", str(tmp_path / "missing.jsonl")]) == 2


def test_since_accepts_durations_and_times() -> None:
    moment = parse_since("2026-11-30T01:00:00Z")
    assert moment.isoformat() == "2026-11-30T01:00:00+00:00"
    assert (parse_since("90s", now=moment) - moment).total_seconds() == -90


def test_records_are_json_lines(trace_file: Path) -> None:
    lines = trace_file.read_text().splitlines()[:-1]
    assert all(json.loads(line)["event"] for line in lines)
