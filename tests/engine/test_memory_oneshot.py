"""Memory for one-shot callers: close never waits out embedding; one index per workspace."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from memmw import Memory, MemoryConfig
from memmw.embeddings.registry import register_provider, unregister_provider
from memmw.errors import ConfigError
from memmw.statedir import default_state_dir, workspace_key
from memmw.testing import FakeEmbeddingProvider

from ..conftest import make_memory


def _ws(root: Path, text: str = "- The gateway runs on port 8443.\n") -> Path:
    (root / "memory").mkdir(parents=True)
    (root / "MEMORY.md").write_text(text, encoding="utf-8")
    return root


class _Blocking(FakeEmbeddingProvider):
    """Embeds only once ``release`` is set (a slow first embedding run)."""

    def __init__(self) -> None:
        super().__init__(dims=16, model="blocking-v1")
        self.id = "blocking"
        self.entered = threading.Event()
        self.release = threading.Event()

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.entered.set()
        self.release.wait(60)
        return super().embed_documents(texts)


@pytest.fixture
def blocking() -> Iterator[_Blocking]:
    provider = _Blocking()
    register_provider("blocking", lambda config: provider)
    yield provider
    provider.release.set()
    unregister_provider("blocking")


def test_close_does_not_wait_for_background_embedding(tmp_path: Path, blocking: _Blocking) -> None:
    ws = _ws(tmp_path / "ws")
    mem = make_memory(workspace=ws, state_dir=tmp_path / "st", config=MemoryConfig(provider="blocking"))
    mem.sync(embeddings="background")
    assert blocking.entered.wait(30)
    # The embedding call ends in 20 s; a close that waited for it would return after that.
    timer = threading.Timer(20, blocking.release.set)
    timer.start()
    mem.close()
    assert not blocking.release.is_set()  # close returned while the call was still running
    timer.cancel()
    blocking.release.set()
    with make_memory(
        workspace=ws, state_dir=tmp_path / "st", config=MemoryConfig(provider="none")
    ) as again:
        assert again.search("gateway")  # keyword search works; the index is intact


def test_default_state_dir_is_per_workspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEMMW_STATE_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    a, b = _ws(tmp_path / "a"), _ws(tmp_path / "same" / "a")
    assert workspace_key(a) != workspace_key(b)  # same folder name, different places
    assert workspace_key(a).startswith("a-")
    cfg = MemoryConfig(provider="none")
    with Memory(workspace=a, config=cfg) as ma, Memory(workspace=b, config=cfg) as mb:
        assert ma.state_dir == default_state_dir(a) != mb.state_dir
        assert ma.db_path != mb.db_path
        assert str(ma.state_dir).startswith(str(tmp_path / "xdg"))


def test_an_index_for_another_workspace_is_refused(tmp_path: Path) -> None:
    a = _ws(tmp_path / "a")
    b = _ws(tmp_path / "b", "- The beta cluster is named narwhal.\n")
    cfg = MemoryConfig(provider="none")
    with make_memory(workspace=a, state_dir=tmp_path / "st", config=cfg) as ma:
        ma.sync()
    with make_memory(workspace=b, state_dir=tmp_path / "st", config=cfg) as mb:
        with pytest.raises(ConfigError, match="was built for the workspace"):
            mb.sync()
        with pytest.raises(ConfigError, match="was built for the workspace"):
            mb.search("narwhal")
        mb.reset()  # the way out the message names
        mb.sync()
        assert mb.search("narwhal")
