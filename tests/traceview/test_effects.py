"""Effect labels, hiding start-up and retained values, participant names and event names, on a
trace recorded from the real runtime with the controller's topic names."""

from __future__ import annotations

from pathlib import Path

from interlock.traceview import load_trace, render_timeline, render_tree, select
from interlock.traceview.effects import correlation_name, effects, short_name
from interlock.traceview.select import sections, without_internal


def test_arrows_say_what_each_message_did(controller_trace: Path) -> None:
    selection = without_internal(select(load_trace(controller_trace)))
    found = sections(selection)
    assert [correlation_name(s.correlation_id) for s in found] == [
        "Service default/echo-v2 deleted",
        "Service default/echo-v2 changed",
        "ModuleSet default/broken changed",
    ]
    labels = effects(selection.messages)
    deleted, created = ([labels[m.id] for m in s.messages] for s in found[:2])
    assert deleted == [
        "Service default/echo-v2 deleted (rv 2)",
        "echo-v2 exists → false",
        "policy default/echo:80: HTTPRoute default/echo-split resolved",
    ]
    assert created[1] == "echo-v2 exists → true"


def test_start_up_and_retained_values_are_hidden_unless_asked(controller_trace: Path) -> None:
    everything = select(load_trace(controller_trace))
    shown = without_internal(everything)
    assert not [m for m in shown.messages if m.type == "Started"]
    assert not [m for m in shown.messages if m.type == "Published" and m.sender == m.recipient]
    assert shown.hidden == len(everything.messages) - len(shown.messages) > 0
    assert "start-up and retained-value deliveries hidden" in render_tree(shown)
    assert any(m.type == "Started" for m in everything.messages)
    assert "start → watch/default/echo/80/default" in render_tree(everything)


def test_tree_and_timeline_number_the_events(controller_trace: Path) -> None:
    selection = without_internal(select(load_trace(controller_trace)))
    tree = render_tree(selection)
    assert tree.startswith("#1  ")
    assert "#3  " in tree and "FAILED (RuntimeError: broken on purpose)" in tree
    timeline = render_timeline(selection).splitlines()
    assert timeline[:3] == [
        "#1 = Service default/echo-v2 deleted",
        "#2 = Service default/echo-v2 changed",
        "#3 = ModuleSet default/broken changed",
    ]
    rows = timeline[3:]
    assert {row.split()[3] for row in rows} == {"#1", "#2", "#3"}, rows
    assert any("echo-v2 exists → false" in row and " #1 " in row for row in rows)


def test_participant_names_keep_the_kind() -> None:
    assert short_name("route/gateway.networking.k8s.io/default/echo-split") == (
        "route/…/default/echo-split"
    )
    assert short_name("service-directory") == "service-directory"
    long = "watch/default/a-very-long-service-name/8080/default"
    assert short_name(long).startswith("watch/default/") and short_name(long).endswith("…")
    assert len(short_name(long)) == 30


def test_runtime_numbered_correlations_are_named_by_their_first_message() -> None:
    assert correlation_name("69", "LeadershipChanged leading=True → status-writer") == (
        "LeadershipChanged leading=True → status-writer"
    )
    assert correlation_name("Upserted IngressClass /interlock rv=11") == (
        "IngressClass interlock changed"
    )
    assert correlation_name("corr-one") == "corr-one"
