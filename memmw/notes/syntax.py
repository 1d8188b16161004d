"""The Markdown fact syntax: a pure parser from note text to cited entity/fact/relation rows.

What people already write is what is parsed (the observation/relation conventions of
Markdown knowledge tools such as Basic Memory, plus plain prose bullets)::

    ## Alice Martin (Ali)              <- a heading is an entity; "(Ali)" is an alias
    - aka: Al, 爱丽丝                   <- more aliases
    - city: Lisbon (since 2026-05-01)   <- a fact; the date orders supersession
    - [preference] flat white, no sugar <- an observation: key "preference"
    - works_at [[Acme Corp]]            <- a relation to another entity
    - email: alice@example.org <!-- importance: 9 -->

    ## People                          <- a container heading: bullets name entities
    - Bob Stone (Bobby): CFO at Acme    <- entity, alias and a "role" fact
    - Carol leads Project Atlas         <- a relation found in prose

Retracted entries (``memmw forget``) stay in the file, struck through and annotated:
``- ~~city: Berlin~~ (retracted 2026-05-01: moved)``. Nothing here reads files or an
index; every row cites the line it came from.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

from memmw.text.chunking import strip_carriers
from memmw.text.lines import split_lines

#: Bump when the parser changes what it extracts: indexes then re-derive the graph.
GRAPH_VERSION = "5"

#: Headings whose bullets each name an entity (people, projects, ...), in several languages.
CONTAINER_HEADINGS: dict[str, str] = {
    **dict.fromkeys(
        (
            "people persons team teams contacts family friends colleagues coworkers "
            "co-workers stakeholders clients customers personen leute kontakte familie "
            "freunde kollegen personnes équipe equipe famille amis collègues collegues "
            "personas equipo familia amigos contactos colegas pessoas amigos 人物 人 联系人 "
            "同事 家人 朋友 人々 連絡先 同僚 사람들 연락처"
        ).split(),
        "role",
    ),
    **dict.fromkeys(
        (
            "projects project repos repositories products services systems tools "
            "organisations organizations companies projekte produkte projets produits "
            "proyectos productos projetos 项目 プロジェクト 프로젝트"
        ).split(),
        "description",
    ),
}
#: Headings that are never entities themselves (structure of a note, not a subject).
GENERIC_HEADINGS = frozenset(
    [
        *(
            "notes note memory memories summary todo todos tasks decisions decision "
            "preferences preference facts log journal misc other questions ideas links "
            "references inbox archive changelog session context identity soul"
        ).split(),
        "conversation summary",
        "open questions",
        "active context",
        "working memory",
    ]
)
#: Relation verbs recognised in prose bullets under a container heading.
PROSE_VERBS = (
    "reports to",
    "works at",
    "works on",
    "works for",
    "is married to",
    "is a member of",
    "belongs to",
    "leads",
    "manages",
    "owns",
    "maintains",
    "runs",
    "founded",
    "mentors",
    "supports",
    "uses",
    "depends on",
)
#: Importance (1..10) of a ``[category] text`` observation without an annotation.
OBSERVATION_IMPORTANCE = 6
ALIAS_KEYS = frozenset(("aka", "alias", "aliases", "also known as", "nickname", "nicknames"))

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)(?:[-*+]|\d+[.)])\s+(.*)$")
_RETRACTED = re.compile(r"^~~(.+?)~~\s*\(retracted\b[^)]*\)\s*$", re.IGNORECASE)
_WIKILINK = re.compile(r"\[\[([^\[\]|#]+)(?:[#|][^\[\]]*)?\]\]")
#: ``[category] text``: the category is words (``[D1:3]`` turn ids and ``[x]`` checkboxes are not).
_OBSERVATION = re.compile(r"^\[([^\W\d_][^\W\d_ -]+(?:[ -][^\W\d_]+){0,3})\]\s+(.+)$")
_KEY_VALUE = re.compile(r"^(\*\*|__)?([^\s:*_](?:[^:]|:(?=\S)){0,39}?)(\*\*|__)?\s*[:：]\s+(.+)$")
_RELATION = re.compile(r"^([A-Za-z_][\w -]{0,39}?)\s+\[\[([^\[\]]+)\]\]\s*$")
_DATE = r"(\d{4}-\d{2}-\d{2})"
_VALID_FROM = re.compile(
    rf"\s*\((?:(?:since|as of|from|seit|depuis|desde|ab)\s+)?{_DATE}\)\s*$", re.IGNORECASE
)
_NAME_WORD = r"[^\W\d_][\w'’.\-]*"
_PROSE_NAME = re.compile(
    rf"^(?:\*\*|\[\[)?(?P<name>{_NAME_WORD}(?:\s+{_NAME_WORD}){{0,3}})(?:\*\*|\]\])?"
    r"(?P<rest>.*)$"
)
_PAREN_ALIAS = re.compile(r"^\s*[(（]\s*(?:aka\s+|a\.k\.a\.\s+)?([^()（）]{1,40}?)\s*[)）]")
_QUOTE_ALIAS = re.compile(r"^\s*[\"“„«‚']([^\"”“»‘’']{1,40})[\"”“»‘’']")
_AKA_INLINE = re.compile(r"\b(?:aka|a\.k\.a\.|also known as)\s+([^,;.()]{1,40})", re.IGNORECASE)
_ONLY_DATE_OR_NUMBER = re.compile(r"^[\d\s./:-]+$")
#: "goes by Fiona", "everyone calls her Kat", "the team calls it \"Hafen\"", "nicknamed Dima".
_CALLED = re.compile(
    r"(?:\bgoes by|\bcalls? (?:her|him|them|it|me)|\bcalled|\bnicknamed|\bknown as"
    r"|\bgenannt|\bnennen (?:sie|ihn|es)|\bdit|\bappelée?|\bllamad[oa])\s+"
    r"[\"“„«‚']?(?P<alias>[^\W\d_][\w'’\-]*(?-i:\s+[A-Z][\w'’\-]*)?)",
    re.IGNORECASE,
)
#: Where a role stops: a clause end or a preposition ("designer in the Shanghai studio").
_ROLE_END = re.compile(
    r"[.;,()（）:\[]|\s(?:and|in|at|from|for|since|with|who|based|until|bei|in|aus|seit|und)\s",
    re.IGNORECASE,
)
#: An apposition naming a role later in the bullet: "..., our board observer."
_APPOSITION = re.compile(r",\s+(?P<role>(?:our|my|the|unser(?:e|er)?)\s+[^\W\d_][^.,;()]{1,40})", re.IGNORECASE)
#: Determiners dropped from a role alias ("our CTO" -> "CTO"); "my" is kept ("my partner":
#: "partner" alone could be anyone's).
_ROLE_DETERMINER = re.compile(r"^(?:our|the|their|unser(?:e|er)?|der|die|das|notre|nuestr[oa])\s+", re.IGNORECASE)
#: Characters a ``key: value`` key never holds.
_KEY_MARKUP = re.compile(r"[\[\]()<>`\"]")


def normalize_name(text: str) -> str:
    """The lookup key of an entity name or alias: NFKC, case-folded, single spaces."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(re.sub(r"[*_`\[\]]", " ", text).split())


def normalize_key(text: str) -> str:
    """The lookup key of a fact key: ``Home City`` and ``home_city`` are the same key."""
    return "_".join(normalize_name(text).replace("-", " ").replace("_", " ").split())


_NOT_FIRST_NAMES = frozenset(
    "project projects team the a an mr mrs ms dr prof sir client company product service "
    "system app new old big small my our".split()
)


def implicit_aliases(names: dict[str, str]) -> dict[str, str]:
    """First names as aliases: ``alice`` for ``Alice Martin`` when no other entity shares it.

    Args:
        names: Entity key -> display name.

    Returns:
        Normalised first name -> entity key (only unambiguous, non-generic ones).
    """
    firsts: dict[str, list[str]] = {}
    for key, name in names.items():
        words = name.split()
        if len(words) < 2 or not words[0][:1].isupper():
            continue
        first = normalize_name(words[0])
        if len(first) >= 3 and first not in _NOT_FIRST_NAMES:
            firsts.setdefault(first, []).append(key)
    return {f: keys[0] for f, keys in firsts.items() if len(keys) == 1 and f not in names}


@dataclass(frozen=True, kw_only=True)
class Row:
    """Where a row came from."""

    path: str
    line: int

    @property
    def citation(self) -> str:
        """``path#L<line>``."""
        return f"{self.path}#L{self.line}"


@dataclass(frozen=True, kw_only=True)
class EntityRow(Row):
    """An entity named by a heading or a prose bullet."""

    name: str
    kind: str = ""

    @property
    def key(self) -> str:
        """Normalised name."""
        return normalize_name(self.name)


@dataclass(frozen=True, kw_only=True)
class FactRow(Row):
    """``entity.key = value`` (a dated value may supersede an older one)."""

    entity: str
    key: str
    value: str
    valid_from: str | None = None
    retracted: bool = False
    importance: int | None = None
    #: ``[category] text`` observations accumulate: they never supersede each other.
    observation: bool = False

    @property
    def entity_key(self) -> str:
        """Normalised entity name."""
        return normalize_name(self.entity)

    @property
    def key_norm(self) -> str:
        """Normalised fact key (the supersession key together with the entity)."""
        return normalize_key(self.key)


@dataclass(frozen=True, kw_only=True)
class RelationRow(Row):
    """``subject --predicate--> object``."""

    subject: str
    predicate: str
    object: str
    retracted: bool = False
    importance: int | None = None


@dataclass(frozen=True, kw_only=True)
class AliasRow(Row):
    """Another name of an entity (nickname, other-language name)."""

    entity: str
    alias: str


@dataclass(frozen=True, kw_only=True)
class TriggerRow(Row):
    """An entry carrying ``<!-- trigger: a, b; c -->`` phrases (recalled when they appear)."""

    phrases: tuple[str, ...]
    text: str
    importance: int | None = None


@dataclass(frozen=True)
class ParsedNote:
    """Everything the parser found in one note."""

    entities: list[EntityRow] = field(default_factory=list)
    facts: list[FactRow] = field(default_factory=list)
    relations: list[RelationRow] = field(default_factory=list)
    aliases: list[AliasRow] = field(default_factory=list)
    triggers: list[TriggerRow] = field(default_factory=list)
    retracted_lines: list[int] = field(default_factory=list)


def _clean(text: str) -> str:
    """Strip emphasis markers and wikilink brackets from a name."""
    text = _WIKILINK.sub(lambda m: m.group(1), text)
    return re.sub(r"(\*\*|__|`)", "", text).strip().strip(":").strip()


def _heading_name(title: str) -> tuple[str, list[str]]:
    """Entity name and aliases of a heading: ``Alice Martin (Ali)``."""
    title = _clean(title)
    aliases: list[str] = []
    m = re.match(r"^(.*?)\s*[(（]([^()（）]{1,60})[)）]\s*$", title)
    if m and m.group(1):
        title = m.group(1).strip()
        aliases = [a.strip() for a in re.split(r"[,;/]", m.group(2)) if a.strip()]
    return title, aliases


def _split_aliases(value: str) -> list[str]:
    parts = re.split(r"\s*[,;、]\s*|\s+/\s+|\s+or\s+", value)
    return [p.strip().strip("\"'“”„«»") for p in parts if p.strip().strip("\"'“”„«»")]


def _called_name(alias: str) -> str:
    """``goes by Fiona in English emails`` -> ``Fiona`` (other aliases unchanged)."""
    m = _CALLED.match(alias)
    return m.group("alias") if m else alias


def role_alias(text: str) -> str | None:
    """The role a prose bullet gives a name, as an alias: ``our CTO and co-founder`` -> ``CTO``.

    The first clause, up to a preposition, without a leading determiner; ``my partner``
    keeps its ``my``. None when that is not a short phrase of words (1-4, no digits).
    """
    head = _ROLE_END.split(f"{text} ", maxsplit=1)[0].strip()
    head = _ROLE_DETERMINER.sub("", head).strip()
    words = head.split()
    if not 1 <= len(words) <= 4 or any(ch.isdigit() for ch in head):
        return None
    if not all(w[:1].isalpha() for w in words) or head.casefold() in ("my",):
        return None
    return head


def _is_alias(text: str) -> bool:
    text = text.strip()
    return bool(text) and len(text) <= 40 and not _ONLY_DATE_OR_NUMBER.match(text)


def _valid_key(key: str) -> bool:
    return (
        _KEY_MARKUP.search(key) is None  # the cheapest test first
        and 0 < len(key.split()) <= 4
        and not key.lower().startswith(("http", "www."))
        and not _ONLY_DATE_OR_NUMBER.match(key)
    )


def _split_value(value: str) -> tuple[str, str | None]:
    """A value and its ``(since YYYY-MM-DD)`` date."""
    m = _VALID_FROM.search(value)
    if m:
        return value[: m.start()].strip(), m.group(1)
    return value.strip(), None


def _is_name(name: str) -> bool:
    """Capitalised words (``Alice Martin``), or a CJK name."""
    words = name.split()
    if not words or len(name) > 60:
        return False
    if all(unicodedata.category(ch) == "Lo" for ch in name.replace(" ", "")):
        return 2 <= len(name.replace(" ", "")) <= 8
    return all(w[0].isupper() or w.lower() in ("van", "von", "de", "da", "del", "le") for w in words)


def _container_kind(title: str) -> str | None:
    key = normalize_name(_clean(title))
    if key in CONTAINER_HEADINGS:
        return CONTAINER_HEADINGS[key]
    last = key.split(" ")[-1] if key else ""
    return CONTAINER_HEADINGS.get(last)


def _is_generic(title: str) -> bool:
    key = normalize_name(title)
    if not key or key in GENERIC_HEADINGS:
        return True
    if re.match(r"^\d{4}-\d{2}-\d{2}", key) or key.startswith(("session:", "session ")):
        return True
    return len(key.split()) > 6


class _Parser:
    def __init__(self, path: str) -> None:
        self.path = path
        self.out = ParsedNote()
        self.section_entity: str | None = None
        self.section_pending: tuple[str, int, list[str]] | None = None
        self.section_importance: int | None = None
        self.container: str | None = None
        self.bullet_entity: tuple[str, int] | None = None  # (name, indent) of a prose entity

    # -- rows ----------------------------------------------------------------------------
    def _entity(self, name: str, line: int, kind: str = "") -> None:
        self.out.entities.append(EntityRow(path=self.path, line=line, name=name, kind=kind))

    def _alias(self, entity: str, alias: str, line: int) -> None:
        if _is_alias(alias) and normalize_name(alias) != normalize_name(entity):
            self.out.aliases.append(AliasRow(path=self.path, line=line, entity=entity, alias=alias))

    def _section(self, line: int) -> str | None:
        """The heading entity, materialised on its first structured line."""
        if self.section_entity is None and self.section_pending is not None:
            name, heading_line, aliases = self.section_pending
            self.section_pending = None
            self.section_entity = name
            self._entity(name, heading_line)
            for alias in aliases:
                self._alias(name, alias, heading_line)
        return self.section_entity

    # -- lines ---------------------------------------------------------------------------
    def heading(self, level: int, title: str, number: int, importance: int | None) -> None:
        self.bullet_entity = None
        self.section_entity = None
        self.section_pending = None
        self.section_importance = importance
        kind = _container_kind(title)
        if kind is not None:
            self.container = kind
            return
        if level <= 2 or self.container is None:
            self.container = None
        name, aliases = _heading_name(title)
        if _is_generic(name):
            return
        self.section_pending = (name, number, aliases)
        if aliases:  # "## Alice Martin (Ali)" is an entity even before any fact
            self._section(number)

    def bullet(self, indent: int, body: str, number: int, importance: int | None) -> None:
        importance = importance if importance is not None else self.section_importance
        retracted = False
        m = _RETRACTED.match(body) if body.startswith("~~") else None
        if m:
            retracted = True
            body = m.group(1).strip()
            self.out.retracted_lines.append(number)
        owner: str | None = None
        if self.bullet_entity is not None and indent > self.bullet_entity[1]:
            owner = self.bullet_entity[0]
        else:
            # A heading entity ("### Alice" even under "## People") owns its entries.
            owner = self.section_pending[0] if self.section_pending else self.section_entity
        if owner is not None and self._structured(owner, body, number, retracted, importance):
            return
        if indent == 0 or self.bullet_entity is None or indent <= self.bullet_entity[1]:
            self.bullet_entity = None
        if self.container is not None and not retracted:
            self._prose(indent, body, number, importance)

    def _structured(
        self, owner: str, body: str, number: int, retracted: bool, importance: int | None
    ) -> bool:
        """A ``key: value``, ``[category] text`` or ``predicate [[Object]]`` line of ``owner``."""
        # Cheap checks first: most bullets are prose and match none of the forms.
        head = body[:48]
        if "[" not in head and ":" not in head and "：" not in head and "[[" not in body:
            return False
        rel = _RELATION.match(body) if "[[" in body else None
        if rel:
            subject = owner if owner != (self.section_pending or ("",))[0] else self._section(number)
            assert subject is not None
            self.out.relations.append(
                RelationRow(
                    path=self.path,
                    line=number,
                    subject=subject,
                    predicate=rel.group(1).strip(),
                    object=_clean(rel.group(2)),
                    retracted=retracted,
                    importance=importance,
                )
            )
            return True
        obs = _OBSERVATION.match(body)
        if obs is None and body.startswith("["):
            return False  # a key would start with "[" ("[D1:3] Anna: ..."), which none may hold
        kv = _KEY_VALUE.match(body) if obs is None else None
        if obs is not None:
            key, value = obs.group(1).strip(), obs.group(2).strip()
            # Observations are softer than facts: kept 30 days unless marked important.
            importance = OBSERVATION_IMPORTANCE if importance is None else importance
        elif kv is not None and _valid_key(kv.group(2).strip()):
            key, value = kv.group(2).strip(), kv.group(4).strip()
        else:
            return False
        entity = owner if owner != (self.section_pending or ("",))[0] else self._section(number)
        assert entity is not None
        if normalize_key(key).replace("_", " ") in ALIAS_KEYS:
            if not retracted:
                for alias in _split_aliases(_clean(value)):
                    self._alias(entity, alias, number)
            return True
        value, valid_from = _split_value(value)
        for link in _WIKILINK.finditer(value):
            self.out.relations.append(
                RelationRow(
                    path=self.path,
                    line=number,
                    subject=entity,
                    predicate=key,
                    object=link.group(1).strip(),
                    retracted=retracted,
                    importance=importance,
                )
            )
        self.out.facts.append(
            FactRow(
                path=self.path,
                line=number,
                entity=entity,
                key=key,
                value=_clean(value) if _WIKILINK.search(value) else value,
                valid_from=valid_from,
                retracted=retracted,
                importance=importance,
                observation=obs is not None,
            )
        )
        return True

    def _prose(self, indent: int, body: str, number: int, importance: int | None) -> None:
        """``Name (nickname): role``, ``Name "nick"``, ``Name leads X`` under a container."""
        m = _PROSE_NAME.match(body)
        if not m:
            return
        name, rest = m.group("name").strip().rstrip("."), m.group("rest")
        verb = None
        # "Carol Diaz leads Atlas": the name stops before a known verb.
        lowered = f" {body.lower()} "
        for candidate in PROSE_VERBS:
            pos = lowered.find(f" {candidate} ")
            if pos > 0:
                head = _clean(body[: pos - 1 + 1].strip())
                if _is_name(head) and len(head.split()) <= 4:
                    name, verb = head, candidate
                    rest = body[pos + len(candidate) :]
                    break
        if verb is None:
            words = name.split()
            # "Alice Martin is ..." or "Alice Martin - ...": keep the capitalised run only.
            keep = []
            for word in words:
                if not (word[0].isupper() or unicodedata.category(word[0]) == "Lo"):
                    break
                keep.append(word)
            if not keep:
                return
            if len(keep) < len(words):
                rest = " " + " ".join(words[len(keep) :]) + rest
            name = " ".join(keep)
        if not _is_name(name) or _is_generic(name):
            return
        aliases: list[str] = []
        while True:
            am = _PAREN_ALIAS.match(rest) or _QUOTE_ALIAS.match(rest)
            if not am:
                break
            inner = am.group(1).strip()
            if _VALID_FROM.fullmatch(f"({inner})") or _ONLY_DATE_OR_NUMBER.match(inner):
                break
            aliases.extend(_split_aliases(inner))
            rest = rest[am.end() :]
            # 'Dmitri "Dima" Petrov': the name goes on after a quoted nickname.
            more = re.match(rf"^\s+((?:{_NAME_WORD}\s*){{1,2}})(?=$|[\s:,(—–-])", rest)
            if more and _is_name(more.group(1).strip()):
                name = f"{name} {more.group(1).strip()}"
                rest = rest[more.end() :]
        aliases.extend(a.strip() for a in _AKA_INLINE.findall(rest))
        aliases = [_called_name(a) for a in aliases]
        aliases.extend(m.group("alias").rstrip(".") for m in _CALLED.finditer(rest))
        self._entity(name, number, kind=self.container or "")
        for alias in aliases:
            self._alias(name, alias, number)
        self.bullet_entity = (name, indent)
        if verb is not None:
            obj = re.split(r"[,;.(]| - | — ", rest.strip(), maxsplit=1)[0].strip()
            obj = _clean(obj)
            if obj:
                self.out.relations.append(
                    RelationRow(
                        path=self.path,
                        line=number,
                        subject=name,
                        predicate=verb,
                        object=obj,
                        importance=importance,
                    )
                )
            return
        role = re.sub(r"^\s*(?:[:：,]|[-–—]\s)\s*", "", rest).strip()
        if role and rest.lstrip()[:1] in (":", "：", "-", "–", "—", ","):
            role_name = role_alias(role)
            if role_name:
                self._alias(name, role_name, number)
            value, valid_from = _split_value(role)
            if value:
                self.out.facts.append(
                    FactRow(
                        path=self.path,
                        line=number,
                        entity=name,
                        key=self.container or "description",
                        value=value,
                        valid_from=valid_from,
                        importance=importance,
                    )
                )
        for found in _APPOSITION.finditer(rest):
            role_name = role_alias(found.group("role"))
            if role_name:
                self._alias(name, role_name, number)

    def trigger(self, raw: str, text: str, number: int, importance: int | None) -> None:
        phrases: list[str] = []
        for m in re.finditer(r"<!--\s*trigger\s*:\s*(.*?)\s*-->", raw, re.IGNORECASE):
            for phrase in re.split(r"[,;]", m.group(1)):
                phrase = " ".join(phrase.split())
                if phrase and phrase.lower() not in (p.lower() for p in phrases):
                    phrases.append(phrase)
        if phrases and text.strip():
            self.out.triggers.append(
                TriggerRow(
                    path=self.path,
                    line=number,
                    phrases=tuple(phrases),
                    text=text.strip(),
                    importance=importance,
                )
            )


def parse_note(text: str, path: str) -> ParsedNote:
    """Parse one Markdown note into cited rows (no I/O; never raises on odd input).

    Args:
        text: The note's content.
        path: Workspace-relative path the rows cite.
    """
    parser = _Parser(path)
    in_fence = False
    for number, raw in enumerate(split_lines(text), start=1):
        # The string tests first: most lines hold no fence or heading, and a regex call
        # per line and pattern was most of the parse.
        if ("```" in raw or "~~~" in raw) and _FENCE.match(raw):
            in_fence = not in_fence
            continue
        if in_fence or not raw.strip():
            continue
        line, importance = strip_carriers(raw)
        if "<!--" in raw and "trigger" in raw.lower():
            parser.trigger(raw, re.sub(r"^\s*(?:[-*+]|\d+[.)])\s+", "", line), number, importance)
        h = _HEADING.match(line) if line.startswith("#") else None
        if h:
            parser.heading(len(h.group(1)), h.group(2), number, importance)
            continue
        b = _BULLET.match(line)
        if b:
            parser.bullet(len(b.group(1).expandtabs(4)), b.group(2).strip(), number, importance)
        elif not line.startswith((" ", "\t")):
            parser.bullet_entity = None
    return parser.out


def mask_retracted(text: str) -> str:
    """``text`` with retracted entries blanked (line numbers kept), so search skips them."""
    if "~~" not in text:
        return text
    out = []
    for raw in split_lines(text):  # the chunker's lines: numbers are kept
        b = _BULLET.match(strip_carriers(raw)[0])
        out.append("" if b and _RETRACTED.match(b.group(2).strip()) else raw)
    return "\n".join(out) + ("\n" if text.endswith(("\n", "\r")) else "")


def retract_line(line: str, *, day: str, reason: str = "") -> str:
    """The retracted form of a bullet line: struck through plus a visible annotation.

    Raises:
        ValueError: the line is not a list entry, or is already retracted.
    """
    b = _BULLET.match(line)
    if not b:
        raise ValueError("only list entries (lines starting with '- ') can be retracted")
    body = b.group(2).strip()
    content, _importance = strip_carriers(body)
    if _RETRACTED.match(content.strip()):
        raise ValueError("the entry is already retracted")
    carriers = body[len(content) :].strip() if body.startswith(content) else ""
    why = " ".join(reason.replace(")", "]").replace("(", "[").split())
    note = f"(retracted {day}{': ' + why if why else ''})"
    prefix = line[: b.start(2)]
    return f"{prefix}~~{content.strip()}~~ {note}" + (f" {carriers}" if carriers else "")
