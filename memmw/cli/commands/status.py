"""``memmw status``: the index state as a readable table or one JSON object."""

from __future__ import annotations

import time
from typing import Any

import click

from memmw.cli.common import (
    EXIT_DEGRADED,
    EXIT_OK,
    camelize,
    command,
    emit_json,
    iso,
    out,
    settings,
    with_memory,
)
from memmw.engine.memory import Memory
from memmw.statedir import FLUSH_SESSIONS_KEY

HELP = """Show this workspace's index: last sync, files, vectors, provider, and what is
degraded and why.

Never waits for background work. --deep also probes the keyword backends and embeds one
test query with the provider.

\b
Examples:
  memmw status
  memmw status --deep
  memmw status --json     # one object; camelCase keys; lastSync in ISO 8601 UTC
  memmw status --principals   # plus one line per principal (memory/principals/<id>/)

Exit codes: 0 ok, 1 error, 4 something is degraded (listed under "Degraded").
"""


def assess(data: dict[str, Any]) -> tuple[list[dict[str, str]], list[str]]:
    """What is degraded (with why and what to do) and plain notes, from status data."""
    degraded: list[dict[str, str]] = []
    notes: list[str] = []
    embedding = data.get("embedding") or {}
    vector = data.get("vector") or {}
    if embedding.get("error"):
        degraded.append({
            "what": "embedding provider",
            "why": str(embedding["error"]),
            "fix": "fix the provider settings or keys, or set provider = 'none'",
        })
    if embedding.get("fallbackFrom"):
        degraded.append({
            "what": "embedding provider",
            "why": f"{embedding['fallbackFrom']} failed, using {embedding.get('provider')}: "
            f"{embedding.get('fallbackReason')}",
            "fix": f"check the {embedding['fallbackFrom']} provider (key, quota, network)",
        })
    probe = embedding.get("probe") or {}
    if probe and not probe.get("ok"):
        degraded.append({"what": "embedding probe", "why": str(probe.get("error")),
                         "fix": "run 'memmw doctor'"})
    if vector.get("lastError"):
        degraded.append({"what": "vectors", "why": str(vector["lastError"]),
                         "fix": "run 'memmw index' once the provider works"})
    if vector.get("backend") == "unavailable":
        degraded.append({"what": "vector backend", "why": str(vector.get("reason")),
                         "fix": "pip install 'memmw[vec]' or set store.vector_backend = 'auto'"})
    issues = (data.get("scan") or {}).get("issues") or []
    for issue in issues:
        missing_extra = issue.get("reason") == "extra path does not exist"
        if issue.get("line") is not None:
            degraded.append({
                "what": f"line {issue['line']} of {issue.get('path')} (skipped; the rest of "
                        "the file is indexed)",
                "why": str(issue.get("reason")),
                "fix": "fix or remove that line if it should be searchable",
            })
            continue
        degraded.append({
            "what": f"{'extra path' if missing_extra else 'file'} {issue.get('path')}",
            "why": str(issue.get("reason")),
            "fix": "create it or remove it from extra_paths, then 'memmw index'" if missing_extra
            else "fix or remove the file, then 'memmw index'",
        })
    watcher = data.get("watcher") or {}
    if watcher.get("state") in ("failed", "fallback"):
        degraded.append({"what": "file watcher", "why": str(watcher.get("error") or watcher),
                         "fix": "raise fs.inotify.max_user_watches (see 'memmw doctor')"})
    sync = data.get("sync") or {}
    if sync.get("lastError"):
        degraded.append({"what": "background sync", "why": str(sync["lastError"]),
                         "fix": "run 'memmw index' to see the error"})
    flush = data.get("flush") or {}
    if int(flush.get("unsavedEvictions") or 0):
        degraded.append({
            "what": "memory flush",
            "why": f"{flush['unsavedEvictions']} messages were compacted away unsaved after a "
            f"failed flush (last {flush.get('lastUnsavedAt')}, sessions "
            f"{', '.join(flush.get(FLUSH_SESSIONS_KEY) or [])})",
            "fix": "check the flush model (see the log's 'memory flush' warnings)",
        })
    if not data.get("indexExists", True):
        notes.append("no index yet: 'memmw index' builds it (a search also does)")
    pending = int(vector.get("pending") or 0)
    if pending:
        notes.append(
            f"{pending} chunks have no vector yet: found by keyword only until 'memmw index' "
            "embeds them"
        )
    if data.get("dirty") and data.get("indexExists", True):
        notes.append("files changed since the last sync: 'memmw index' (or a search) updates it")
    if embedding.get("unavailableReason") and not embedding.get("provider"):
        notes.append(f"keyword-only search: {embedding['unavailableReason']}")
    return degraded, notes


def vector_problems(mem: Memory) -> tuple[list[dict[str, str]], int]:
    """Why this index has no usable vectors, as ``status`` reports it, and the pending count.

    The one judgement ``status`` and a keyword-only ``search`` share, so the two never
    disagree about whether the provider failed or the vectors are merely not built yet.
    """
    data: dict[str, Any] = camelize(mem.status().to_dict())
    data["indexExists"] = mem.store.exists()
    degraded, _notes = assess(data)
    wanted = {"embedding provider", "embedding probe", "vectors", "vector backend"}
    pending = int((data.get("vector") or {}).get("pending") or 0)
    return [d for d in degraded if d["what"] in wanted], pending


def _note_fallback_index(mem: Memory, data: dict[str, Any]) -> None:
    """Report a fallback that happened in an earlier process (the index says so).

    The primary provider is retried by every new process, so a fresh ``status`` has not
    seen it fail; the index identity still records that the fallback embedded it.
    """
    from memmw.errors import MemmwError

    embedding = data.get("embedding") or {}
    fallback = str(mem.config.fallback or "none").strip().lower()
    if embedding.get("fallbackFrom") or fallback == "none" or not data["indexExists"]:
        return
    try:
        with mem.store.read() as reader:
            identity = reader.identity() or {}
    except MemmwError:
        identity = {}
    built_by = identity.get("provider")
    if built_by == fallback and embedding.get("provider") not in (None, fallback):
        embedding["fallbackFrom"] = embedding.get("provider")
        embedding["fallbackReason"] = (
            f"the index was embedded by the fallback {fallback} after "
            f"{embedding.get('provider')} failed; it is retried at the next search or index run"
        )


def _up_to_date(dirty: bool, pending: int, degraded: list[dict[str, str]]) -> str:
    """Files and vectors: "yes" only when a search uses every chunk as the index intends."""
    if dirty:
        return "no (files changed)"
    if pending:
        failed = any(d["what"] in ("vectors", "embedding provider") for d in degraded)
        return (f"no ({pending} chunks without a vector"
                + ("; the last embedding run failed, see Degraded)" if failed else ")"))
    return "yes"


def _ago(ts: float | None) -> str:
    if ts is None:
        return "never"
    secs = max(0.0, time.time() - ts)
    if secs < 90:
        span = f"{secs:.0f} s"
    elif secs < 5400:
        span = f"{secs / 60:.0f} min"
    elif secs < 172800:
        span = f"{secs / 3600:.1f} h"
    else:
        span = f"{secs / 86400:.0f} days"
    return f"{iso(ts)} ({span} ago)"


@command(name="status", help=HELP, short_help="Show the index state and what is degraded.")
@click.option("--deep", is_flag=True, help="Probe the keyword backends and the provider.")
@click.option(
    "--principals", "show_principals", is_flag=True,
    help="Also one line per principal: files, indexed files, chunks, facts, transcripts.",
)
@with_memory(one_shot=True)
def status(mem: Memory, deep: bool, show_principals: bool = False) -> int:
    """Collect and print the status."""
    st = mem.status(deep=deep)
    data: dict[str, Any] = camelize(st.to_dict())
    data["lastSync"] = iso(st.last_sync)
    data["indexExists"] = mem.store.exists()
    _note_fallback_index(mem, data)
    data["stateDir"] = str(mem.state_dir)
    degraded, notes = assess(data)
    data["degraded"] = degraded
    data["notes"] = notes
    if show_principals:
        from memmw.engine.principals import list_principals

        data["principals"] = [p.to_payload() for p in list_principals(mem)]
    if settings().json:
        emit_json(data)
        return EXIT_DEGRADED if degraded else EXIT_OK
    vector = data.get("vector") or {}
    embedding = data.get("embedding") or {}
    by_source = ", ".join(
        f"{name} {counts['files']}" for name, counts in sorted(st.source_counts.items())
    )
    rows: list[tuple[str, str]] = [
        ("Workspace", st.workspace),
        ("Agent", st.agent_id),
        ("Index", f"{mem.config.store.backend}: {st.db_path}"
         + ("" if data["indexExists"] else "  (not built yet)")),
        ("Last sync", _ago(st.last_sync)),
        ("Files", f"{st.files}  ({by_source or 'none'})"),
        ("Chunks", str(st.chunks)),
        ("Search", "hybrid (keyword + vectors)" if st.mode == "hybrid" else "keyword-only"),
        ("Provider", f"{st.provider} ({st.model}); requested {embedding.get('requested')}"),
        ("Vectors", f"{vector.get('vectors', 0)} stored, {vector.get('pending', 0)} pending"
         + (f"; backend {vector['backend']}" if vector.get("backend") else "")),
        ("Watcher", str((data.get("watcher") or {}).get("state", "stopped"))),
        ("Up to date", _up_to_date(st.dirty, int(vector.get("pending") or 0), degraded)),
    ]
    if embedding.get("fallbackFrom"):
        rows.append(("Fallback", f"from {embedding['fallbackFrom']}: {embedding.get('fallbackReason')}"))
    if deep:
        for ns in (data.get("store") or {}).get("namespaces") or []:
            rows.append((
                "Namespace",
                f"{ns['namespace']}: {ns['files']} files, {ns['chunks']} chunks,"
                f" {ns['vectors']} vectors, {ns['textBytes']:,} bytes of text",
            ))
        fts = data.get("fts") or {}
        rows.append(("FTS5", f"available {fts.get('available')}; tokenizer {fts.get('tokenizer')}"))
        km = data.get("keywordMatrix") or {}
        rows.append(("Keyword", ", ".join(f"{k} {v}" for k, v in km.items())))
        if vector.get("reason"):
            rows.append(("Vector path", str(vector["reason"])))
        probe = embedding.get("probe") or {}
        if probe:
            rows.append(("Probe", f"ok {probe.get('ms')} ms" if probe.get("ok") else f"failed: {probe.get('error')}"))
    for p in data.get("principals") or []:
        rows.append((
            "Principal",
            f"{p['principal']}: {p['files']} files, {p['indexedFiles']} indexed, "
            f"{p['chunks']} chunks, {p['facts']} facts, {p['transcripts']} transcripts",
        ))
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        out(f"{key.ljust(width)}  {value}")
    if degraded:
        out("")
        out("Degraded:")
        for d in degraded:
            out(f"  - {d['what']}: {d['why']}")
            out(f"    fix: {d['fix']}")
    if notes and not settings().quiet:
        out("")
        for note in notes:
            out(f"note: {note}")
    return EXIT_DEGRADED if degraded else EXIT_OK
