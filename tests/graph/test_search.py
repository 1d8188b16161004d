"""Four-phase fact search and entity matching."""

from __future__ import annotations

from memmw import Memory
from memmw.graph.search import match_entities, search_facts, similarity


def test_phase_one_entity_and_intent_gives_the_current_value(mem: Memory) -> None:
    hits = mem.facts("Where does Alice live now?")
    assert hits[0].phase == 1 and hits[0].value == "Lisbon" and hits[0].current
    assert hits[0].citation == "memory/2026-05-01.md#L3"
    assert "Berlin" not in [h.value for h in hits]  # superseded: history only


def test_aliases_nicknames_and_other_languages_find_the_entity(mem: Memory) -> None:
    for query in ("where is Ali based", "爱丽丝住在哪里", "what does Bobby do"):
        hits = mem.facts(query)
        assert hits and hits[0].entity in ("Alice Martin", "Bob Stone"), query
    assert mem.facts("what does Bobby do")[0].value == "CFO at Acme"


def test_history_when_asked_for_past_values(mem: Memory) -> None:
    values = [h.value for h in mem.facts("where did Alice live before")]
    assert "Lisbon" in values and "Berlin" in values
    berlin = next(h for h in mem.facts("Alice city", include_history=True) if h.value == "Berlin")
    assert not berlin.current


def test_phase_two_lists_the_entitys_other_facts_and_relations(mem: Memory) -> None:
    hits = mem.facts("Tell me about Alice Martin", max_results=20)
    keys = {(h.phase, h.key) for h in hits}
    assert (2, "employer") in keys and (2, "preference") in keys and (2, "works_at") in keys


def test_phases_three_and_four_full_text(mem: Memory) -> None:
    fact = mem.facts("which database do we use?")
    assert fact[0].phase == 3 and fact[0].value == "Postgres"
    rel = mem.facts("who leads Atlas?")
    assert any(h.kind == "relation" and h.value == "Project Atlas" for h in rel)
    assert mem.facts("") == [] and mem.facts("zzzz qqqq") == []


def test_fuzzy_matching_threshold(mem: Memory) -> None:
    graph = mem.graph_engine.graph()
    assert [m.name for m in match_entities("Where does Alise Martin live?", graph)] == ["Alice Martin"]
    assert match_entities("tell me about it", graph) == []
    assert match_entities("Where does Alise Martin live?", graph, threshold=99) == []
    # Lower-case words need a close match, so ordinary words never become names.
    assert match_entities("carlo is here", graph) == []
    assert similarity("alice", "alise") >= 65


def test_private_and_provenance_filters(mem: Memory) -> None:
    graph = mem.graph_engine.graph()
    # Curated files and dated notes (daily log, session archives) are private to direct
    # sessions; undated topic notes are not.
    assert search_facts(graph, "Where does Alice live", include_private=False) == []
    assert search_facts(graph, "Where does Alice live")[0].value == "Lisbon"
    public = search_facts(graph, "which port does the gateway use", include_private=False)
    assert all(not h.private for h in public) and public[0].value == "8443"
    assert all(h.origin in ("owner", "agent") for h in search_facts(graph, "Alice", injectable_only=True))


def test_importance_retention_ranks_expired_entries_last(mem: Memory, ws) -> None:  # type: ignore[no-untyped-def]
    (ws / "memory" / "2026-05-02.md").write_text(
        "## Alice Martin\n- mood: tired <!-- importance: 3 -->\n- [snack] pretzels\n"
    )
    mem.sync()
    graph = mem.graph_engine.graph()
    soon = 1_777_777_777.0  # 2026-05-03: within 7 days of the note
    late = 1_900_000_000.0  # years later
    def by_key(now: float) -> dict[str, object]:
        return {h.key: h for h in search_facts(graph, "Alice Martin mood snack city", now=now, max_results=20)}
    assert by_key(soon)["mood"].retained and by_key(soon)["snack"].retained  # type: ignore[attr-defined]
    hits = search_facts(graph, "Alice Martin mood snack city", now=late, max_results=20)
    expired = [h.key for h in hits if not h.retained]
    assert set(expired) == {"mood", "snack"}
    assert [h.key for h in hits[-2:]] == expired  # ranked after every live entry
    assert next(h for h in hits if h.key == "city").retained  # a plain fact is durable


def test_a_name_in_cyrillic_or_greek_matches_its_latin_spelling() -> None:
    from memmw.graph.model import Entity, Graph
    from memmw.graph.search import match_entities
    from memmw.text.translit import to_latin

    assert to_latin("Дмитрий Волков") == "Dmitrii Volkov"
    assert to_latin("Γιώργος") == "Giorgos"
    assert to_latin("plain ascii, 王芳") == "plain ascii, 王芳"
    graph = Graph(
        entities={
            "dmitri volkov": Entity(key="dmitri volkov", name="Dmitri Volkov", kind="", aliases=("Dima",), citations=(), private=False),
            "giorgos papas": Entity(key="giorgos papas", name="Giorgos Papas", kind="", aliases=(), citations=(), private=False),
        }
    )
    assert [m.key for m in match_entities("Где живёт Дмитрий Волков?", graph)] == ["dmitri volkov"]
    assert [m.key for m in match_entities("Ο Γιώργος Παπάς", graph)] == ["giorgos papas"]


def test_a_one_word_role_in_lower_case_matches_only_as_written() -> None:
    from memmw.graph.model import Entity, Graph
    from memmw.graph.search import match_entities

    graph = Graph(
        entities={"fang": Entity(key="fang", name="Wang Fang", kind="", aliases=("designer",), citations=(), private=False)}
    )
    assert match_entities("What day are design reviews?", graph) == []
    assert [m.key for m in match_entities("ask the designer", graph)] == ["fang"]
