"""Names that may bind an entity: normalised names and aliases, pronouns never.

A pronoun ("he", "it", "they", "this", 他, 它们...) refers to an entity only through its context;
taken as an alias it would bind every later "he" of the space to one person. So pronouns are never
strong aliases: they are not registered, not looked up, and do not name an entity.
"""

from __future__ import annotations

from collections.abc import Iterable

from graph_ingest.domain.state import normalize_name

_PRONOUN_WORDS = (
    # English: personal, possessive, demonstrative, relative and indefinite
    "i me my mine myself we us our ours ourselves you your yours yourself yourselves "
    "he him his himself she her hers herself it its itself they them their theirs themselves "
    "this that these those who whom whose which someone somebody something "
    # Chinese
    "我 我们 你 你们 您 他 她 它 他们 她们 它们 咱们 这 那 这个 那个 这些 那些 其 该 此 本人"
)
PRONOUNS = frozenset(normalize_name(word) for word in _PRONOUN_WORDS.split())


def is_pronoun(name: str) -> bool:
    return normalize_name(name) in PRONOUNS


def strong_names(name: str, aliases: Iterable[str] = ()) -> tuple[str, ...]:
    """The normalised keys that bind an entity: its name's, then its aliases', in order, without
    repeats, blanks or pronouns."""
    keys = (normalize_name(n) for n in (name, *aliases))
    return tuple(dict.fromkeys(k for k in keys if k and k not in PRONOUNS))


__all__ = ["PRONOUNS", "is_pronoun", "strong_names"]
