"""Prometheus's text exposition of metric families, and the process and Python families.

``/metrics`` (:mod:`interlock.api.metrics`) builds its families from ``statistics()`` snapshots
at each scrape, so all it needs from a Prometheus library is three family types and their text
format. prometheus-client brought them with its metric objects, its registry, its HTTP, WSGI and
push-gateway servers and their imports (``wsgiref``, ``http.server``, ``gzip``, ``timeit``,
``mmap``): 31 modules and 0.7 MiB of RSS in every controller (issue 29 item 5,
``benchmarks/rest_memory.py``). These few classes write the same text prometheus-client's
``generate_latest`` writes for the same families, byte for byte (``tests/api/test_exposition.py``
compares them; prometheus-client stays a test dependency, for that and for its parser), and
:func:`process_families` and :func:`python_families` give the ``process_*``, ``python_info`` and
``python_gc_*`` families its default collectors gave, with the same names, help and labels.
"""

from __future__ import annotations

import gc
import math
import os
import platform
from collections.abc import Callable, Iterable, Iterator, Sequence

CONTENT_TYPE = "text/plain; version=1.0.0; charset=utf-8"
"""The ``Content-Type`` of the exposition (prometheus-client's ``CONTENT_TYPE_LATEST``)."""

Sample = tuple[str, tuple[tuple[str, str], ...], float]
"""A sample: its name, its labels (name, value) and its value."""


class MetricFamily:
    """A metric family and its samples, written by :func:`exposition`."""

    kind = "untyped"

    def __init__(self, name: str, documentation: str, labels: Sequence[str] = ()) -> None:
        self.name = name
        self.documentation = documentation
        self.labels = tuple(labels)
        self.samples: list[Sample] = []

    def _sample(
        self, suffix: str, values: Sequence[str], value: float, le: str | None = None
    ) -> None:
        pairs = tuple(zip(self.labels, values, strict=True))
        self.samples.append((self.name + suffix, (*pairs, ("le", le)) if le else pairs, value))


class GaugeMetricFamily(MetricFamily):
    """A value that goes up and down, per label values."""

    kind = "gauge"

    def add_metric(self, values: Sequence[str], value: float) -> None:
        self._sample("", values, value)


class CounterMetricFamily(MetricFamily):
    """A value that only goes up, per label values; its samples are ``<name>_total``."""

    kind = "counter"

    def __init__(self, name: str, documentation: str, labels: Sequence[str] = ()) -> None:
        super().__init__(name.removesuffix("_total"), documentation, labels)

    def add_metric(self, values: Sequence[str], value: float) -> None:
        self._sample("_total", values, value)


class HistogramMetricFamily(MetricFamily):
    """Cumulative buckets (``le`` → count, ``+Inf`` last), their count and sum, per label
    values."""

    kind = "histogram"

    def add_metric(
        self, values: Sequence[str], buckets: Sequence[tuple[str, float]], sum_value: float
    ) -> None:
        for bound, count in buckets:
            self._sample("_bucket", values, count, le=bound)
        self._sample("_count", values, buckets[-1][1])
        self._sample("_sum", values, sum_value)


def _number(value: float) -> str:
    """A value as Go writes it (prometheus-client's ``floatToGoString``)."""
    value = float(value)
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    text = repr(value)
    dot = text.find(".")
    if value > 0 and dot > 6:  # Go switches to an exponent sooner than Python
        mantissa = f"{text[0]}.{text[1:dot]}{text[dot + 1 :]}".rstrip("0.")
        return f"{mantissa}e+{dot - 1:02d}"
    return text


def _escape(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def exposition(families: Iterable[MetricFamily]) -> bytes:
    """The families in Prometheus's text format, in order; labels sorted by name."""
    lines: list[str] = []
    for family in families:
        name = family.name + "_total" if family.kind == "counter" else family.name
        help_text = family.documentation.replace("\\", r"\\").replace("\n", r"\n")
        lines.append(f"# HELP {name} {help_text}\n# TYPE {name} {family.kind}\n")
        for sample, labels, value in family.samples:
            pairs = ",".join(f'{key}="{_escape(text)}"' for key, text in sorted(labels))
            lines.append(f"{sample}{{{pairs}}} " if pairs else f"{sample} ")
            lines.append(f"{_number(value)}\n")
    return "".join(lines).encode()


def gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    """A gauge family with one sample and no labels."""
    family = GaugeMetricFamily(name, documentation)
    family.add_metric([], value)
    return family


def python_families() -> list[MetricFamily]:
    """``python_info`` and, on CPython, the garbage collector's ``python_gc_*`` counters per
    generation."""
    major, minor, patchlevel = platform.python_version_tuple()
    info = GaugeMetricFamily(
        "python_info",
        "Python platform information",
        ["version", "implementation", "major", "minor", "patchlevel"],
    )
    info.add_metric(
        [platform.python_version(), platform.python_implementation(), major, minor, patchlevel], 1
    )
    if platform.python_implementation() != "CPython":
        return [info]
    collected = CounterMetricFamily(
        "python_gc_objects_collected", "Objects collected during gc", ["generation"]
    )
    uncollectable = CounterMetricFamily(
        "python_gc_objects_uncollectable", "Uncollectable objects found during GC", ["generation"]
    )
    collections = CounterMetricFamily(
        "python_gc_collections", "Number of times this generation was collected", ["generation"]
    )
    for generation, stats in enumerate(gc.get_stats()):
        collected.add_metric([str(generation)], stats["collected"])
        uncollectable.add_metric([str(generation)], stats["uncollectable"])
        collections.add_metric([str(generation)], stats["collections"])
    return [info, collected, uncollectable, collections]


class ProcessFamilies:
    """The ``process_*`` families from ``/proc`` (none where there is no ``/proc``)."""

    def __init__(self, proc: str = "/proc") -> None:
        self._proc = proc
        self._ticks = float(os.sysconf("SC_CLK_TCK"))
        self._page = os.sysconf("SC_PAGE_SIZE")
        try:
            self._boot = _boot_time(proc)
        except OSError:
            self._boot = 0.0

    def __call__(self) -> list[MetricFamily]:
        if not self._boot:
            return []
        own = os.path.join(self._proc, "self")
        families: list[MetricFamily] = []
        try:
            with open(os.path.join(own, "stat"), "rb") as stat:
                parts = stat.read().split(b")")[-1].split()
            cpu = CounterMetricFamily(
                "process_cpu_seconds_total", "Total user and system CPU time spent in seconds."
            )
            cpu.add_metric([], (float(parts[11]) + float(parts[12])) / self._ticks)
            families += [
                gauge(
                    "process_virtual_memory_bytes",
                    "Virtual memory size in bytes.",
                    float(parts[20]),
                ),
                gauge(
                    "process_resident_memory_bytes",
                    "Resident memory size in bytes.",
                    float(parts[21]) * self._page,
                ),
                gauge(
                    "process_start_time_seconds",
                    "Start time of the process since unix epoch in seconds.",
                    float(parts[19]) / self._ticks + self._boot,
                ),
                cpu,
            ]
        except OSError:
            pass
        try:
            open_fds = len(os.listdir(os.path.join(own, "fd")))
            with open(os.path.join(own, "limits"), "rb") as limits:
                most = next(line for line in limits if line.startswith(b"Max open file"))
            families += [
                gauge("process_open_fds", "Number of open file descriptors.", open_fds),
                gauge(
                    "process_max_fds",
                    "Maximum number of open file descriptors.",
                    float(most.split()[3]),
                ),
            ]
        except (OSError, StopIteration):
            pass
        return families


def _boot_time(proc: str) -> float:
    with open(os.path.join(proc, "stat"), "rb") as stat:
        for line in stat:
            if line.startswith(b"btime "):
                return float(line.split()[1])
    return 0.0


FamilySource = Callable[[], Iterable[MetricFamily]]
"""What :class:`Registry` asks at each scrape for its families."""


class Registry:
    """The family sources of one ``/metrics``, in the order they are written."""

    def __init__(self, sources: Sequence[FamilySource] = ()) -> None:
        self.sources = list(sources)

    def collect(self) -> Iterator[MetricFamily]:
        for source in self.sources:
            yield from source()

    def exposition(self) -> bytes:
        """Every family now, in Prometheus's text format."""
        return exposition(self.collect())
