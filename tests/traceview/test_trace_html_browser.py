"""The HTML trace in a real browser (headless Chromium): its structure as Chromium's DOM has it
(index → sections → diagrams, effect labels, participants, legend) and the diagrams' ink."""

from __future__ import annotations

import asyncio
import re
import shutil
import struct
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest

from interlock.traceview import load_trace, select
from interlock.traceview.diagram import render_html
from interlock.traceview.select import without_internal

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _png_pixels(data: bytes) -> tuple[int, int, int, bytes]:
    """Decode an 8-bit RGB/RGBA PNG (what Chromium writes) to raw rows, undoing the filters."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6)
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
    raw = zlib.decompress(idat)
    stride = width * channels
    out = bytearray()
    previous = bytearray(stride)
    for row in range(height):
        start = row * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            upleft = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - upleft
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - upleft)
                pred = left if pa <= pb and pa <= pc else up if pb <= pc else upleft
                line[i] = (line[i] + pred) & 0xFF
        out += line
        previous = line
    return width, height, channels, bytes(out)


def _dark_pixels(png: bytes) -> int:
    width, height, channels, pixels = _png_pixels(png)
    return sum(
        1
        for i in range(0, width * height * channels, channels)
        if pixels[i] < 128 and pixels[i + 1] < 128 and pixels[i + 2] < 128
    )


async def _chromium(page: Path, profile: Path, *flags: str) -> bytes:
    """Run headless Chromium on ``page`` with ``flags``; its standard output."""
    assert CHROMIUM is not None
    proc = await asyncio.create_subprocess_exec(
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        *flags,
        page.as_uri(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), timeout=60)
    return out


async def _screenshot(page: Path, out: Path, profile: Path) -> bytes:
    await _chromium(page, profile, "--window-size=1400,900", f"--screenshot={out}")
    return out.read_bytes()


async def _dump_dom(page: Path, profile: Path) -> str:
    """The DOM Chromium built from the page (what a browser shows, not our string)."""
    return (await _chromium(page, profile, "--dump-dom")).decode()


class _Structure(HTMLParser):
    """What the page holds, from Chromium's DOM: index links, event sections, diagrams,
    participants' and arrows' texts, the legend."""

    def __init__(self) -> None:
        super().__init__()
        self.index_links: list[str] = []
        self.section_ids: list[str] = []
        self.diagrams = 0
        self.legend = False
        self.participants: list[str] = []
        self.labels: list[str] = []
        self.failed_arrows = 0
        self.order: list[str] = []
        self._in_index = False
        self._text: list[str] | None = None
        self._group = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        classes = (found.get("class") or "").split()
        if tag == "nav" and found.get("id") == "index":
            self._in_index = True
            self.order.append("index")
        elif tag == "a" and self._in_index and (found.get("href") or "").startswith("#event-"):
            self.index_links.append(str(found["href"])[1:])
        elif tag == "section" and "event" in classes:
            self.section_ids.append(str(found.get("id")))
            self.order.append("event")
        elif tag == "section" and found.get("id") == "legend":
            self.legend = True
        elif tag == "svg" and "sequence" in classes:
            self.diagrams += 1
        elif tag == "g" and "participant" in classes:
            self._group = "participant"
        elif tag == "g" and "message" in classes:
            self._group = "message"
            self.failed_arrows += "failed" in classes
        elif tag == "text":
            self._text = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "nav":
            self._in_index = False
        elif tag == "text" and self._text is not None:
            text = "".join(self._text)
            (self.participants if self._group == "participant" else self.labels).append(text)
            self._text = None

    def handle_data(self, data: str) -> None:
        if self._text is not None:
            self._text.append(data)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is installed by .ci/run")
async def test_html_trace_structure_in_chromium(tmp_path: Path, controller_trace: Path) -> None:
    page = tmp_path / "trace.html"
    page.write_text(render_html(without_internal(select(load_trace(controller_trace)))))
    structure = _Structure()
    structure.feed(await _dump_dom(page, tmp_path / "profile"))

    # An index of the external events first, each linking to its own section and diagram.
    assert structure.order[0] == "index" and structure.legend
    linked = list(dict.fromkeys(structure.index_links))
    assert linked == structure.section_ids == ["event-1", "event-2", "event-3"]
    assert structure.diagrams == 3
    # Arrows say what happened; participants keep their kind; start-up is hidden.
    assert "echo-v2 exists → false (" in " ".join(structure.labels)
    assert any(label.startswith("policy default/echo:80: ") for label in structure.labels)
    assert "route/…/default/echo-split" in structure.participants
    assert not [label for label in structure.labels if label.startswith("start")]
    assert structure.failed_arrows == 1


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is installed by .ci/run")
async def test_html_trace_draws_the_diagrams_in_chromium(tmp_path: Path, recorder) -> None:
    trace = tmp_path / "trace.jsonl"
    await recorder(trace)
    page = tmp_path / "trace.html"
    page.write_text(render_html(select(load_trace(trace))))
    # The same page with the diagrams removed is the baseline: the arrows and labels must add ink.
    blank = tmp_path / "blank.html"
    blank.write_text(re.sub(r'<div class="scroll">.*?</svg></div>', "", page.read_text()))
    with_diagram = _dark_pixels(await _screenshot(page, tmp_path / "a.png", tmp_path / "p1"))
    without = _dark_pixels(await _screenshot(blank, tmp_path / "b.png", tmp_path / "p2"))
    assert with_diagram > without + 500, (with_diagram, without)
