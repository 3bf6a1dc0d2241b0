"""The HTML trace renders its sequence diagram in a real browser (headless Chromium)."""

from __future__ import annotations

import asyncio
import shutil
import struct
import zlib
from pathlib import Path

import pytest

from interlock.traceview import load_trace, select
from interlock.traceview.diagram import render_html

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


async def _screenshot(page: Path, out: Path, profile: Path) -> bytes:
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
        "--window-size=1400,900",
        f"--screenshot={out}",
        page.as_uri(),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    await asyncio.wait_for(proc.wait(), timeout=60)
    return out.read_bytes()


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is installed by .ci/run")
async def test_html_trace_draws_the_diagram_in_chromium(tmp_path: Path, recorder) -> None:
    trace = tmp_path / "trace.jsonl"
    await recorder(trace)
    page = tmp_path / "trace.html"
    page.write_text(render_html(select(load_trace(trace))))
    # The same page with the diagram removed is the baseline: the arrows and labels must add ink.
    blank = tmp_path / "blank.html"
    text = page.read_text()
    blank.write_text(text[: text.index("<svg")] + text[text.index("</svg>") + 6 :])
    with_diagram = _dark_pixels(await _screenshot(page, tmp_path / "a.png", tmp_path / "p1"))
    without = _dark_pixels(await _screenshot(blank, tmp_path / "b.png", tmp_path / "p2"))
    assert with_diagram > without + 500, (with_diagram, without)
