"""The fact syntax parser: structured lines, prose recognition, retraction, hostile input."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from memmw.notes.syntax import (
    mask_retracted,
    normalize_key,
    normalize_name,
    parse_note,
    retract_line,
)

NOTE = """# Memory

## Alice Martin (Ali)
- aka: Al, 爱丽丝
- city: Berlin
- city: Lisbon (since 2026-05-01)
- [preference] flat white, no sugar
- works_at [[Acme Corp]]
- email: alice@example.org <!-- importance: 9 -->
- ~~phone: 555-1234~~ (retracted 2026-06-01: wrong number)

## People
- Bob Stone (Bobby): CFO at Acme
- Carol Diaz leads Project Atlas
- Dmitri "Dima" Petrov — our Kyiv contractor
  - timezone: Europe/Kyiv
- we should call them more often

## Decisions
- 2026-03-01: chose Postgres
- Use SQLite for the index <!-- trigger: which database, storage choice -->

```
## Not An Entity
- key: value inside a code fence
```
"""


def facts(note: str, path: str = "MEMORY.md") -> dict[tuple[str, str, str], object]:
    parsed = parse_note(note, path)
    return {(f.entity, f.key, f.value): f for f in parsed.facts}


def test_entity_section_facts_aliases_relations_cite_their_lines() -> None:
    parsed = parse_note(NOTE, "MEMORY.md")
    found = facts(NOTE)
    assert ("Alice Martin", "city", "Berlin") in found
    lisbon = found[("Alice Martin", "city", "Lisbon")]
    assert lisbon.valid_from == "2026-05-01" and lisbon.citation == "MEMORY.md#L6"  # type: ignore[attr-defined]
    assert found[("Alice Martin", "preference", "flat white, no sugar")]
    assert found[("Alice Martin", "email", "alice@example.org")].importance == 9  # type: ignore[attr-defined]
    aliases = {(a.entity, a.alias, a.line) for a in parsed.aliases}
    assert {("Alice Martin", "Ali", 3), ("Alice Martin", "Al", 4), ("Alice Martin", "爱丽丝", 4)} <= aliases
    rels = {(r.subject, r.predicate, r.object, r.line) for r in parsed.relations}
    assert ("Alice Martin", "works_at", "Acme Corp", 8) in rels


def test_retracted_entry_is_parsed_as_retracted_and_masked() -> None:
    parsed = parse_note(NOTE, "MEMORY.md")
    phone = facts(NOTE)[("Alice Martin", "phone", "555-1234")]
    assert phone.retracted  # type: ignore[attr-defined]
    assert parsed.retracted_lines == [10]
    masked = mask_retracted(NOTE).split("\n")
    assert masked[9] == "" and len(masked) == len(NOTE.split("\n"))
    assert "555-1234" not in mask_retracted(NOTE)


def test_prose_bullets_under_a_people_heading() -> None:
    parsed = parse_note(NOTE, "MEMORY.md")
    names = {e.name for e in parsed.entities}
    assert {"Alice Martin", "Bob Stone", "Carol Diaz", "Dmitri Petrov"} <= names
    assert "we should call them more often" not in " ".join(names)
    found = facts(NOTE)
    assert ("Bob Stone", "role", "CFO at Acme") in found
    assert ("Dmitri Petrov", "role", "our Kyiv contractor") in found
    assert ("Dmitri Petrov", "timezone", "Europe/Kyiv") in found  # nested under the person
    aliases = {(a.entity, a.alias) for a in parsed.aliases}
    assert {("Bob Stone", "Bobby"), ("Dmitri Petrov", "Dima")} <= aliases
    rels = {(r.subject, r.predicate, r.object) for r in parsed.relations}
    assert ("Carol Diaz", "leads", "Project Atlas") in rels


def test_generic_headings_code_fences_and_dates_are_not_entities() -> None:
    parsed = parse_note(NOTE, "MEMORY.md")
    names = {e.name for e in parsed.entities} | {f.entity for f in parsed.facts}
    assert "Decisions" not in names and "Not An Entity" not in names and "Memory" not in names
    assert not any(f.key == "2026-03-01" for f in parsed.facts)


def test_triggers() -> None:
    (trig,) = parse_note(NOTE, "MEMORY.md").triggers
    assert trig.phrases == ("which database", "storage choice")
    assert trig.text == "Use SQLite for the index" and trig.line == 21


def test_other_languages_and_heading_importance() -> None:
    note = (
        "## Ngozi Okafor (恩戈齐) <!-- importance: 3 -->\n- stadt: Lagos\n\n"
        "## Personen\n- Jürgen Weiß („Jogi“): Steuerberater\n\n## 人物\n- 王小明（小明）: 设计师\n"
    )
    parsed = parse_note(note, "memory/people.md")
    found = facts(note, "memory/people.md")
    assert found[("Ngozi Okafor", "stadt", "Lagos")].importance == 3  # type: ignore[attr-defined]
    aliases = {(a.entity, a.alias) for a in parsed.aliases}
    assert ("Ngozi Okafor", "恩戈齐") in aliases and ("Jürgen Weiß", "Jogi") in aliases
    assert ("Jürgen Weiß", "role", "Steuerberater") in found
    assert ("王小明", "小明") in aliases and ("王小明", "role", "设计师") in found


def test_retract_line_is_visible_and_keeps_carriers() -> None:
    line = "  - city: Berlin <!-- importance: 7 -->"
    out = retract_line(line, day="2026-06-01", reason="moved (to Lisbon)")
    assert out == "  - ~~city: Berlin~~ (retracted 2026-06-01: moved [to Lisbon]) <!-- importance: 7 -->"
    parsed = parse_note("## Alice\n" + out + "\n", "MEMORY.md")
    assert parsed.facts[0].retracted and parsed.facts[0].importance == 7
    for bad in ("no bullet here", out):
        try:
            retract_line(bad, day="2026-06-01")
        except ValueError:
            continue
        raise AssertionError(f"{bad!r} was retracted")


def test_normalisation() -> None:
    assert normalize_name("  **Alice   MARTIN** ") == "alice martin"
    assert normalize_key("Home-City") == normalize_key("home_city") == "home_city"


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=400))
def test_parser_never_raises_and_cites_real_lines(text: str) -> None:
    parsed = parse_note(text, "memory/x.md")
    n = len(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"))
    for row in (*parsed.facts, *parsed.relations, *parsed.aliases, *parsed.entities, *parsed.triggers):
        assert 1 <= row.line <= n
    assert len(mask_retracted(text).split("\n")) == len(text.split("\n"))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["## Bob", "- city: X", "- aka: Y", "## People", "- Ann (A): r", "  - k: v", "- ~~k: v~~ (retracted 2026-01-01)", "text", "```"]), max_size=30))
def test_parser_on_structured_fragments(lines: list[str]) -> None:
    parsed = parse_note("\n".join(lines), "MEMORY.md")
    for f in parsed.facts:
        assert f.entity and f.key and f.value


def test_keys_with_colons_and_observations_flagged() -> None:
    parsed = parse_note("## Priya\n- 1:1 day: Wednesday\n- [preference] tea\n- [preference] jazz\n", "m.md")
    assert [(f.key, f.value, f.observation) for f in parsed.facts] == [
        ("1:1 day", "Wednesday", False),
        ("preference", "tea", True),
        ("preference", "jazz", True),
    ]


def test_transcript_like_bullets_are_not_observations() -> None:
    note = "# conv-26 - session 1\n\n- [D1:1] Caroline: Hey Mel!\n- [x] done task\n- [ ] open: task\n- [open question] who pays\n"
    parsed = parse_note(note, "memory/2023-05-08-session-1.md")
    assert [(f.key, f.value) for f in parsed.facts] == [("open question", "who pays")]


def test_person_subheadings_under_a_people_heading() -> None:
    note = "## People\n- Bob Stone (Bobby): CFO\n\n### Alice Martin\n- city: Lisbon\n- Carol Diaz leads Atlas\n"
    parsed = parse_note(note, "MEMORY.md")
    found = {(f.entity, f.key, f.value) for f in parsed.facts}
    assert ("Alice Martin", "city", "Lisbon") in found and ("Bob Stone", "role", "CFO") in found
    # Under a person's own heading, prose bullets are still read as people lines.
    assert ("Carol Diaz", "leads", "Atlas") in {(r.subject, r.predicate, r.object) for r in parsed.relations}


PROSE_PEOPLE = """## People
- Dmitri Volkov (Dima) — our CTO and co-founder. Based in Lisbon since 2024.
- Katharina Braun, the Berlin office lead. Everyone calls her Kat.
- 王芳 (Fang, goes by Fiona in English emails) — designer in the Shanghai studio.
- Priyanka Nair ("Pri") from Lakeside Ventures, our board observer.
- Ben Okafor — my partner. Firefighter, works 24h shifts.

## Projects
- Harbor: the data pipeline rebuild. The Berlin team calls it "Hafen".
"""


def test_names_people_write_in_prose_become_aliases() -> None:
    aliases = {(a.entity, a.alias) for a in parse_note(PROSE_PEOPLE, "MEMORY.md").aliases}
    assert {
        ("Dmitri Volkov", "Dima"),
        ("Dmitri Volkov", "CTO"),
        ("Katharina Braun", "Kat"),
        ("Katharina Braun", "Berlin office lead"),
        ("王芳", "Fang"),
        ("王芳", "Fiona"),
        ("王芳", "designer"),
        ("Priyanka Nair", "Pri"),
        ("Priyanka Nair", "board observer"),
        ("Ben Okafor", "my partner"),
        ("Harbor", "Hafen"),
        ("Harbor", "data pipeline rebuild"),
    } <= aliases
    # No sentence fragments: an alias is a name or a short role.
    assert not any(len(alias.split()) > 4 for _entity, alias in aliases)
    assert ("王芳", "goes by Fiona in English emails") not in aliases


@given(st.text(max_size=80))
@settings(max_examples=200, deadline=None)
def test_role_alias_is_a_short_phrase_or_nothing(text: str) -> None:
    from memmw.notes.syntax import role_alias

    alias = role_alias(text)
    assert alias is None or (1 <= len(alias.split()) <= 4 and not any(c.isdigit() for c in alias))
