"""``/metrics`` without prometheus-client (issue 29 item 5): interlock's exposition writes what
prometheus-client's ``generate_latest`` writes for the same families, byte for byte, and the
``process_*``, ``python_info`` and ``python_gc_*`` families its default collectors wrote, under
the same names, help, types and labels.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import prometheus_client
from prometheus_client import core
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from interlock.api import exposition as ours

LABEL_VALUES = ["plain", 'with "quotes"', "back\\slash", "new\nline", "ünï", ""]
VALUES = [0, 1, 2.5, -3, 1e-05, 123456.0, 1234567.0, 1e21, math.inf, -math.inf, math.nan]


def _families(module: object) -> list[object]:
    """The same families built with ``module``'s classes (prometheus-client's or ours)."""
    counter = module.CounterMetricFamily(  # type: ignore[attr-defined]
        "x_requests_total", "Requests.\nSecond line with a \\ backslash.", labels=["code", "a"]
    )
    gauge = module.GaugeMetricFamily("x_depth", "Depth.", labels=["kind"])  # type: ignore[attr-defined]
    bare = module.GaugeMetricFamily("x_ready", "Ready.")  # type: ignore[attr-defined]
    histogram = module.HistogramMetricFamily(  # type: ignore[attr-defined]
        "x_seconds", "Seconds.", labels=["verb"]
    )
    for number, (label, value) in enumerate(zip(LABEL_VALUES * 2, VALUES, strict=False)):
        counter.add_metric([label, str(number)], value)
        gauge.add_metric([label], value)
    bare.add_metric([], 1)
    buckets = [("0.005", 1.0), ("0.1", 4.0), ("2.5", 9.0), ("+Inf", 10.0)]
    histogram.add_metric(["list"], buckets, 3.25)
    histogram.add_metric(['we"ird'], [("1.0", 0.0), ("+Inf", 0.0)], 0.0)
    empty = module.CounterMetricFamily("x_none", "No samples.", labels=["kind"])  # type: ignore[attr-defined]
    return [counter, gauge, bare, histogram, empty]


class _Families:
    def __init__(self, families: list[object]) -> None:
        self.families = families

    def collect(self) -> list[object]:
        return self.families


def test_the_exposition_is_prometheus_clients_byte_for_byte() -> None:
    theirs = prometheus_client.generate_latest(_Families(_families(core)))  # type: ignore[arg-type]
    assert ours.exposition(_families(ours)) == theirs  # type: ignore[arg-type]
    assert ours.CONTENT_TYPE == prometheus_client.CONTENT_TYPE_LATEST


def _shape(text: str) -> list[tuple[str, ...]]:
    """Each family's name, type, help and label names, and each sample's name and labels."""
    shape: list[tuple[str, ...]] = []
    for line in text.splitlines():
        if line.startswith("#"):
            shape.append(tuple(line.split(" ", 3)))
        else:
            name, _, labels = line.rpartition(" ")[0].partition("{")
            shape.append((name, *sorted(pair.split("=")[0] for pair in labels.split(",") if pair)))
    return shape


def test_the_process_and_python_families_are_those_of_prometheus_clients_collectors() -> None:
    # In a fresh interpreter that imports no thread: the values move (CPU, GC counts, open
    # files) between two reads, so the values compared are the ones that do not.
    code = """
import json, sys
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from interlock.api import exposition
registry = CollectorRegistry()
PlatformCollector(registry=registry)
GCCollector(registry=registry)
ProcessCollector(registry=registry)
theirs = generate_latest(registry).decode()
ours = exposition.exposition([*exposition.python_families(), *exposition.ProcessFamilies()()])
print(json.dumps([theirs, ours.decode()]))
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    theirs, ours_text = json.loads(out.stdout)
    assert _shape(ours_text) == _shape(theirs)
    steady = ("python_info", "process_max_fds", "process_start_time_seconds")
    assert [line for line in ours_text.splitlines() if line.startswith(steady)] == [
        line for line in theirs.splitlines() if line.startswith(steady)
    ]
    assert len(_shape(theirs)) > 20  # python_info, 3 gc families x 3 generations, 6 process


def test_prometheus_clients_collectors_are_still_what_the_shape_test_compares() -> None:
    # The collectors above are prometheus-client's defaults; a release that renames one would
    # make the comparison above vacuous, so check they still register what they did.
    registry = prometheus_client.CollectorRegistry()
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    ProcessCollector(registry=registry)
    names = {family.name for family in registry.collect()}
    assert {"python_info", "python_gc_collections", "process_cpu_seconds"} <= names
