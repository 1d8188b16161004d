"""One score scale for every search mode (issue 23, item 7).

A hit's score is its evidence, ``1 - (1 - k) * (1 - v)`` (keyword evidence ``k``, vector
evidence ``v``, each weighted by decay and importance), whatever the mode and the fusion
that orders the results. So ``min_score`` means the same keyword-only and hybrid: a chunk
only the keyword leg finds scores the same in both, a second leg only raises a score, and
no search shows a score that prints as 0.000 unless its caller asked for it.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memmw import MemoryConfig
from memmw.config import HybridConfig, QueryConfig, RemoteConfig
from memmw.search.searcher import SHOWN_MIN, evidence
from memmw.types import SearchHit

from ..conftest import make_memory

WORDS = (
    "deploy gateway port cache Alice Bob peanuts allergy hiking dentist Berlin office "
    "release checklist invoice nurse taco station grocery Umzug Wohnung 搬家 朋友"
).split()

line = st.lists(st.sampled_from(WORDS), min_size=1, max_size=8).map(" ".join)
note = st.lists(line, min_size=1, max_size=5).map(lambda ls: "".join(f"- {x}\n" for x in ls))
# Undated notes (curated and topic files): no decay, so a score is exactly its evidence.
workspaces = st.dictionaries(
    st.sampled_from(["MEMORY.md", "USER.md", "memory/topics.md", "memory/people.md"]),
    note,
    min_size=1,
)
queries = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join)
fusions = st.sampled_from(["normalized", "weighted", "rrf"])


def _config(provider: str, fusion: str = "normalized") -> MemoryConfig:
    query = QueryConfig(hybrid=HybridConfig(fusion=fusion))  # type: ignore[arg-type]
    return MemoryConfig(provider=provider, query=query, remote=RemoteConfig(dimensions=32))


def _search(
    files: dict[str, str], provider: str, query: str, fusion: str, min_score: float | None
) -> tuple[str, list[SearchHit]]:
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        for name, text in files.items():
            (ws / name).parent.mkdir(parents=True, exist_ok=True)
            (ws / name).write_text(text, encoding="utf-8")
        with make_memory(workspace=ws, state_dir=Path(tmp) / "st", config=_config(provider, fusion)) as mem:
            mem.sync()
            result = mem.search_result(query, max_results=50, min_score=min_score)
            return result.mode, result.hits


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    files=workspaces,
    query=queries,
    fusion=fusions,
    min_score=st.one_of(st.none(), st.sampled_from([0.0, 0.1, 0.3, 0.6, 0.9])),
)
def test_a_score_means_the_same_in_every_mode(
    files: dict[str, str], query: str, fusion: str, min_score: float | None
) -> None:
    kw_mode, keyword = _search(files, "none", query, fusion, min_score)
    hy_mode, hybrid = _search(files, "fake", query, fusion, min_score)
    assert (kw_mode, hy_mode) == ("keyword-only", "hybrid")
    floor = SHOWN_MIN if min_score is None else min_score
    for hit in keyword + hybrid:
        k, v = hit.text_score or 0.0, hit.vector_score or 0.0
        assert 0.0 <= hit.score <= 1.0
        assert math.isclose(hit.score, 1 - (1 - k) * (1 - v), abs_tol=1e-9)
        assert hit.score >= floor
    by_chunk = {(h.path, h.chunk_start_line, h.chunk_end_line): h for h in hybrid}
    for hit in keyword:
        # max_results covers every chunk: what passes keyword-only passes hybrid too.
        twin = by_chunk[(hit.path, hit.chunk_start_line, hit.chunk_end_line)]
        assert twin.score >= hit.score - 1e-12
        if not twin.vector_score:
            assert math.isclose(twin.score, hit.score, abs_tol=1e-12)


@pytest.mark.parametrize("multiplier", [0.0, 0.5, 0.85, 1.0, 1.25])
def test_evidence_weights_each_leg_then_combines(multiplier: float) -> None:
    for raw in (0.0, 0.3, 1.0, 4.0):
        for vec in (None, 0.0, 0.4, 1.0):
            score = evidence(raw, vec, multiplier)
            k = math.tanh(raw * multiplier)
            v = min(1.0, (vec or 0.0) * multiplier)
            assert math.isclose(score, k + v - k * v, abs_tol=1e-12)
            assert 0.0 <= score <= 1.0
            # Either leg alone is a lower bound: agreement only raises a score.
            assert score >= max(k, v) - 1e-12
