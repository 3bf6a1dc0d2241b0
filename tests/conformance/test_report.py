"""Reading a conformance run (tests/conformance/report.py): each test's result and features
from the suite's log, and CI's verdict on interlock's claims."""

from __future__ import annotations

from pathlib import Path

from interlock.model.gateway_class import SUPPORTED_FEATURES
from tests.conformance import report

RELYING = "relying on the following features:"
LOG = f"""\
=== RUN   TestConformance
=== RUN   TestConformance/HTTPRouteSimpleSameNamespace
    conformance.go:72: 2026-12-02T06:01:00Z: Applying tests/httproute-simple-same-namespace.yaml
    conformance.go:80: 2026-12-02T06:01:01Z: Running HTTPRouteSimpleSameNamespace,\
 {RELYING} Gateway-STANDARD, HTTPRoute-STANDARD
=== RUN   TestConformance/HTTPRouteQueryParamMatching
    conformance.go:80: 2026-12-02T06:01:02Z: Running HTTPRouteQueryParamMatching,\
 {RELYING} Gateway-STANDARD, HTTPRoute-STANDARD,\
 HTTPRouteQueryParamMatching-STANDARD
    helpers.go:400:
        \tError Trace:\t/x/helpers.go:400
        \tError:      \tReceived unexpected error:
        \tTest:       \tTestConformance/HTTPRouteQueryParamMatching
=== RUN   TestConformance/GRPCExactMethodMatching
    conformance.go:50: Skipping GRPCExactMethodMatching: suite does not support GRPCRoute
--- FAIL: TestConformance (12.00s)
    --- PASS: TestConformance/HTTPRouteSimpleSameNamespace (1.50s)
        --- PASS: TestConformance/HTTPRouteSimpleSameNamespace/Simple_HTTP_request (1.00s)
    --- FAIL: TestConformance/HTTPRouteQueryParamMatching (10.00s)
    --- SKIP: TestConformance/GRPCExactMethodMatching (0.00s)
"""


def test_the_log_gives_each_tests_result_features_and_reason() -> None:
    suite = report.parse_suite_log(LOG.replace("\\t", "\t"))
    simple = suite.tests["HTTPRouteSimpleSameNamespace"]
    assert (simple.result, simple.features) == ("PASS", ("Gateway", "HTTPRoute"))
    assert report.is_core(simple)
    query = suite.tests["HTTPRouteQueryParamMatching"]
    assert query.result == "FAIL"
    assert query.features[-1] == "HTTPRouteQueryParamMatching"
    assert query.reason == "Received unexpected error:"
    grpc = suite.tests["GRPCExactMethodMatching"]
    assert (grpc.result, grpc.reason) == ("SKIP", "suite does not support GRPCRoute")
    assert suite.setup_error == ""
    assert sorted(suite.tests) == [
        "GRPCExactMethodMatching",
        "HTTPRouteQueryParamMatching",
        "HTTPRouteSimpleSameNamespace",
    ]


def test_a_setup_failure_is_reported_with_its_error() -> None:
    text = (
        "=== RUN   TestConformance\n"
        "    helpers.go:140:\n"
        "        \tError:      \tReceived unexpected error:\n"
        "        \t            \tcontext deadline exceeded\n"
        "        \tTest:       \tTestConformance\n"
        "        \tMessages:   \terror waiting for interlock GatewayClass to be Accepted\n"
        "--- FAIL: TestConformance (60.00s)\n"
    )
    suite = report.parse_suite_log(text)
    assert suite.tests == {}
    assert suite.setup_error == (
        "Received unexpected error: context deadline exceeded"
        " / error waiting for interlock GatewayClass to be Accepted"
    )
    page = report.summary_markdown(suite, None, [], seconds=60, mode="ci")
    assert "set-up failed" in page


def test_a_claimed_test_that_did_not_pass_fails_the_check(tmp_path: Path) -> None:
    log = tmp_path / "suite.log"
    log.write_text(LOG.replace("\\t", "\t"))
    claimed = tmp_path / "claimed.txt"
    claimed.write_text("# comment\nHTTPRouteSimpleSameNamespace Gateway,HTTPRoute\n")
    common = [
        "--suite-log", str(log), "--report", str(tmp_path / "none.yaml"),
        "--claimed", str(claimed), "--out", str(tmp_path / "summary.md"),
        "--passed", str(tmp_path / "passed-tests.txt"),
    ]  # fmt: skip
    assert report.main(["check", *common]) == 0
    passed = (tmp_path / "passed-tests.txt").read_text()
    assert passed == "HTTPRouteSimpleSameNamespace Gateway,HTTPRoute\n"

    claimed.write_text(
        "HTTPRouteSimpleSameNamespace Gateway,HTTPRoute\n"
        "HTTPRouteQueryParamMatching Gateway,HTTPRoute,HTTPRouteQueryParamMatching\n"
    )
    assert report.main(["check", *common]) == 1
    assert "HTTPRouteQueryParamMatching" in (tmp_path / "summary.md").read_text()


def test_a_failed_tests_log_is_its_own_lines_and_its_subtests() -> None:
    # Parallel subtests interleave: each line belongs to the test of the header before it.
    text = """\
=== RUN   TestConformance/GatewayHTTPListenerIsolation
=== RUN   TestConformance/GatewayHTTPListenerIsolation/hostnames/0_request
=== PAUSE TestConformance/GatewayHTTPListenerIsolation/hostnames/0_request
=== RUN   TestConformance/HTTPRouteSimpleSameNamespace
    other.go:1: not mine
=== CONT  TestConformance/GatewayHTTPListenerIsolation/hostnames/0_request
    http.go:9: Response expectation failed for request: 404 != 200
=== NAME  TestConformance/HTTPRouteSimpleSameNamespace
    other.go:2: still not mine
    --- FAIL: TestConformance/GatewayHTTPListenerIsolation/hostnames/0_request (15.00s)
"""
    lines = report.logged_by(text, "GatewayHTTPListenerIsolation")
    assert any("404 != 200" in line for line in lines)
    assert lines[-1].strip().startswith("--- FAIL: TestConformance/GatewayHTTPListenerIsolation")
    assert not any("mine" in line for line in lines)
    assert report.logged_by(text, "GatewayHTTPListenerIsolation", last=1) == lines[-1:]
    failed = text + "    --- FAIL: TestConformance/GatewayHTTPListenerIsolation (20.00s)\n"
    reason = report.parse_suite_log(failed).tests["GatewayHTTPListenerIsolation"].reason
    assert reason == "http.go:9: Response expectation failed for request: 404 != 200"


def test_ci_enables_the_extended_features_of_the_claimed_tests() -> None:
    claims = report.parse_claimed(
        "A Gateway,HTTPRoute\nB Gateway,HTTPRoute,HTTPRouteQueryParamMatching,GatewayPort8080\n"
    )
    assert report.extended_features(claims) == ["GatewayPort8080", "HTTPRouteQueryParamMatching"]


def test_ci_enables_tlsroute_when_a_claimed_test_relies_on_it() -> None:
    claims = report.parse_claimed("A Gateway,TLSRoute\nB Gateway,HTTPRoute,GatewayPort8080\n")
    assert report.extended_features(claims) == ["GatewayPort8080", "TLSRoute"]


def test_the_gateway_class_lists_every_feature_a_claimed_test_relies_on() -> None:
    # The suite may choose its tests by the GatewayClass's status.supportedFeatures: a claimed
    # test's feature missing there would not run in such a run.
    claimed = Path(__file__).parents[2] / "docs" / "conformance" / "claimed-tests.txt"
    wanted = {f for claim in report.parse_claimed(claimed.read_text()) for f in claim.features}
    assert wanted <= set(SUPPORTED_FEATURES)


def test_each_profile_is_corrected_by_its_own_features() -> None:
    tls_log = f"""\
=== RUN   TestConformance/TLSRouteSimpleSameNamespace
    conformance.go:80: 2026-12-02T06:01:01Z: Running TLSRouteSimpleSameNamespace,\
 {RELYING} Gateway-STANDARD, TLSRoute-STANDARD
    --- FAIL: TestConformance/TLSRouteSimpleSameNamespace (1.50s)
"""
    suite = report.parse_suite_log(LOG.replace("\\t", "\t") + tls_log)
    written = {
        "profiles": [
            {"name": name, "core": {"result": "success"}}
            for name in ("GATEWAY-HTTP", "GATEWAY-TLS")
        ]
    }
    http, tls = report.corrected_report(written, suite)["profiles"]
    assert http["core"]["statistics"] == {"Failed": 0, "Passed": 1, "Skipped": 0}
    assert tls["core"]["failedTests"] == ["TLSRouteSimpleSameNamespace"]
    assert tls["core"]["statistics"] == {"Failed": 1, "Passed": 0, "Skipped": 0}
    assert report.is_core(suite.tests["TLSRouteSimpleSameNamespace"])


def test_the_corrected_report_counts_a_parallel_test_that_failed() -> None:
    # The suite wrote this report before its parallel tests ran: all counted passed.
    written = {
        "kind": "ConformanceReport",
        "profiles": [
            {
                "name": "GATEWAY-HTTP",
                "summary": "Core tests succeeded. Extended tests succeeded.",
                "core": {"result": "success", "statistics": {"Passed": 1}},
                "extended": {
                    "result": "success",
                    "statistics": {"Passed": 1},
                    "supportedFeatures": ["HTTPRouteQueryParamMatching"],
                },
            }
        ],
    }
    suite = report.parse_suite_log(LOG.replace("\\t", "\t"))
    fixed = report.corrected_report(written, suite)["profiles"][0]
    assert fixed["core"] == {
        "result": "success",
        "statistics": {"Failed": 0, "Passed": 1, "Skipped": 0},
    }
    assert fixed["extended"]["result"] == "failure"
    assert fixed["extended"]["failedTests"] == ["HTTPRouteQueryParamMatching"]
    assert fixed["extended"]["supportedFeatures"] == ["HTTPRouteQueryParamMatching"]
    assert fixed["summary"] == "Core tests succeeded. Extended tests failed with 1 test failures."


def test_a_test_skipped_in_one_run_and_passed_in_the_next_passed() -> None:
    # CI runs a test alone after the others: skipped in the first run, run in the second.
    first = """\
=== RUN   TestConformance/ListenerSetReferenceGrant
    conformance.go:50: Skipping ListenerSetReferenceGrant: test explicitly skipped
    --- SKIP: TestConformance/ListenerSetReferenceGrant (0.00s)
"""
    second = f"""\
=== RUN   TestConformance/ListenerSetReferenceGrant
    conformance.go:80: Running ListenerSetReferenceGrant, {RELYING} Gateway-STANDARD,\
 ListenerSet-STANDARD
    --- PASS: TestConformance/ListenerSetReferenceGrant (2.00s)
"""
    test = report.parse_suite_log(first + second).tests["ListenerSetReferenceGrant"]
    assert (test.result, test.reason) == ("PASS", "")
    assert test.features == ("Gateway", "ListenerSet")
