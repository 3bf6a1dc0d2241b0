"""Reads a conformance run: which tests passed, what each relies on, and what interlock claims.

The suite's ``ConformanceReport`` counts results per profile and names only the tests that failed
or were skipped, and the suite writes it only when its set-up succeeded. What CI must check —
every test interlock claims to pass did pass — needs each test by name, so it comes from the
suite's own ``go test -v`` log (``--- PASS: TestConformance/NAME``), and the features a test relies
on from the suite's line ``Running NAME, relying on the following features: ...``.

``docs/conformance/claimed-tests.txt`` lists the claimed tests, one a line, each with the features
it relies on (``NAME FEATURE,FEATURE``), so a bounded CI run can enable just those features.

    python -m tests.conformance.report summary --suite-log LOG --report YAML --claimed FILE --out MD
    python -m tests.conformance.report check   (the same arguments; exit 1 if a claim failed)
    python -m tests.conformance.report correct --suite-log LOG --report YAML --out YAML
    python -m tests.conformance.report features --claimed FILE | --all   (features to enable)
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

# The core features of the GATEWAY-HTTP profile (conformance/utils/suite/profiles.go, v1.6.1).
CORE_FEATURES = ("Gateway", "HTTPRoute", "ReferenceGrant")
# Its extended features: GatewayExtendedFeatures, HTTPRouteExtendedFeatures and the
# BackendTLSPolicy features (pkg/features, v1.6.1).
EXTENDED_FEATURES = (
    "GatewayPort8080",
    "GatewayStaticAddresses",
    "GatewayHTTPListenerIsolation",
    "GatewayHTTPSListenerDetectMisdirectedRequests",
    "GatewayInfrastructurePropagation",
    "GatewayAddressEmpty",
    "GatewayBackendClientCertificate",
    "GatewayFrontendClientCertificateValidation",
    "GatewayFrontendClientCertificateValidationInsecureFallback",
    "ListenerSet",
    "HTTPRouteDestinationPortMatching",
    "HTTPRouteBackendRequestHeaderModification",
    "HTTPRouteQueryParamMatching",
    "HTTPRouteMethodMatching",
    "HTTPRouteResponseHeaderModification",
    "HTTPRoutePortRedirect",
    "HTTPRouteSchemeRedirect",
    "HTTPRoutePathRedirect",
    "HTTPRouteHostRewrite",
    "HTTPRoutePathRewrite",
    "HTTPRouteRequestMirror",
    "HTTPRouteRequestMultipleMirrors",
    "HTTPRouteRequestPercentageMirror",
    "HTTPRouteRequestTimeout",
    "HTTPRouteBackendTimeout",
    "HTTPRouteParentRefPort",
    "HTTPRouteBackendProtocolH2C",
    "HTTPRouteBackendProtocolWebSocket",
    "HTTPRouteNamedRouteRule",
    "HTTPRouteCORS",
    "HTTPRoute303RedirectStatusCode",
    "HTTPRoute307RedirectStatusCode",
    "HTTPRoute308RedirectStatusCode",
    "HTTPRouteRetry",
    "HTTPRouteRetryBackendTimeout",
    "HTTPRouteRetryConnectionError",
    "BackendTLSPolicy",
    "BackendTLSPolicySANValidation",
)

# The GATEWAY-TLS profile (profiles.go, v1.6.1): its core features, and of its extended ones
# (GatewayExtendedFeatures, above, and TLSRouteExtendedFeatures) the two of TLSRoute.
# interlock serves TLSRoutes on Passthrough listeners only (docs/gateway.md): the two
# TLSRoute extended features are not enabled, and TLSRouteListenerTerminateNotSupported checks
# that a Terminate listener refuses TLSRoutes, as the spec wants when it is not served.
TLS_CORE_FEATURES = ("Gateway", "ReferenceGrant", "TLSRoute")
TLS_ROUTE_EXTENDED_FEATURES = ("TLSRouteModeTerminate", "TLSRouteModeMixed")
PROFILES = {
    "GATEWAY-HTTP": (CORE_FEATURES, EXTENDED_FEATURES),
    "GATEWAY-TLS": (
        TLS_CORE_FEATURES,
        tuple(f for f in EXTENDED_FEATURES if f.startswith("Gateway") or f == "ListenerSet")
        + TLS_ROUTE_EXTENDED_FEATURES,
    ),
}
"""Each profile a run names (``--conformance-profiles``): its core and extended features."""
SERVED_FEATURES = CORE_FEATURES + EXTENDED_FEATURES + ("TLSRoute",)
"""What a full run enables: every feature of GATEWAY-HTTP and GATEWAY-TLS's core."""

# A test's own result line; its subtests (TestConformance/NAME/CASE) are not tests of their own.
_RESULT = re.compile(r"^\s*--- (PASS|FAIL|SKIP): TestConformance/([^/\s]+) \(([\d.]+)s\)")
_RUNNING = re.compile(r"Running (\S+), relying on the following features: (.*)$")
_SKIP_REASON = re.compile(r"Skipping (\S+): (.*)$")
_ERROR = re.compile(r"^\s+(Error|Messages):\s+(.*)$")
_CONTINUED = re.compile(r"^\s+\t\s+\t(.*)$")
_RUN = re.compile(r"^=== (?:RUN|CONT|PAUSE|NAME)\s+TestConformance/([^/\s]+)")
_HEADER = re.compile(r"^=== (?:RUN|CONT|PAUSE|NAME)\s+(TestConformance/\S+)")
_ANY_RESULT = re.compile(r"^\s*--- (?:PASS|FAIL|SKIP): (TestConformance/\S+)")


@dataclass
class TestResult:
    """One test of the suite as its log tells it."""

    name: str
    result: str  # PASS, FAIL or SKIP
    seconds: float = 0.0
    features: tuple[str, ...] = ()
    reason: str = ""


@dataclass
class SuiteLog:
    """Everything :func:`parse_suite_log` reads from the suite's ``go test -v`` output."""

    tests: dict[str, TestResult] = field(default_factory=dict)
    setup_error: str = ""


def _feature_names(text: str) -> tuple[str, ...]:
    # "HTTPRoute-STANDARD, Gateway-STANDARD" -> ("HTTPRoute", "Gateway")
    return tuple(part.strip().rsplit("-", 1)[0] for part in text.split(",") if part.strip())


def parse_suite_log(text: str) -> SuiteLog:
    """Each test's result, features and first error (or skip reason); the set-up's error when
    no test ran."""
    parsed = SuiteLog()
    features: dict[str, tuple[str, ...]] = {}
    reasons: dict[str, str] = {}
    failures: dict[str, list[list[str]]] = {}
    current: str | None = None
    setup_errors: list[list[str]] = []
    # testify writes "Error:" (its first line, then continuation lines) and "Messages:" (what
    # the suite says it was waiting for): the reason of a test is both, of its first failure.
    field: list[str] | None = None
    for line in text.splitlines():
        continued = _CONTINUED.match(line)
        if field is not None and continued:
            field.append(continued.group(1).strip())
            continue
        field = None
        run = _RUN.match(line)
        if run:
            current = run.group(1)
            continue
        running = _RUNNING.search(line)
        if running:
            features[running.group(1)] = _feature_names(running.group(2))
            continue
        skip = _SKIP_REASON.search(line)
        if skip:
            reasons.setdefault(skip.group(1), skip.group(2).strip())
            continue
        error = _ERROR.match(line)
        if error:
            field = [error.group(2).strip()]
            if current is None:
                setup_errors.append(field)
            elif error.group(1) == "Error" and current not in failures:
                failures[current] = [field]
            elif error.group(1) == "Messages" and len(failures.get(current, ())) == 1:
                failures[current].append(field)
            continue
        result = _RESULT.match(line)
        if result:
            kind, name, seconds = result.groups()
            parsed.tests[name] = TestResult(name, kind, float(seconds))
    for name, test in parsed.tests.items():
        test.features = features.get(name, ())
        failure = failures.get(name)
        test.reason = _joined(failure) if failure else reasons.get(name, "")
        if test.result == "PASS":
            test.reason = ""  # skipped in one run of the log, then run (and passed) in another
        if test.result == "FAIL" and not test.reason:
            # A failure by t.Fatalf (not testify's Error:) is the last line the test logged.
            said = [
                line.strip()
                for line in logged_by(text, name, last=20)
                if line.strip() and not _HEADER.match(line) and not _ANY_RESULT.match(line)
            ]
            test.reason = said[-1] if said else ""
    if not parsed.tests:
        parsed.setup_error = _joined(setup_errors) or _last_lines(text)
    return parsed


def logged_by(text: str, name: str, last: int = 60) -> list[str]:
    """The last ``last`` lines the suite logged for test ``name`` and its subtests (go test -v
    interleaves parallel tests: a line belongs to the test of the header before it)."""
    prefix = f"TestConformance/{name}"
    mine: list[str] = []
    current = ""
    for line in text.splitlines():
        header = _HEADER.match(line) or _ANY_RESULT.match(line)
        if header:
            current = header.group(1)
        if current == prefix or current.startswith(prefix + "/"):
            mine.append(line)
    return mine[-last:]


def _joined(fields: list[list[str]]) -> str:
    return " / ".join(" ".join(part for part in field if part) for field in fields)


def _last_lines(text: str, count: int = 3) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return " / ".join(lines[-count:]) if lines else "the suite wrote nothing"


@dataclass(frozen=True)
class Claim:
    name: str
    features: tuple[str, ...]


def parse_claimed(text: str) -> list[Claim]:
    """``NAME [FEATURE,FEATURE]`` lines; ``#`` starts a comment."""
    claims: list[Claim] = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        name, _, rest = line.partition(" ")
        claims.append(Claim(name, tuple(f for f in rest.strip().split(",") if f)))
    return claims


def extended_features(claims: Iterable[Claim]) -> list[str]:
    """The features besides GATEWAY-HTTP's core the claimed tests rely on, in the order of
    :data:`SERVED_FEATURES` (GATEWAY-HTTP's extended ones, then GATEWAY-TLS's TLSRoute)."""
    wanted = {f for claim in claims for f in claim.features}
    return [f for f in SERVED_FEATURES if f in wanted and f not in CORE_FEATURES]


def is_core(test: TestResult) -> bool:
    """Whether the test is a core test of a profile (all its features core features of it)."""
    return bool(test.features) and any(
        set(test.features) <= set(core) for core, _ in PROFILES.values()
    )


@dataclass(frozen=True)
class Verdict:
    """What a run says about interlock's claims."""

    failed_claims: list[str]
    new_passes: list[str]


def judge(suite: SuiteLog, claims: Iterable[Claim]) -> Verdict:
    claimed = {claim.name for claim in claims}
    failed = sorted(
        name
        for name in claimed
        if suite.tests.get(name, TestResult(name, "MISSING")).result != "PASS"
    )
    new = sorted(n for n, t in suite.tests.items() if t.result == "PASS" and n not in claimed)
    return Verdict(failed, new)


def summary_markdown(
    suite: SuiteLog,
    report: dict[str, Any] | None,
    claims: list[Claim],
    *,
    seconds: int,
    mode: str,
) -> str:
    """The run in a page: set-up, core and extended counts, per extended feature, every test
    that did not pass with its reason, and the claims."""
    ran = [t for t in suite.tests.values() if not t.reason.startswith("suite does not support")]
    core = [t for t in ran if is_core(t)]
    extended = [t for t in ran if t.features and not is_core(t)]
    passed = [t for t in suite.tests.values() if t.result == "PASS"]
    verdict = judge(suite, claims)
    lines = [
        f"# Gateway API conformance (v1.6.1, GATEWAY-HTTP and GATEWAY-TLS): {mode} run",
        "",
        f"Suite time: {seconds} s. Reproduce: `sudo hack/conformance/run.sh {mode}`"
        + (" (`sudo make conformance`)" if mode == "full" else "")
        + "; how it runs: docs/conformance/README.md.",
        "",
    ]
    if suite.setup_error:
        lines += [
            "**The suite's set-up failed; no test ran.** Its error:",
            "",
            f"    {suite.setup_error}",
            "",
        ]
    lines += [
        f"- Core: {sum(t.result == 'PASS' for t in core)} of {len(core)} run passed",
        f"- Extended: {sum(t.result == 'PASS' for t in extended)} of {len(extended)} run passed",
        f"- All tests passed: {len(passed)}",
        f"- Claimed (docs/conformance/claimed-tests.txt): {len(claims)}; "
        f"failed: {', '.join(verdict.failed_claims) or 'none'}",
        f"- Passed but not claimed: {', '.join(verdict.new_passes) or 'none'}",
        "",
    ]
    if report is not None:
        lines += [
            "## What the suite's own report says",
            "",
            "The suite counts a test by what `t.Run` returned, which for a parallel test (most"
            " of them) is before it ran: a parallel test that fails is counted passed here."
            " The counts at the top come from the suite's log, test by test, and so do those"
            " of the committed report (docs/conformance/README.md, Reading the report).",
            "",
        ]
        for profile in report.get("profiles") or []:
            lines.append(f"- {profile.get('name')}: {profile.get('summary', '')}")
            for level in ("core", "extended"):
                status = profile.get(level) or {}
                stats = status.get("statistics") or {}
                if stats:
                    lines.append(
                        f"  - {level}: {status.get('result')}: {stats.get('Passed', 0)} passed, "
                        f"{stats.get('Failed', 0)} failed, {stats.get('Skipped', 0)} skipped"
                    )
        lines.append("")
    by_feature: dict[str, list[TestResult]] = {}
    for test in extended:
        for feature in test.features:
            if feature not in CORE_FEATURES and feature not in TLS_CORE_FEATURES:
                by_feature.setdefault(feature, []).append(test)
    if by_feature:
        lines += ["## Extended features", "", "| feature | passed | run |", "|---|---|---|"]
        for feature in sorted(
            by_feature,
            key=lambda f: (
                EXTENDED_FEATURES.index(f) if f in EXTENDED_FEATURES else len(EXTENDED_FEATURES)
            ),
        ):
            tests = by_feature[feature]
            lines.append(f"| {feature} | {sum(t.result == 'PASS' for t in tests)} | {len(tests)} |")
        lines.append("")
    not_passed = sorted((t for t in ran if t.result != "PASS"), key=lambda t: t.name)
    if not_passed:
        lines += [
            "## Tests that did not pass",
            "",
            "| test | result | features | reason |",
            "|---|---|---|---|",
        ]
        for test in not_passed:
            reason = test.reason.replace("|", "\\|")[:200]
            lines.append(f"| {test.name} | {test.result} | {','.join(test.features)} | {reason} |")
        lines.append("")
    return "\n".join(lines)


def _status(tests: list[TestResult]) -> dict[str, Any]:
    failed = sorted(t.name for t in tests if t.result == "FAIL")
    skipped = sorted(t.name for t in tests if t.result == "SKIP")
    result = "failure" if failed else "partial" if skipped else "success"
    status: dict[str, Any] = {
        "result": result,
        "statistics": {
            "Failed": len(failed),
            "Passed": sum(t.result == "PASS" for t in tests),
            "Skipped": len(skipped),
        },
    }
    if failed:
        status["failedTests"] = failed
    if skipped:
        status["skippedTests"] = skipped
    return status


def _status_summary(status: dict[str, Any]) -> str:
    # The suite's own wording (conformance/utils/suite/reports.go, buildReportSummary).
    if status["result"] == "failure":
        return f"failed with {status['statistics']['Failed']} test failures"
    if status["result"] == "partial":
        return f"partially succeeded with {status['statistics']['Skipped']} test skips"
    return "succeeded"


def corrected_report(report: dict[str, Any], suite: SuiteLog) -> dict[str, Any]:
    """The suite's report with each profile's counts and test lists (:data:`PROFILES`) taken
    from its log (see docs/conformance/README.md, "Reading the report", for why the suite's own
    are wrong for parallel tests); everything else as the suite wrote it."""
    corrected = dict(report)
    profiles = []
    for profile in report.get("profiles") or []:
        features = PROFILES.get(str(profile.get("name")))
        if features is None:
            profiles.append(profile)
            continue
        core_features, extended_features = set(features[0]), set(features[1])
        ran = [
            t
            for t in suite.tests.values()
            if t.features
            and set(t.features) <= core_features | extended_features
            and not t.reason.startswith("suite does not support")
        ]
        core = [t for t in ran if set(t.features) <= core_features]
        extended = [t for t in ran if not set(t.features) <= core_features]
        fixed = dict(profile)
        fixed["core"] = _status(core)
        summary = f"Core tests {_status_summary(fixed['core'])}"
        if extended or profile.get("extended"):
            listed = {
                key: value
                for key, value in (profile.get("extended") or {}).items()
                if key in ("supportedFeatures", "unsupportedFeatures")
            }
            fixed["extended"] = {**_status(extended), **listed}
            summary += f". Extended tests {_status_summary(fixed['extended'])}"
        fixed["summary"] = summary + "."
        profiles.append(fixed)
    corrected["profiles"] = profiles
    return corrected


def claimed_lines(suite: SuiteLog) -> str:
    """``claimed-tests.txt`` lines for every test that passed (what a full run would claim)."""
    return "".join(
        f"{t.name} {','.join(t.features)}\n"
        for t in sorted(suite.tests.values(), key=lambda t: t.name)
        if t.result == "PASS"
    )


def _load(args: argparse.Namespace) -> tuple[SuiteLog, dict[str, Any] | None, list[Claim]]:
    log_path = Path(args.suite_log)
    suite = parse_suite_log(log_path.read_text(errors="replace") if log_path.exists() else "")
    report_path = Path(args.report)
    report = yaml.safe_load(report_path.read_text()) if report_path.exists() else None
    claimed_path = Path(args.claimed)
    claims = parse_claimed(claimed_path.read_text()) if claimed_path.exists() else []
    return suite, report, claims


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("summary", "check"):
        one = sub.add_parser(name)
        one.add_argument("--suite-log", required=True)
        one.add_argument("--report", required=True)
        one.add_argument("--claimed", required=True)
        one.add_argument("--out", required=True)
        one.add_argument("--passed", help="where to write the passed tests as claim lines")
        one.add_argument("--seconds", type=int, default=0)
        one.add_argument("--mode", default="full")
    correct = sub.add_parser("correct")
    correct.add_argument("--suite-log", required=True)
    correct.add_argument("--report", required=True)
    correct.add_argument("--out", required=True)
    correct.add_argument("--header", default="", help="comment lines written above the YAML")
    features = sub.add_parser("features")
    choice = features.add_mutually_exclusive_group(required=True)
    choice.add_argument("--claimed", help="the core features and those the claimed tests need")
    choice.add_argument("--all", action="store_true", help="every feature of the profile")
    args = parser.parse_args(argv)

    if args.command == "features":
        if args.all:
            print(",".join(SERVED_FEATURES))
            return 0
        path = Path(args.claimed)
        claims = parse_claimed(path.read_text()) if path.exists() else []
        print(",".join(CORE_FEATURES + tuple(extended_features(claims))))
        return 0
    if args.command == "correct":
        suite = parse_suite_log(Path(args.suite_log).read_text(errors="replace"))
        raw = yaml.safe_load(Path(args.report).read_text())
        header = "".join(f"# {line}\n" for line in args.header.splitlines())
        body = yaml.safe_dump(corrected_report(raw, suite), sort_keys=False)
        Path(args.out).write_text(header + body)
        return 0
    suite, report, claims = _load(args)
    text = summary_markdown(suite, report, claims, seconds=args.seconds, mode=args.mode)
    Path(args.out).write_text(text)
    if args.passed:
        Path(args.passed).write_text(claimed_lines(suite))
    print(text)
    verdict = judge(suite, claims)
    if verdict.new_passes:
        print(f"conformance: passed but not claimed: {', '.join(verdict.new_passes)}")
    if args.command == "check" and verdict.failed_claims:
        # What the suite logged for each, so the CI output alone tells why (its logs directory
        # does not outlive the run there).
        log_path = Path(args.suite_log)
        log_text = log_path.read_text(errors="replace") if log_path.exists() else ""
        for name in verdict.failed_claims:
            print(f"conformance: the suite's log of {name} (its last 60 lines):")
            print("\n".join(logged_by(log_text, name)))
        print(
            f"conformance: claimed tests that did not pass: {', '.join(verdict.failed_claims)}",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
