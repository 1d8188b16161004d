"""One consolidation run: candidates, the model's proposal, the gates, the write, undo.

At most one run per workspace at a time across processes (a lock file named by the
workspace's resolved path in the user state folder). A run never happens inside a
user's turn: the middleware never calls it; hosts call it on demand, from the ``/new``
hook in a background thread, or on a schedule (:mod:`memmw.consolidation.schedule`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import hashlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memmw.agent.chat import ChatModel, call_model
from memmw.config import ConsolidationConfig
from memmw.consolidation import journal
from memmw.consolidation.candidates import Candidate, CandidateReport, find_candidates
from memmw.consolidation.entries import live_entries
from memmw.consolidation.gates import (
    GateInput,
    GateResult,
    ShownLine,
    file_sha,
    first_failure,
    run_gates,
)
from memmw.consolidation.proposal import (
    ProposalError,
    Proposed,
    apply_edits,
    parse_proposal,
    quotes_of,
)
from memmw.errors import FileBusyError, NoteEditError, PathPolicyError
from memmw.statedir import user_state_root, workspace_key
from memmw.text.lines import split_lines
from memmw.timeutil import user_now
from memmw.workspace.access import SessionAccess
from memmw.workspace.active_context import ACTIVE_CONTEXT
from memmw.workspace.files import LineEdit, restore_note, write_note
from memmw.workspace.layout import USER_FILE
from memmw.workspace.locks import exclusive_lock

if TYPE_CHECKING:
    from memmw.engine.memory import Memory

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ConsolidationReport:
    """What a run did.

    Attributes:
        status: ``dry-run`` (candidates only), ``applied``, ``nothing`` (no candidate or
            no edit), ``refused`` (a gate failed: nothing written) or ``busy`` (another
            run of this workspace is going on).
        gate: The failed gate (``refused``): ``proposal`` or one of
            :data:`memmw.consolidation.gates.GATES`.
        detail: Why, in one line.
        gates: Every gate's verdict (when the gates ran).
        candidates: The judged entries.
        changes: Target -> the lines added or changed (``L12: text``).
        run_id: The applied run (``memmw consolidate --undo`` reverts the newest).
    """

    status: str
    gate: str | None = None
    detail: str = ""
    gates: tuple[GateResult, ...] = ()
    candidates: CandidateReport | None = None
    changes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    run_id: str | None = None

    @property
    def applied(self) -> bool:
        """True when the targets were written."""
        return self.status == "applied"

    def to_dict(self, *, limit: int | None = None) -> dict[str, Any]:
        """JSON-ready form (``memmw consolidate --json``): at most ``limit`` judged entries
        (best first; None = all) and, for all of them, how many fail each condition."""
        out: dict[str, Any] = {
            "status": self.status,
            "gate": self.gate,
            "detail": self.detail,
            "gates": [dataclasses.asdict(g) for g in self.gates],
            "changes": {k: list(v) for k, v in self.changes.items()},
            "run_id": self.run_id,
        }
        if self.candidates is not None:
            found = self.candidates
            entries = found.entries if limit is None else found.entries[:limit]
            out["candidates"] = [c.to_dict() for c in entries]
            out["candidate_count"] = len(found.candidates)
            out["judged"] = len(found.entries)
            out["failed"] = dict(found.failed)
            out["notes"] = found.notes
            out["never_recalled"] = found.never_recalled
        return out


@dataclass(frozen=True)
class UndoReport:
    """What ``--undo`` did: ``undone``, ``nothing`` (no run to undo), ``refused`` or ``busy``."""

    status: str
    run_id: str | None = None
    detail: str = ""
    restored: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return dataclasses.asdict(self)


def lock_path(workspace: Path) -> Path:
    """The lock file of a workspace's consolidation runs (one per resolved workspace)."""
    return user_state_root() / "locks" / f"{workspace_key(workspace)}.consolidate.lock"


def _budgets(mem: Memory, targets: tuple[str, ...]) -> dict[str, int]:
    out = {}
    for t in targets:
        if t == ACTIVE_CONTEXT:
            out[t] = mem.config.active_memory.active_context_max_chars
        elif t == USER_FILE:
            out[t] = mem.config.bootstrap.user_max_chars
        else:
            out[t] = mem.config.bootstrap.max_chars_per_file
    return out


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _activation(mem: Memory) -> dict[tuple[str, int], float]:
    """``(path, line) -> activation`` of graph entries (empty when the graph cannot load)."""
    try:
        if not mem.graph_engine.store.exists():
            return {}  # no index yet: a dry run never builds one for a side signal
        graph = mem.graph_engine.graph()
    except Exception:  # never fail a run for a signal
        log.debug("no graph activation for consolidation", exc_info=True)
        return {}
    out: dict[tuple[str, int], float] = {}
    for f in graph.facts:
        key = (f.path, f.line)
        out[key] = max(out.get(key, 0.0), graph.activation_of(f.stable_key))
    return out


def candidates_for(
    mem: Memory,
    config: ConsolidationConfig | None = None,
    *,
    now: float | None = None,
    include_unrecalled: bool = False,
    activation: bool = True,
) -> CandidateReport:
    """The promotion candidates of ``mem``'s workspace (no model, nothing written)."""
    cfg = _targets(Path(mem.workspace), config or mem.config.consolidation)
    promoted: list[str] = []
    for t in cfg.targets:
        data = _read(mem.workspace / t)
        if data:
            promoted.extend(line for _n, line in live_entries(data.decode("utf-8", "replace")))
    return find_candidates(
        mem.workspace,
        mem.graph_engine.telemetry.path,
        cfg,
        agent_id=mem.agent_id,
        promoted=promoted,
        activation=_activation(mem) if activation else None,
        access=SessionAccess(workspace=mem.workspace, extra_paths=mem.config.extra_paths),
        now=now,
        include_unrecalled=include_unrecalled,
    )


SYSTEM_PROMPT = """You consolidate an AI agent's memory. Daily notes hold what happened; \
MEMORY.md holds curated long-term facts and decisions; active-context.md holds the current \
working context. Propose edits that bring the curated files up to date with the candidate \
entries below. Rules:
- Latest wins, history is kept: when a candidate gives a newer value of something a \
curated entry states, use op "update" on that entry's line with the newer value as \
"text" (the newer value leads the line; the older one stays on it, struck through and \
dated). Use "supersede" for an entry that is no longer true \
(give a reason), "merge" for duplicate entries, "add" for a new lasting fact or decision.
- Never rewrite, drop or reorder existing lines.
- Every edit cites the candidate lines it rests on: "sources": [{"path": ..., "line": ..., \
"quote": "<exact words from that line>"}].
- Only promote lasting facts and decisions; skip chatter. Nothing private moves into a \
shared file; nothing from untrusted notes is promoted.
Answer with JSON only: {"edits": [{"op": "add"|"update"|"supersede"|"merge", "file": \
"<target>", "line": <n, for update/supersede>, "lines": [<n>, ...] (merge), "text": \
"<entry, one line>", "reason": "<why>", "sources": [...]}]}. {"edits": []} if nothing \
should change."""


def build_messages(
    candidates: list[Candidate], texts: Mapping[str, str], today: str
) -> list[dict[str, str]]:
    """The consolidation prompt: the targets with line numbers and the candidates."""
    parts = [f"Today is {today}."]
    for name, text in texts.items():
        numbered = "\n".join(f"{n:>4}| {line}" for n, line in enumerate(split_lines(text), 1))
        parts.append(f"## {name} (line| text)\n{numbered or '(empty)'}")
    listed = "\n".join(f"- {c.citation} [{c.kind}; recalled {c.recalls}x by {c.queries} queries]: {c.text}"
                       for c in candidates)
    parts.append(f"## Candidates (path#line: text)\n{listed or '(none)'}")
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


def _changes(proposed: Mapping[str, Proposed]) -> dict[str, tuple[str, ...]]:
    return {
        name: tuple(f"L{n}: {p.lines[n - 1]}" for n in sorted(p.touched) if n <= len(p.lines))
        for name, p in proposed.items()
        if p.touched
    }


def consolidate(
    mem: Memory,
    model: ChatModel | None = None,
    *,
    dry_run: bool = False,
    config: ConsolidationConfig | None = None,
    now: float | None = None,
    include_unrecalled: bool = False,
    sync: bool = True,
) -> ConsolidationReport:
    """Run one consolidation of ``mem``'s workspace.

    Candidates come from telemetry and activation; ``model`` (the agent's own model, or
    a chat provider: :func:`memmw.consolidation.providers.chat_model`) proposes edits of
    the target files; every gate must pass before anything is written; the written
    files' pre-images are kept for :func:`undo`; the index follows with a sync.

    Args:
        mem: The memory whose workspace is consolidated.
        model: ``messages -> reply``; None (or ``dry_run``) only judges candidates.
        dry_run: Judge candidates and explain them; call no model, write nothing.
        config: Overrides ``mem.config.consolidation``.
        now: Epoch seconds (default the clock).
        include_unrecalled: List never-recalled entries too (else only counted).
        sync: Sync the index after a write (the one-shot CLI skips embeddings).

    Returns:
        The report; a failed gate is ``status="refused"`` with ``gate`` named (nothing
        written), another run going on is ``status="busy"``.
    """
    cfg = config or mem.config.consolidation
    workspace = Path(mem.workspace)
    try:
        with exclusive_lock(_lock_file(workspace), timeout=0):
            return _run(mem, model, cfg, dry_run, now, include_unrecalled, sync)
    except TimeoutError:
        return ConsolidationReport("busy", detail="another consolidation of this workspace is running")


def _lock_file(workspace: Path) -> Path:
    path = lock_path(workspace)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _targets(workspace: Path, cfg: ConsolidationConfig) -> ConsolidationConfig:
    """``MEMORY.md`` means the long-term file that exists (``memory.md`` without ``MEMORY.md``)."""
    if (
        "MEMORY.md" in cfg.targets
        and not (workspace / "MEMORY.md").exists()
        and (workspace / "memory.md").is_file()
    ):
        names = tuple("memory.md" if t == "MEMORY.md" else t for t in cfg.targets)
        return dataclasses.replace(cfg, targets=names)
    return cfg


def _run(
    mem: Memory,
    model: ChatModel | None,
    cfg: ConsolidationConfig,
    dry_run: bool,
    now: float | None,
    include_unrecalled: bool,
    sync: bool,
) -> ConsolidationReport:
    workspace = Path(mem.workspace)
    cfg = _targets(workspace, cfg)
    now = time.time() if now is None else now
    # What the targets are at the start: the model sees this; the writes must find it.
    images = {t: _read(workspace / t) for t in cfg.targets}
    start_sha = {t: hashlib.sha256(b or b"").hexdigest() for t, b in images.items()}
    texts = {t: (b or b"").decode("utf-8", "replace") for t, b in images.items()}
    report = candidates_for(mem, cfg, now=now, include_unrecalled=include_unrecalled)
    if dry_run or model is None:
        return ConsolidationReport("dry-run", candidates=report)
    chosen = report.candidates[: cfg.max_candidates]
    if not chosen:
        return ConsolidationReport("nothing", detail="no promotion candidate", candidates=report)
    moment = dt.datetime.fromtimestamp(now, dt.timezone.utc)
    today = user_now(mem.config.user_timezone, lambda: moment).date().isoformat()
    reply = call_model(model, build_messages(chosen, texts, today))
    try:
        edits = parse_proposal(reply.text, cfg.targets)
        proposed = apply_edits(texts, edits, day=today)
    except ProposalError as exc:
        return ConsolidationReport("refused", gate="proposal", detail=str(exc), candidates=report)
    proposed = {k: p for k, p in proposed.items() if p.lines != split_lines(p.prior) or p.touched}
    if not proposed:
        return ConsolidationReport("nothing", detail="the model proposed no edit", candidates=report)
    data = GateInput(
        workspace=workspace,
        proposed=proposed,
        start_sha=start_sha,
        budgets=_budgets(mem, cfg.targets),
        max_change_fraction=cfg.max_change_fraction,
        quotes=quotes_of(edits),
        shown=[ShownLine(c.path, c.line, c.text) for c in chosen],
        access=SessionAccess(workspace=workspace, extra_paths=mem.config.extra_paths),
    )
    results = run_gates(data)
    failed = first_failure(results)
    if failed is not None:
        log.info("consolidation refused by gate %s: %s", failed.gate, failed.detail)
        return ConsolidationReport(
            "refused", gate=failed.gate, detail=failed.detail, gates=tuple(results), candidates=report
        )
    record = journal.begin(mem.state_dir, {t: images[t] for t in proposed})
    written: dict[str, str] = {}
    index = {t["path"]: i for i, t in enumerate(record.data["targets"])}

    def keep_post_image(name: str, sha: str) -> None:
        # Saved after each file: a run killed midway can still be undone (--undo).
        record.data["targets"][index[name]]["post_sha"] = sha
        record.save()

    try:
        _write(workspace, proposed, start_sha, written, keep_post_image)
    except (NoteEditError, FileBusyError, PathPolicyError) as exc:
        _roll_back(workspace, record, written)
        record.data["state"] = "refused"
        record.save()
        gate = "unchanged" if isinstance(exc, (NoteEditError, FileBusyError)) else "keep"
        return ConsolidationReport(
            "refused", gate=gate, detail=str(exc), gates=tuple(results), candidates=report
        )
    for target in record.data["targets"]:
        target["post_sha"] = written[target["path"]]
    record.data["state"] = "applied"
    record.data["finished"] = time.time()
    record.save()
    if sync:
        _sync(mem)
    log.info("consolidation applied (run %s): %s", record.run_id, ", ".join(proposed))
    return ConsolidationReport(
        "applied", gates=tuple(results), candidates=report, changes=_changes(proposed), run_id=record.run_id
    )


def _write(
    workspace: Path,
    proposed: Mapping[str, Proposed],
    start_sha: Mapping[str, str],
    written: dict[str, str],
    on_written: Callable[[str, str], None] = lambda name, sha: None,
) -> None:
    """Write each target through :func:`write_note`: struck lines in place, new ones appended.

    ``written`` gets each written target's sha256 as this write left it (what a roll-back
    must find to put the pre-image back without losing anyone else's edit).
    """
    for name, p in proposed.items():
        prior = p.prior_lines
        edits = [
            LineEdit(n, _expect(old, p.lines[n - 1]))
            for n, old in enumerate(prior, 1)
            if p.lines[n - 1] != old
        ]
        tail = p.lines[len(prior) :]
        lock = exclusive_lock(workspace) if name == ACTIVE_CONTEXT else contextlib.nullcontext()
        with lock:  # memory_set_context replaces active-context.md under the folder's lock
            done = write_note(
                workspace / name,
                edits=edits,
                append="\n".join(tail) if tail else None,
                whole_sha256=start_sha[name],
            )
            written[name] = done.whole_sha256 or file_sha(workspace / name)
        on_written(name, written[name])


def _expect(old: str, new: str) -> Any:
    def change(current: str) -> str:
        if current != old:
            raise ValueError("the line changed since the run read it")
        return new

    return change


def _roll_back(workspace: Path, record: journal.RunRecord, written: Mapping[str, str]) -> None:
    """Put back the targets a failed run already wrote, each only if still as it left it."""
    for i, target in enumerate(record.data["targets"]):
        if target["path"] not in written:
            continue  # never written by this run: whatever changed it is someone else's
        path = workspace / target["path"]
        try:
            restore_note(path, record.pre_image(i), whole_sha256=written[target["path"]])
        except (OSError, NoteEditError) as exc:
            log.error("consolidation roll-back of %s failed: %s", target["path"], exc)


def _sync(mem: Memory) -> None:
    try:
        mem.sync(embeddings="skip")
    except Exception as exc:  # the Markdown is written; the next sync catches up
        log.warning("sync after consolidation failed: %s", type(exc).__name__)


def undo(mem: Memory, *, run_id: str | None = None, sync: bool = True) -> UndoReport:
    """Restore the targets of the newest applied run (or ``run_id``) byte for byte.

    A run killed while writing is undone too: the files it wrote are put back, the
    others were never touched. Refused, with nothing changed, when a target was edited
    since the run wrote it (undoing would lose that edit).
    """
    workspace = Path(mem.workspace)
    try:
        with exclusive_lock(_lock_file(workspace), timeout=0):
            applied = [
                r for r in journal.runs(mem.state_dir) if r.data.get("state") in ("applied", "writing")
            ]
            if run_id is not None:
                applied = [r for r in applied if r.run_id == run_id]
            if not applied:
                return UndoReport("nothing", run_id, "no applied consolidation to undo")
            record = applied[0]
            targets = record.data["targets"]
            for target in targets:
                # Never written (a run killed midway): it must still be as it was.
                expected = target["post_sha"] or target["pre_sha"]
                if file_sha(workspace / target["path"]) != expected:
                    return UndoReport(
                        "refused",
                        record.run_id,
                        f"{target['path']} was edited since the run; undoing would lose that edit",
                    )
            restored = []
            for i, target in enumerate(targets):
                if target["post_sha"] is None:
                    continue
                restore_note(
                    workspace / target["path"], record.pre_image(i), whole_sha256=target["post_sha"]
                )
                restored.append(target["path"])
            record.data["state"] = "undone"
            record.data["undone_at"] = time.time()
            record.save()
    except TimeoutError:
        return UndoReport("busy", run_id, "a consolidation of this workspace is running")
    if sync:
        _sync(mem)
    return UndoReport("undone", record.run_id, "", tuple(restored))

