"""The alert rules pass Prometheus's own checks: ``promtool check rules`` (syntax, PromQL,
templates) and ``promtool test rules`` with a unit test per alert (``alerts_test.yaml``), with
promtool built from the Prometheus Go module (``hack/build-promtool.sh``)."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.kit.chart_tools import CHART, run, tool

ALERTS = CHART / "files" / "alerts.yaml"
UNIT_TESTS = Path(__file__).with_name("alerts_test.yaml")


def test_promtool_checks_the_rules() -> None:
    result = run([tool("promtool"), "check", "rules", ALERTS])
    assert "SUCCESS: 7 rules found" in result.stdout, result.stdout


def test_every_alert_has_a_unit_test_and_they_pass() -> None:
    alerts = {r["alert"] for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]}
    tested = {
        case["alertname"]
        for test in yaml.safe_load(UNIT_TESTS.read_text())["tests"]
        for case in test["alert_rule_test"]
        if case["exp_alerts"]
    }
    assert tested == alerts
    result = run([tool("promtool"), "test", "rules", UNIT_TESTS])
    assert "SUCCESS" in result.stdout, result.stdout


def test_a_wrong_expectation_fails(tmp_path: Path) -> None:
    """The control case: promtool test rules fails when an alert does not do what a test says."""
    broken = tmp_path / "alerts_test.yaml"
    text = UNIT_TESTS.read_text().replace("../../charts/", f"{CHART.parent.parent}/charts/")
    broken.write_text(text.replace("severity: critical", "severity: warning", 1))
    result = run([tool("promtool"), "test", "rules", broken], check=False)
    assert result.returncode != 0
    assert "InterlockEdge5xxRatio" in result.stdout + result.stderr
