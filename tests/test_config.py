"""Config: frozen keyword-only dataclasses, reference defaults, validation and loading."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memmw
from memmw.config import (
    CacheConfig,
    ChunkingConfig,
    ExtraPath,
    FlushConfig,
    HybridConfig,
    MemoryConfig,
    MMRConfig,
    QueryConfig,
    ReadConfig,
    RemoteConfig,
    SessionSyncConfig,
    Source,
    StoreConfig,
    SyncConfig,
    TemporalDecayConfig,
    candidate_count,
    resolve_state_dir,
    resolve_workspace,
)
from memmw.errors import ConfigError, MemmwError

SECTIONS = (
    MemoryConfig,
    ChunkingConfig,
    StoreConfig,
    HybridConfig,
    MMRConfig,
    TemporalDecayConfig,
    QueryConfig,
    SyncConfig,
    SessionSyncConfig,
    CacheConfig,
    ReadConfig,
    RemoteConfig,
    FlushConfig,
)


# -- shape ------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", SECTIONS, ids=lambda c: c.__name__)
def test_sections_are_frozen_keyword_only_dataclasses(cls: type) -> None:
    assert dataclasses.is_dataclass(cls)
    params = cls.__dataclass_params__  # type: ignore[attr-defined]
    assert params.frozen
    assert all(f.kw_only for f in dataclasses.fields(cls))
    instance = cls()
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(instance, dataclasses.fields(cls)[0].name, None)


def test_positional_arguments_are_refused() -> None:
    with pytest.raises(TypeError):
        MemoryConfig("none")  # type: ignore[misc]
    with pytest.raises(TypeError):
        ChunkingConfig(400, 80)  # type: ignore[misc]


def test_provider_none_is_accepted_from_the_package_root() -> None:
    cfg = memmw.MemoryConfig(provider="none")
    assert cfg.provider == "none"
    assert cfg.fallback == "none"
    assert memmw.MemoryConfig(provider="  NONE ").provider == "none"


# -- defaults ---------------------------------------------------------------------------


def test_reference_defaults() -> None:
    cfg = MemoryConfig()
    assert cfg.enabled is True
    assert cfg.sources == ("memory",)
    assert cfg.extra_paths == ()
    assert cfg.provider == "auto"
    assert cfg.citations == "auto"
    # chunking 400/80
    assert (cfg.chunking.tokens, cfg.chunking.overlap) == (400, 80)
    # query: 6 results, min score 0.35, 700-char snippets
    assert cfg.query.max_results == 6
    assert cfg.query.min_score == 0.35
    assert cfg.query.snippet_max_chars == 700
    # hybrid: normalized fusion with equal weights (the original 0.7 / 0.3 raw-score merge
    # is HybridConfig.classic()), multiplier 4 capped at 200 -> 24 candidates per leg
    assert cfg.query.hybrid.fusion == "normalized"
    assert cfg.query.hybrid.vector_weight == pytest.approx(0.5)
    assert cfg.query.hybrid.text_weight == pytest.approx(0.5)
    classic = HybridConfig.classic()
    assert (classic.fusion, classic.vector_weight, classic.text_weight) == ("weighted", 0.7, 0.3)
    assert cfg.query.hybrid.candidate_multiplier == 4
    assert cfg.query.hybrid.max_candidates == 200
    assert cfg.query.candidates == 24
    # MMR on, lambda 0.7; decay on, 30-day half-life
    assert (cfg.query.mmr.enabled, cfg.query.mmr.lambda_) == (True, 0.7)
    assert cfg.query.temporal_decay.enabled is True
    assert cfg.query.temporal_decay.half_life_days == 30.0
    # cache, sync, sessions, flush, read window
    assert (cfg.cache.enabled, cfg.cache.max_entries) == (True, 50_000)
    assert cfg.sync.watch_debounce_ms == 1500
    assert (cfg.sync.on_session_start, cfg.sync.on_search, cfg.sync.watch) == (True, True, True)
    assert cfg.sync.interval_minutes == 0.0
    assert (cfg.sync.sessions.delta_bytes, cfg.sync.sessions.delta_messages) == (100_000, 50)
    assert cfg.sync.sessions.post_compaction_force is True
    assert (cfg.flush.soft_threshold_tokens, cfg.flush.reserve_tokens_floor) == (4000, 20_000)
    assert cfg.flush.force_flush_transcript_bytes == 2 * 1024 * 1024
    assert (cfg.read.max_lines, cfg.read.max_chars) == (120, 12_000)
    assert cfg.store.fts_tokenizer == "unicode61"
    assert cfg.store.keyword_backend == "auto"


def test_candidate_count_is_capped() -> None:
    assert candidate_count(6, HybridConfig()) == 24
    assert candidate_count(1, HybridConfig(candidate_multiplier=1)) == 1
    assert candidate_count(100, HybridConfig()) == 200
    assert candidate_count(100, HybridConfig(candidate_multiplier=20, max_candidates=500)) == 500
    assert QueryConfig(max_results=60).candidates == 200


def test_classic_decay_keeps_the_original_formula() -> None:
    classic = TemporalDecayConfig.classic()
    assert (classic.mode, classic.reference, classic.floor) == ("classic", "now", 0.0)
    assert classic.half_life_days == 30.0
    default = TemporalDecayConfig()
    assert (default.mode, default.reference, default.floor) == ("bounded", "newest", 0.85)


# -- normalisation ----------------------------------------------------------------------


def test_hybrid_weights_are_normalised() -> None:
    h = HybridConfig(vector_weight=0.2, text_weight=0.2)
    assert (h.vector_weight, h.text_weight) == (0.5, 0.5)
    h = HybridConfig(vector_weight=1, text_weight=0.25)
    assert h.vector_weight == pytest.approx(0.8)
    assert h.text_weight == pytest.approx(0.2)
    assert isinstance(h.vector_weight, float)
    both_zero = HybridConfig(vector_weight=0, text_weight=0)
    assert (both_zero.vector_weight, both_zero.text_weight) == (0.7, 0.3)


def test_overlap_is_clamped_below_the_chunk_size() -> None:
    assert ChunkingConfig(tokens=10, overlap=50).overlap == 9
    assert ChunkingConfig(tokens=1, overlap=0).overlap == 0


def test_sources_and_extra_paths_are_normalised() -> None:
    cfg = MemoryConfig(
        sources=("memory", "sessions", "memory"),
        extra_paths=("notes", ExtraPath(path="notes"), ExtraPath(path=" docs ", pattern="*.md")),
    )
    assert cfg.sources == ("memory", "sessions")
    assert cfg.extra_paths == (ExtraPath(path="notes"), ExtraPath(path="docs", pattern="*.md"))
    assert MemoryConfig(sources=()).sources == ("memory",)



def test_sources_are_a_typed_value_with_the_same_strings() -> None:
    """``sources`` holds ``Source`` members; they equal, hash, print and serialise as the
    config's strings (so an index built before keeps its identity)."""
    cfg = MemoryConfig.from_dict({"sources": ["sessions", "memory"]})
    assert cfg.sources == (Source.TRANSCRIPTS, Source.MEMORY)
    assert all(isinstance(s, Source) for s in cfg.sources)
    assert cfg.to_dict()["sources"] == ["sessions", "memory"]
    assert [type(s) for s in cfg.to_dict()["sources"]] == [str, str]
    assert json.dumps(sorted(cfg.sources)) == '["memory", "sessions"]'
    assert f"{Source.TRANSCRIPTS}/x.jsonl" == "sessions/x.jsonl" == f"{Source.TRANSCRIPTS.value}/x.jsonl"
    assert {"memory": 1}[Source.MEMORY] == 1 and Source("sessions") is Source.TRANSCRIPTS
    with pytest.raises(ConfigError, match="sources entries must be 'memory' or 'sessions'; got 'wiki'"):
        MemoryConfig.from_dict({"sources": ["memory", "wiki"]})
    with pytest.raises(ConfigError, match="got 'transcripts'"):  # the member's name is no value
        MemoryConfig(sources=("transcripts",))


# -- validation -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "needles"),
    [
        (lambda: StoreConfig(keyword_backend="bm42"), ["store.keyword_backend", "'memory'", "'fts5'"]),
        (lambda: StoreConfig(fts_tokenizer="porter"), ["store.fts_tokenizer", "'trigram'"]),
        (lambda: MemoryConfig(citations="maybe"), ["citations", "'auto'", "'on'", "'off'"]),
        (lambda: MemoryConfig(sources=("email",)), ["sources", "'memory'", "'sessions'"]),
        (lambda: MemoryConfig(provider=""), ["provider", "'none'"]),
        (lambda: HybridConfig(candidate_multiplier=0), ["query.hybrid.candidate_multiplier", "[1, 20]"]),
        (lambda: HybridConfig(candidate_multiplier=21), ["candidate_multiplier", "[1, 20]"]),
        (lambda: HybridConfig(vector_weight=1.5), ["query.hybrid.vector_weight", "[0.0, 1.0]"]),
        (lambda: HybridConfig(fusion="max"), ["query.hybrid.fusion", "'rrf'", "'weighted'"]),
        (lambda: QueryConfig(min_score=2), ["query.min_score", "[0.0, 1.0]"]),
        (lambda: QueryConfig(min_score=float("nan")), ["query.min_score"]),
        (lambda: QueryConfig(max_results=0), ["query.max_results"]),
        (lambda: ChunkingConfig(tokens=0), ["chunking.tokens", "1"]),
        (lambda: ChunkingConfig(tokens="400"), ["chunking.tokens", "integer"]),
        (lambda: ChunkingConfig(tokens=True), ["chunking.tokens", "integer"]),
        (lambda: MMRConfig(lambda_=1.5), ["query.mmr.lambda_"]),
        (lambda: TemporalDecayConfig(half_life_days=0.5), ["query.temporal_decay.half_life_days"]),
        (lambda: TemporalDecayConfig(mode="linear"), ["query.temporal_decay.mode", "'bounded'", "'classic'"]),
        (lambda: SyncConfig(watch_debounce_ms=-1), ["sync.watch_debounce_ms"]),
        (lambda: CacheConfig(max_entries=0), ["cache.max_entries"]),
        (lambda: ReadConfig(max_lines=0), ["read.max_lines"]),
        (lambda: MemoryConfig(user_timezone="Mars/Olympus"), ["user_timezone", "IANA"]),
        (lambda: ExtraPath(path="  "), ["extra_paths", "path"]),
    ],
)
def test_invalid_values_name_the_key_and_allowed_values(build, needles: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        build()
    message = str(info.value)
    for needle in needles:
        assert needle in message
    assert isinstance(info.value, MemmwError)
    assert isinstance(info.value, ValueError)


def test_unknown_keys_are_rejected_with_the_allowed_ones() -> None:
    with pytest.raises(ConfigError) as info:
        MemoryConfig.from_dict({"query": {"maxResult": 3}})
    assert "query.max_result" in str(info.value)
    assert "max_results" in str(info.value)
    with pytest.raises(ConfigError, match="'bogus'"):
        MemoryConfig.from_dict({"bogus": 1})


def test_from_dict_accepts_camel_case_and_nesting() -> None:
    cfg = MemoryConfig.from_dict(
        {
            "provider": "none",
            "extraPaths": ["notes", {"path": "docs", "pattern": "**/*.md"}],
            "query": {
                "maxResults": 8,
                "minScore": 0.2,
                "mmr": {"lambda": 0.5},
                "temporalDecay": {"halfLifeDays": 10},
            },
            "store": {"keywordBackend": "fts5"},
            "sync": {"watchDebounceMs": 200, "sessions": {"deltaMessages": 5}},
        }
    )
    assert cfg.provider == "none"
    assert cfg.extra_paths == (ExtraPath(path="notes"), ExtraPath(path="docs", pattern="**/*.md"))
    assert (cfg.query.max_results, cfg.query.min_score) == (8, 0.2)
    assert cfg.query.mmr.lambda_ == 0.5
    assert cfg.query.temporal_decay.half_life_days == 10.0
    assert cfg.store.keyword_backend == "fts5"
    assert cfg.sync.watch_debounce_ms == 200
    assert cfg.sync.sessions.delta_messages == 5


def test_from_dict_validates_types() -> None:
    with pytest.raises(ConfigError, match=r"query\.max_results"):
        MemoryConfig.from_dict({"query": {"max_results": "many"}})
    with pytest.raises(ConfigError, match="enabled must be true or false"):
        MemoryConfig.from_dict({"enabled": "perhaps"})
    with pytest.raises(ConfigError, match="query must be a table"):
        MemoryConfig.from_dict({"query": 3})


def test_to_dict_round_trips() -> None:
    cfg = MemoryConfig(provider="none", extra_paths=("notes",), query=QueryConfig(max_results=3))
    data = cfg.to_dict()
    assert data["query"]["max_results"] == 3
    assert data["extra_paths"] == [{"path": "notes", "pattern": None}]
    assert MemoryConfig.from_dict(data) == cfg


def test_replace_validates_again() -> None:
    cfg = MemoryConfig()
    assert cfg.replace(provider="NONE").provider == "none"
    with pytest.raises(ConfigError):
        cfg.replace(citations="sometimes")


# -- loading ----------------------------------------------------------------------------


def test_load_reads_memmw_toml_from_the_workspace(tmp_path) -> None:
    (tmp_path / "memmw.toml").write_text(
        'provider = "none"\n[query]\nmax_results = 9\n[query.hybrid]\ncandidateMultiplier = 2\n',
        encoding="utf-8",
    )
    cfg = MemoryConfig.load(workspace=tmp_path, environ={})
    assert cfg.provider == "none"
    assert cfg.query.max_results == 9
    assert cfg.query.hybrid.candidate_multiplier == 2


def test_load_accepts_a_memory_table(tmp_path) -> None:
    path = tmp_path / "custom.toml"
    path.write_text('[memory]\nprovider = "none"\n[memory.chunking]\ntokens = 200\n', encoding="utf-8")
    cfg = MemoryConfig.load(config_file=path, environ={})
    assert (cfg.provider, cfg.chunking.tokens) == ("none", 200)


def test_load_without_a_file_gives_defaults(tmp_path) -> None:
    assert MemoryConfig.load(workspace=tmp_path, environ={}) == MemoryConfig()


def test_environment_overrides_the_file(tmp_path) -> None:
    (tmp_path / "memmw.toml").write_text("[query]\nmax_results = 9\nmin_score = 0.5\n", encoding="utf-8")
    env = {
        "MEMMW__QUERY__MAX_RESULTS": "3",
        "MEMMW__QUERY__MMR__LAMBDA": "0.9",
        "MEMMW__STORE__PATH": "/tmp/memmw-{agentId}.sqlite",
        "MEMMW__SYNC__WATCH": "false",
        "MEMMW_PROVIDER": "none",
        "UNRELATED": "1",
    }
    cfg = MemoryConfig.load(workspace=tmp_path, environ=env)
    assert cfg.query.max_results == 3
    assert cfg.query.min_score == 0.5  # from the file
    assert cfg.query.mmr.lambda_ == 0.9
    assert cfg.store.path == "/tmp/memmw-{agentId}.sqlite"
    assert cfg.sync.watch is False
    assert cfg.provider == "none"


def test_bad_environment_value_names_the_key(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"store\.keyword_backend"):
        MemoryConfig.load(workspace=tmp_path, environ={"MEMMW__STORE__KEYWORD_BACKEND": "lucene"})


def test_load_errors(tmp_path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        MemoryConfig.load(config_file=tmp_path / "missing.toml", environ={})
    bad = tmp_path / "memmw.toml"
    bad.write_text("provider = \n", encoding="utf-8")
    with pytest.raises(ConfigError, match="cannot read config file"):
        MemoryConfig.load(workspace=tmp_path, environ={})


def test_state_dir_and_workspace_resolution(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("MEMMW_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("MEMMW_WORKSPACE", str(tmp_path / "ws"))
    assert resolve_state_dir(None) == tmp_path / "state"
    assert resolve_workspace(None) == tmp_path / "ws"
    assert resolve_state_dir(tmp_path / "x") == tmp_path / "x"
    monkeypatch.delenv("MEMMW_STATE_DIR")
    monkeypatch.delenv("MEMMW_WORKSPACE")
    monkeypatch.chdir(tmp_path)
    assert resolve_workspace(None) == tmp_path
    assert resolve_state_dir(None).name == ".memmw"


def test_repr_hides_header_values_keys_and_url_passwords() -> None:
    config = MemoryConfig(
        remote=RemoteConfig(
            base_url="https://bob:hunter2pass@proxy.example/v1?api_key=qwerty123456",
            api_key="sk-live-abcdefghijklmnop0123",
            headers={"Authorization": "Bearer abcdefgh12345678", "X-Api-Key": "zz9-plural-z"},
        )
    )
    text = repr(config)
    for secret in ("hunter2pass", "qwerty123456", "sk-live-abcdefghijklmnop0123",
                   "abcdefgh12345678", "zz9-plural-z"):
        assert secret not in text, secret
    assert "Authorization" in text and "proxy.example" in text and "bob" in text


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://bob:hunter2pass@db.example:5432/mem",
        "postgresql://bob:p@ss:w/rd%40hunter2pass@db.example/mem",
        "host=db.example user=bob password='hunter2pass x' dbname=mem",
        "postgresql://bob@db.example/mem?password=hunter2pass",
    ],
)
def test_repr_masks_the_store_dsn(dsn: str) -> None:
    # Issue 20: repr(MemoryConfig) printed the DSN's password.
    for text in (repr(MemoryConfig(store=StoreConfig(backend="postgres", dsn=dsn))),
                 repr(StoreConfig(dsn=dsn))):
        assert "hunter2pass" not in text and "db.example" in text and "bob" in text


@settings(max_examples=150, deadline=None)
@given(
    password=st.text(
        st.characters(codec="utf-8", exclude_categories=("Cs", "Zs", "Cc", "Zl", "Zp")),
        min_size=6, max_size=20,
    ).map(lambda p: "Zq" + p)
)
def test_repr_never_shows_a_generated_dsn_password(password: str) -> None:
    from urllib.parse import quote

    for dsn in (f"postgresql://bob:{password}@db.example/mem",
                f"postgresql://bob:{quote(password, safe='')}@db.example/mem"):
        text = repr(MemoryConfig(store=StoreConfig(backend="postgres", dsn=dsn)))
        assert password not in text and quote(password, safe="") not in text


def test_fact_search_defaults_have_one_home() -> None:
    """``max_results`` and ``threshold`` defaults of the fact search come from config only:
    no function under memmw gives either parameter a literal number as its default."""
    import ast
    import inspect
    from pathlib import Path

    import memmw
    from memmw.config import FACT_MATCH_THRESHOLD, FACT_SEARCH_MAX_RESULTS, ActiveMemoryConfig
    from memmw.engine.memory import Memory
    from memmw.graph.engine import GraphEngine
    from memmw.graph.search import search_facts

    literal_defaults = []
    for path in sorted(Path(memmw.__file__).parent.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            args = node.args
            positional = args.posonlyargs + args.args
            pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults, strict=True))
            pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None]
            literal_defaults += [
                f"{path.name}:{node.lineno} {node.name}({a.arg}={d.value})"
                for a, d in pairs
                if a.arg in ("max_results", "threshold")
                and isinstance(d, ast.Constant)
                and isinstance(d.value, (int, float))
                and not isinstance(d.value, bool)
            ]
    assert literal_defaults == []
    for fn in (Memory.facts, GraphEngine.facts, search_facts):
        assert inspect.signature(fn).parameters["max_results"].default == FACT_SEARCH_MAX_RESULTS
    assert inspect.signature(GraphEngine.facts).parameters["threshold"].default == FACT_MATCH_THRESHOLD
    assert ActiveMemoryConfig().threshold == FACT_MATCH_THRESHOLD


def test_the_memory_store_backend_refuses_fts5() -> None:
    from memmw.config import StoreConfig

    assert StoreConfig(backend="memory").keyword_backend == "auto"
    with pytest.raises(ConfigError, match="in-memory store"):
        StoreConfig(backend="memory", keyword_backend="fts5")
