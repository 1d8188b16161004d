"""A new user's first commands: what they print must be true and say what to do next."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memmw.cli.common import EXIT_DEGRADED, EXIT_ERROR, EXIT_NOTHING, EXIT_OK
from memmw.embeddings.registry import register_provider, unregister_provider
from memmw.errors import ProviderError
from memmw.testing import FakeEmbeddingProvider
from memmw.workspace.reads import read_window

from .test_cli import make_workspace, run


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return make_workspace(tmp_path / "ws")


# -- memmw mcp without the extra ------------------------------------------------------------
def test_mcp_without_the_extra_prints_the_install_hint(
    ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in list(sys.modules):
        if name.split(".")[0] in ("mcp", "anyio"):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "mcp", None)  # import mcp -> ImportError
    monkeypatch.setitem(sys.modules, "anyio", None)
    code, _out, err = run(capsys, "-w", str(ws), "--state-dir", str(tmp_path / "st"), "mcp")
    assert code == EXIT_ERROR, err
    assert "memmw[mcp]" in err and "internal error" not in err and "anyio" not in err


# -- memmw get past the end ---------------------------------------------------------------------
def test_get_from_past_the_end_says_how_many_lines_and_fails(
    ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ("-w", str(ws), "--state-dir", str(tmp_path / "st"))
    code, out, err = run(capsys, *base, "get", "USER.md", "--from", "50")
    assert code == EXIT_ERROR
    assert out == ""
    assert "USER.md has 3 lines" in err and "--from 50" in err
    code, out, _ = run(capsys, *base, "get", "USER.md", "--from", "3")
    assert code == EXIT_OK and out == "- Prefers short answers.\n"
    code, out, _ = run(capsys, *base, "get", "USER.md", "--from", "4", "--json")
    payload = json.loads(out)
    assert code == EXIT_ERROR and payload["pastEnd"] is True and payload["totalLines"] == 3


@settings(max_examples=200, deadline=None)
@given(
    lines=st.lists(st.text(st.characters(exclude_characters="\r\n"), max_size=8), max_size=12),
    from_line=st.integers(min_value=1, max_value=20),
    want=st.one_of(st.none(), st.integers(min_value=1, max_value=20)),
)
def test_a_window_is_empty_exactly_when_it_starts_past_the_end(
    lines: list[str], from_line: int, want: int | None
) -> None:
    text = "".join(f"{line}\n" for line in lines)
    result = read_window("MEMORY.md", text, from_line, want, max_lines=120, max_chars=12000)
    assert result.total_lines == len(lines)
    assert result.past_end == (from_line > max(len(lines), 1))
    assert (result.lines == 0) == (result.past_end or not lines)
    assert ("pastEnd" in result.to_payload()) == result.past_end


# -- memmw index with nothing to index ----------------------------------------------------------
@pytest.mark.parametrize("layout", ["no-files", "empty-files"])
def test_index_with_nothing_to_index_says_what_it_looked_for(
    layout: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    if layout == "empty-files":
        (ws / "MEMORY.md").write_text("", encoding="utf-8")
    base = ("-w", str(ws), "--state-dir", str(tmp_path / "st"))
    code, _out, err = run(capsys, *base, "index")
    assert code == EXIT_NOTHING, err
    assert "nothing to index" in err and "MEMORY.md, USER.md and memory/**/*.md" in err
    assert ("all empty" in err) == (layout == "empty-files")
    code, out, _ = run(capsys, *base, "index", "--json")
    assert code == EXIT_NOTHING and "nothing to index" in json.loads(out)["nothingToIndex"]
    (ws / "memory" / "2026-01-02.md").write_text("A first note.\n", encoding="utf-8")
    code, out, _ = run(capsys, *base, "index", "--json")
    assert code == EXIT_OK and json.loads(out)["nothingToIndex"] is None


# -- memmw index: progress when piped, cache hits, last sync --------------------------------------
def _big_workspace(root: Path, notes: int = 40) -> Path:
    ws = make_workspace(root)
    for i in range(notes):
        (ws / "memory" / f"2025-03-{i % 28 + 1:02d}-n{i}.md").write_text(
            f"# Note {i}\n- The build server number {i} runs the nightly job {i * 7}.\n",
            encoding="utf-8",
        )
    return ws


def test_piped_index_prints_plain_progress_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMMW__PROVIDER", "fake")
    ws = _big_workspace(tmp_path / "ws")
    code, _out, err = run(capsys, "-w", str(ws), "--state-dir", str(tmp_path / "st"), "index")
    assert code == EXIT_OK, err
    files = [line for line in err.splitlines() if line.startswith("Indexing files: ")]
    embeds = [line for line in err.splitlines() if line.startswith("Embedding: ")]
    assert files and files[-1].endswith("(100%)"), err
    assert embeds and embeds[-1].endswith("(100%)"), err
    assert len(files) <= 5 and len(embeds) <= 5  # a line per quarter, not per file
    code, _out, err = run(capsys, "-q", "-w", str(ws), "--state-dir", str(tmp_path / "st"),
                          "index", "--force")
    assert code == EXIT_OK and err == ""


def test_index_counts_vectors_served_from_the_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMMW__PROVIDER", "fake")
    ws = _big_workspace(tmp_path / "ws", notes=3)
    base = ("-w", str(ws), "--state-dir", str(tmp_path / "st"))
    code, out, _ = run(capsys, *base, "index", "--json")
    first = json.loads(out)
    total = first["sync"]["chunksTotal"]
    assert code == EXIT_OK and first["embedded"] == total and first["fromCache"] == 0
    # A forced rebuild re-embeds nothing: every vector comes from the cache ...
    code, _out, err = run(capsys, *base, "index", "--force")
    assert code == EXIT_OK
    assert f"Embedding {total} pending chunks" in err
    assert f"Vectors for {total} chunks: 0 embedded with fake" in err
    assert f"{total} from the embedding cache" in err
    # ... and one new note is the one chunk embedded.
    (ws / "memory" / "2026-02-01.md").write_text("A brand new fact.\n", encoding="utf-8")
    code, out, _ = run(capsys, *base, "index", "--force", "--json")
    data = json.loads(out)
    assert (data["embedded"], data["fromCache"]) == (1, total)


def test_last_sync_is_the_end_of_the_embedding_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    from memmw import Memory

    monkeypatch.setenv("MEMMW__PROVIDER", "fake")
    ws = make_workspace(tmp_path / "ws")
    with Memory(workspace=ws, state_dir=tmp_path / "st") as mem:
        mem.sync(embeddings="skip")
        long_ago = time.time() - 600  # the file pass ended ten minutes before embedding did
        with mem.store.write(what="test") as writer, writer.transaction():
            writer.set_meta("last_sync", repr(long_ago))
        before = time.time()
        report = mem.embed_pending()
        assert report is not None and report.embedded > 0
        last = mem.status().last_sync
        assert last is not None and last >= before


# -- search and status agree when the provider is down ------------------------------------------
class _Down(FakeEmbeddingProvider):
    def __init__(self) -> None:
        super().__init__(dims=16, model="down-v1")
        self.id = "down"

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        raise ProviderError("connection refused")

    def embed_query(self, text: str) -> list[float]:
        raise ProviderError("connection refused")


@pytest.fixture
def down_provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    register_provider("down", lambda config: _Down())
    monkeypatch.setenv("MEMMW__PROVIDER", "down")
    yield
    unregister_provider("down")


@pytest.mark.usefixtures("down_provider")
def test_search_and_status_agree_when_the_provider_is_down(
    ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ("-w", str(ws), "--state-dir", str(tmp_path / "st"), "--log-level", "error")
    code, _out, err = run(capsys, *base, "index")
    assert code == EXIT_DEGRADED, err
    code, out, _ = run(capsys, *base, "status")
    assert code == EXIT_DEGRADED and "connection refused" in out
    assert "Up to date  no (" in out
    code, out, err = run(capsys, *base, "search", "gateway")
    assert code == EXIT_DEGRADED and "8443" in out
    assert "connection refused" in err and "not ready yet" not in err
    # Vectors that are only not built yet (--no-embed) are a note, not a failure.
    code, _out, _err = run(capsys, "-w", str(ws), "--state-dir", str(tmp_path / "st2"),
                           "index", "--no-embed")
    code, _out, err = run(capsys, "-w", str(ws), "--state-dir", str(tmp_path / "st2"),
                          "search", "gateway")
    assert code == EXIT_OK and "have no down vector yet" in err
