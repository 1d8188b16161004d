"""Names written in Cyrillic or Greek, read in Latin letters (``Дмитрий`` -> ``Dmitrii``).

A small fixed table (close to the common passport romanisations) so that a name written
in another script can be matched against the Latin spelling a note uses; no model and no
dependency. Other scripts are left as they are.
"""

from __future__ import annotations

_CYRILLIC = {
    "а": "a", "б": "b", "в": "v", "г": "g", "д": "d", "е": "e", "ё": "e", "ж": "zh",
    "з": "z", "и": "i", "й": "i", "к": "k", "л": "l", "м": "m", "н": "n", "о": "o",
    "п": "p", "р": "r", "с": "s", "т": "t", "у": "u", "ф": "f", "х": "kh", "ц": "ts",
    "ч": "ch", "ш": "sh", "щ": "shch", "ъ": "", "ы": "y", "ь": "", "э": "e", "ю": "iu",
    "я": "ia", "і": "i", "ї": "i", "є": "ie", "ґ": "g", "ў": "u", "ј": "j", "љ": "lj",
    "њ": "nj", "ћ": "c", "ђ": "dj", "џ": "dz",
}  # fmt: skip
_GREEK = {
    "α": "a", "β": "v", "γ": "g", "δ": "d", "ε": "e", "ζ": "z", "η": "i", "θ": "th",
    "ι": "i", "κ": "k", "λ": "l", "μ": "m", "ν": "n", "ξ": "x", "ο": "o", "π": "p",
    "ρ": "r", "σ": "s", "ς": "s", "τ": "t", "υ": "y", "φ": "f", "χ": "ch", "ψ": "ps",
    "ω": "o", "ά": "a", "έ": "e", "ή": "i", "ί": "i", "ό": "o", "ύ": "y", "ώ": "o",
    "ϊ": "i", "ϋ": "y", "ΐ": "i", "ΰ": "y",
}  # fmt: skip
_TABLE: dict[str, str] = {**_CYRILLIC, **_GREEK}


def _latin(ch: str) -> str:
    low = ch.lower()
    out = _TABLE.get(low)
    if out is None:
        return ch
    return out.capitalize() if ch != low else out


def to_latin(text: str) -> str:
    """``text`` with its Cyrillic and Greek letters in Latin letters (case kept)."""
    if all(ord(ch) < 0x370 for ch in text):
        return text  # the common case: nothing to do
    return "".join(_latin(ch) for ch in text)
