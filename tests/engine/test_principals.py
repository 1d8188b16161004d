"""engine/principals: what an operator sees of each principal, and deleting one."""

from __future__ import annotations

from pathlib import Path

from memmw import MemoryConfig
from memmw.engine.principals import delete_principal, list_principals
from memmw.workspace.transcripts import TranscriptStore
from tests.conftest import write

from ..conftest import make_memory


def test_transcripts_are_counted_without_their_lock_files(tmp_path: Path) -> None:
    """A transcript's ``.lock`` file is no transcript: counted and listed once, yet removed
    with the rest."""
    ws = tmp_path / "ws"
    write(ws / "MEMORY.md", "- owner note\n")
    write(ws / "memory" / "principals" / "alice" / "USER.md", "- likes tea\n")
    with make_memory(workspace=ws, state_dir=tmp_path / "st", config=MemoryConfig(provider="none")) as mem:
        store = TranscriptStore(mem.state_dir, mem.agent_id)
        store.dir.mkdir(parents=True, exist_ok=True)
        for name in ("s1=alice.jsonl", "s1=alice.jsonl.lock", "s2=alice.jsonl.1"):
            (store.dir / name).write_text("{}\n", encoding="utf-8")
        mem.sync()
        (alice,) = list_principals(mem)
        assert alice.principal == "alice" and alice.transcripts == 2
        plan = delete_principal(mem, "alice", dry_run=True)
        assert sorted(plan.transcripts) == ["s1=alice.jsonl", "s2=alice.jsonl.1"]
        done = delete_principal(mem, "alice")
        assert sorted(done.transcripts) == ["s1=alice.jsonl", "s2=alice.jsonl.1"]
        assert not [p for p in store.dir.iterdir() if "=alice" in p.name]
