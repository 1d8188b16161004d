"""Store-neutral graph rows: what every store writes for a note, supersession, co-occurrence."""

from __future__ import annotations

from memmw.notes.syntax import parse_note
from memmw.store.graphrows import (
    cooccurrence_matcher,
    current_fact_ids,
    fact_stable_key,
    note_rows,
)

NOTE = "## Alice Martin (Ali)\n- city: Berlin\n- employer: Acme\n"


def test_note_rows_carry_path_keys_and_provenance() -> None:
    rows = note_rows("memory/2026-05-01.md", "memory", parse_note(NOTE, "memory/2026-05-01.md"))
    assert rows.aliases == [("memory/2026-05-01.md", 1, "alice martin", "Ali", "ali")]
    city = next(f for f in rows.facts if f[4] == "city")
    assert city[:7] == ("memory/2026-05-01.md", 2, "alice martin", "Alice Martin", "city", "city", "Berlin")
    assert city[10:12] == ("agent", "interactive")  # a dated note: written by the agent
    assert city[14] == "alice martin\x1fcity"  # one current value per entity and key
    assert city[15] == fact_stable_key("alice martin", "city", "Berlin")


def test_the_newest_dated_value_is_current_and_retracted_ones_never() -> None:
    facts = [
        (1, "alice\x1fcity", None, None, "MEMORY.md", 2, 0),  # undated: oldest
        (2, "alice\x1fcity", "2026-03-01", None, "memory/2026-03-01.md", 2, 0),
        (3, "alice\x1fcity", "2026-05-01", None, "memory/2026-05-01.md", 3, 1),  # retracted
        (4, "bob\x1frole", None, None, "MEMORY.md", 5, 0),
    ]
    assert sorted(current_fact_ids(facts)) == [2, 4]


def test_cooccurrence_pairs_use_names_and_aliases() -> None:
    matcher = cooccurrence_matcher(
        [("alice martin", "Alice Martin"), ("bob stone", "Bob Stone"), ("al", "Al")],
        [("bob stone", "bobby")],
    )
    assert matcher.pairs("Alice Martin met Bobby in Lisbon.") == [("alice martin", "bob stone")]
    assert matcher.pairs("Al and nobody else.") == []  # names under three characters are noise
    other = cooccurrence_matcher([("alice martin", "Alice Martin")], [])
    assert other.signature != matcher.signature


def test_changed_names_are_the_names_added_removed_or_moved_and_only_when_known() -> None:
    from memmw.store.graphrows import changed_names, cooc_names_value

    before = cooccurrence_matcher(
        [("alice martin", "Alice Martin"), ("bob stone", "Bob Stone")], [("alice martin", "ali")]
    )
    after = cooccurrence_matcher(
        [("alice martin", "Alice Martin"), ("carol diaz", "Carol Diaz")], [("carol diaz", "ali")]
    )
    stored = cooc_names_value(before)
    assert changed_names(stored, before.signature, after) == [
        "ali", "bob", "bob stone", "carol", "carol diaz"
    ]
    assert changed_names(stored, before.signature, before) == []
    # Unknown: nothing stored, or a signature written since by software that keeps none.
    assert changed_names(None, before.signature, after) is None
    assert changed_names(stored, "another", after) is None
    assert changed_names("not json", before.signature, after) is None
