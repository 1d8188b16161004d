"""The graph page: self-contained, drawn in real headless Chromium (screenshot), searchable, clickable."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path

import numpy as np
import pytest

from memmw import Memory
from memmw.graph.html import render_graph_html

from ..conftest import make_memory

HOT, WARM, COOL = (0xD7, 0x30, 0x1F), (0xFC, 0x8D, 0x59), (0x6B, 0xAE, 0xD6)
SIDEBAR_PX = 340


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail("Debian's chromium is required for this test: run scripts/install-test-deps.sh")
    return found


def run_chromium(*args: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [
                chromium(),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                f"--user-data-dir={profile}",
                "--window-size=1200,800",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )


def decode_png(data: bytes) -> np.ndarray:
    """RGB(A) pixels of an 8-bit non-interlaced PNG (what Chromium writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _c, _f, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and color in (2, 6) and interlace == 0
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    out = np.zeros((height, stride), dtype=np.int32)
    prev = np.zeros(stride, dtype=np.int32)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = np.frombuffer(raw, dtype=np.uint8, count=stride, offset=y * (stride + 1) + 1).astype(np.int32)
        if f == 0:
            cur = line
        elif f == 2:
            cur = (line + prev) & 0xFF
        else:
            cur = line.copy()
            for x in range(stride):
                a = cur[x - channels] if x >= channels else 0
                b = prev[x]
                c = prev[x - channels] if x >= channels else 0
                if f == 1:
                    pred = a
                elif f == 3:
                    pred = (a + b) // 2
                else:
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                cur[x] = (cur[x] + pred) & 0xFF
        out[y] = cur
        prev = cur
    return out.reshape(height, width, channels)[:, :, :3].astype(np.uint8)


def colour_pixels(img: np.ndarray, rgb: tuple[int, int, int]) -> int:
    diff = np.abs(img.astype(np.int32) - np.array(rgb)).sum(axis=2)
    return int((diff < 24).sum())


def test_page_is_self_contained_and_escapes_notes(mem: Memory, ws: Path) -> None:
    (ws / "memory" / "evil.md").write_text("## Eve </script><script>alert(1)</script>\n- k: <b>v</b>\n")
    mem.sync()
    page = render_graph_html(mem.graph_engine.graph(), workspace=ws)
    urls = set(re.findall(r"https?://[^\s\"'<>]+", page))
    assert urls == {"http://www.w3.org/2000/svg"}  # an XML namespace name, never fetched
    assert "<script>alert(1)" not in page and page.count("</script>") == 2
    assert "Content-Security-Policy" in page and "default-src 'none'" in page


@pytest.mark.slow
def test_chromium_draws_the_graph_with_activation_colours(mem: Memory, tmp_path: Path) -> None:
    for _ in range(4):
        mem.facts("Where does Alice live")  # Alice becomes hot
    page = mem.write_graph_html(tmp_path / "graph.html")
    shot = tmp_path / "shot.png"
    proc = run_chromium(f"--screenshot={shot}", page.as_uri())
    assert shot.exists(), proc.stderr[-2000:]
    img = decode_png(shot.read_bytes())
    assert img.shape[:2] == (800, 1200)
    canvas = img[:, SIDEBAR_PX:]
    assert colour_pixels(canvas, HOT) > 50, "the activated entity is drawn hot"
    assert colour_pixels(canvas, WARM) > 200, "other entities are drawn warm"
    assert len(np.unique(canvas.reshape(-1, 3), axis=0)) > 20, "the canvas is not blank"


@pytest.mark.slow
def test_chromium_search_and_click_through_to_citations(mem: Memory, tmp_path: Path) -> None:
    page = mem.write_graph_html(tmp_path / "graph.html")
    dom = run_chromium("--dump-dom", page.as_uri() + "#select=alice%20martin").stdout
    assert 'data-ready="1"' in dom
    details = dom[dom.index('id="details"') :]
    assert "Alice Martin" in details and "city = Lisbon" in details
    assert "memory/2026-05-01.md#L3</a>" in details
    assert re.search(r'href="file://[^"]*/memory/2026-05-01\.md#L3"', details)
    assert 'class="old"' in details  # the superseded Berlin value is shown as history
    dom = run_chromium("--dump-dom", page.as_uri() + "#q=bobby").stdout
    assert re.search(r">1 of \d+ entities match<", dom)
    assert dom.count('class="node hit"') == 1


def test_citation_links_escape_url_special_characters(tmp_path: Path) -> None:
    """Issue 20: a '#' (or '?', '%', a space) in a note's name broke the page's links."""
    from memmw import MemoryConfig
    from memmw.graph.html import citation_href, graph_data

    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "c#1 ?50%.md").write_text("## Dana Scully\n- city: Annapolis\n")
    with make_memory(workspace=ws, state_dir=tmp_path / "state", config=MemoryConfig(provider="none")) as mem:
        mem.sync()
        graph = mem.graph_engine.graph()
    data = graph_data(graph, workspace=ws)
    base = ws.resolve().as_uri() + "/"
    assert data["hrefs"]["memory/c#1 ?50%.md#L2"] == base + "memory/c%231%20%3F50%25.md#L2"
    assert citation_href("MEMORY.md#L3") == "MEMORY.md#L3"
    assert citation_href("memory/a#L1.md#L4") == "memory/a%23L1.md#L4"
    page = render_graph_html(graph, workspace=ws)
    assert "D.hrefs[c]" in page and "split('#L')" not in page
