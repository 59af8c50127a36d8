"""The embedded English -> French corpus: a small grammar with real French phenomena.

Every sentence pair comes from templates over a hand-written lexicon, so the
corpus ships with the package, needs no download, and is the same on every
machine for a given seed. What a model must learn to translate it:

* **gender and number agreement**: articles ``le / la / l' / les``, ``un / une``,
  and adjectives (``noir / noire / noirs / noires``, ``blanc / blanche``);
* **adjective position**: most adjectives follow the noun (``le chat noir``),
  but ``petit``, ``grand`` and ``beau`` precede it (``la petite maison``), and
  ``beau`` becomes ``bel`` before a vowel (``le bel oiseau``);
* **present-tense conjugation** by person and number (``je vois``,
  ``nous voyons``, ``ils voient``; ``avoir``, ``vouloir``);
* **negation** ``ne ... pas`` (``n'`` before a vowel), and ``pas de`` for a
  negated indefinite object (``je ne mange pas de pomme``);
* **questions**: ``est-ce que`` (``est-ce qu'il``) and ``où est / où sont``;
* **elision**: ``l'homme``, ``j'aime``, ``n'a``, ``d'oiseau``, ``qu'elle``;
  and English ``a / an``.

``toy_corpus()`` returns train, validation and test splits with no source
sentence in two splits, and for every pair its **gold word alignment**
(``Splits.alignments``): which English tokens each French token comes from,
known because the grammar built both sentences (see ``Alignment``). The test split holds **new combinations**: every test
sentence contains a (noun, adjective) pair that never occurs in training or
validation (e.g. "white cat" -> "chat blanc"), so the model has to compose
what it learned separately.
"""

from __future__ import annotations

import bisect
import functools
import types
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy

# (English singular, English plural, French singular, French plural, gender)
NOUNS = [
    ("cat", "cats", "chat", "chats", "m"),
    ("dog", "dogs", "chien", "chiens", "m"),
    ("bird", "birds", "oiseau", "oiseaux", "m"),
    ("man", "men", "homme", "hommes", "m"),
    ("boy", "boys", "garçon", "garçons", "m"),
    ("book", "books", "livre", "livres", "m"),
    ("tree", "trees", "arbre", "arbres", "m"),
    ("horse", "horses", "cheval", "chevaux", "m"),
    ("house", "houses", "maison", "maisons", "f"),
    ("car", "cars", "voiture", "voitures", "f"),
    ("girl", "girls", "fille", "filles", "f"),
    ("woman", "women", "femme", "femmes", "f"),
    ("apple", "apples", "pomme", "pommes", "f"),
    ("table", "tables", "table", "tables", "f"),
    ("flower", "flowers", "fleur", "fleurs", "f"),
]

# English -> French (masculine singular, feminine singular, masculine plural, feminine plural)
ADJECTIVES_AFTER = {
    "black": ("noir", "noire", "noirs", "noires"),
    "white": ("blanc", "blanche", "blancs", "blanches"),
    "red": ("rouge", "rouge", "rouges", "rouges"),
    "green": ("vert", "verte", "verts", "vertes"),
    "blue": ("bleu", "bleue", "bleus", "bleues"),
}
ADJECTIVES_BEFORE = {
    "small": ("petit", "petite", "petits", "petites"),
    "big": ("grand", "grande", "grands", "grandes"),
    "beautiful": ("beau", "belle", "beaux", "belles"),
}

# English base form, English third person singular, French forms for
# je, tu, il/elle, nous, vous, ils/elles
VERBS = [
    ("eat", "eats", ("mange", "manges", "mange", "mangeons", "mangez", "mangent")),
    ("see", "sees", ("vois", "vois", "voit", "voyons", "voyez", "voient")),
    ("like", "likes", ("aime", "aimes", "aime", "aimons", "aimez", "aiment")),
    ("have", "has", ("ai", "as", "a", "avons", "avez", "ont")),
    ("watch", "watches", ("regarde", "regardes", "regarde", "regardons", "regardez", "regardent")),
    ("find", "finds", ("trouve", "trouves", "trouve", "trouvons", "trouvez", "trouvent")),
    ("want", "wants", ("veux", "veux", "veut", "voulons", "voulez", "veulent")),
]
# English pronoun, French pronoun, person index into the French forms, English is third singular
PRONOUNS = [
    ("i", "je", 0, False),
    ("you", "vous", 4, False),
    ("he", "il", 2, True),
    ("she", "elle", 2, True),
    ("we", "nous", 3, False),
    ("they", "ils", 5, False),
]
TO_BE = {0: "suis", 2: "est", 3: "sommes", 4: "êtes", 5: "sont"}

# (English noun, English adjective) pairs kept out of training: test sentences are made of them.
HELD_OUT_PAIRS = {
    ("cat", "white"), ("dog", "green"), ("bird", "red"), ("man", "small"),
    ("house", "black"), ("car", "beautiful"), ("girl", "blue"), ("apple", "big"),
    ("horse", "white"), ("flower", "black"), ("tree", "beautiful"), ("woman", "green"),
}

_VOWELS = tuple("aeiouyéèêàâîôûh")
_ELISIONS = {"le": "l'", "la": "l'", "de": "d'", "je": "j'", "ne": "n'", "que": "qu'"}


@dataclass(frozen=True)
class Alignment:
    """The gold word alignment of one sentence pair, as token indices ``(english, french)``.

    Indices count the tokens of ``tokenize(english, "en")`` and ``tokenize(french, "fr")``.
    Following Och and Ney (2003), ``sure`` links are unambiguous (``cat``-``chat``, and both
    ``ne`` and ``pas`` from ``not``) and ``possible`` links (a superset of ``sure``) are
    defensible too: the auxiliary ``do``/``does`` of a negation also links to ``ne``, the verb
    and ``pas``, since French has no word of its own for it. Every French token has at least
    one sure link.
    """

    sure: frozenset[tuple[int, int]]
    possible: frozenset[tuple[int, int]]

    def to_json(self) -> dict:
        """``{"sure": [[e, f], ...], "possible": [...]}``, sorted: how a run folder stores it."""
        return {"sure": sorted(map(list, self.sure)), "possible": sorted(map(list, self.possible))}

    @classmethod
    def from_json(cls, document: dict) -> "Alignment":
        """The inverse of ``to_json``."""
        return cls(sure=frozenset(map(tuple, document["sure"])), possible=frozenset(map(tuple, document["possible"])))

    def sources_of(self, french_index: int, sure_only: bool = True) -> list[int]:
        """The English token indices that French token ``french_index`` comes from, in order."""
        links = self.sure if sure_only else self.possible
        return sorted(e for e, f in links if f == french_index)


# A piece of a sentence pair: English words, French words, links (english, french, sure).
_Piece = tuple[list[str], list[str], list[tuple[int, int, bool]]]


def _one_to_one(english: list[str], french: list[str]) -> _Piece:
    """Two lists of the same length, word i translating word i."""
    return english, french, [(i, i, True) for i in range(len(english))]


def _join(*pieces: _Piece) -> _Piece:
    """Concatenate pieces, shifting each one's links by the words before it."""
    english: list[str] = []
    french: list[str] = []
    links: list[tuple[int, int, bool]] = []
    for piece_english, piece_french, piece_links in pieces:
        links += [(e + len(english), f + len(french), sure) for e, f, sure in piece_links]
        english, french = english + piece_english, french + piece_french
    return english, french, links


def _alignment(links: list[tuple[int, int, bool]]) -> Alignment:
    sure = frozenset((e, f) for e, f, is_sure in links if is_sure)
    return Alignment(sure=sure, possible=sure | frozenset((e, f) for e, f, _ in links))


@dataclass
class NounPhrase:
    """One noun phrase, known in both languages, with what agreement needs, and its links
    ``(english index, french index, sure)`` within the phrase."""

    english: list[str]
    french: list[str]
    noun: str  # the English singular, e.g. "cat"
    gender: str
    plural: bool
    pair: tuple[str, str] | None  # (noun, adjective), or None without an adjective
    links: list[tuple[int, int, bool]]

    def piece(self) -> _Piece:
        return self.english, self.french, self.links


def _adjective_forms(adjective: str) -> tuple[tuple[str, ...], bool]:
    if adjective in ADJECTIVES_BEFORE:
        return ADJECTIVES_BEFORE[adjective], True
    return ADJECTIVES_AFTER[adjective], False


def _agree(forms: tuple[str, ...], gender: str, plural: bool) -> str:
    return forms[(2 if plural else 0) + (1 if gender == "f" else 0)]


def noun_phrase(noun: str, adjective: str | None = None, determiner: str = "the", plural: bool = False) -> NounPhrase:
    """The noun phrase of English singular ``noun`` (``"cat"``) in both languages, with its links.

    ``determiner``: ``"the"``, ``"a"`` (singular only) or ``"bare"`` (no article, for "pas de").
    """
    try:
        en_sg, en_pl, fr_sg, fr_pl, gender = next(entry for entry in NOUNS if entry[0] == noun)
    except StopIteration:
        raise ValueError(f"noun_phrase: unknown noun {noun!r}") from None
    en_noun, fr_noun = (en_pl, fr_pl) if plural else (en_sg, fr_sg)
    english = [en_noun] if adjective is None else [adjective, en_noun]
    if adjective is None:
        french, links = [fr_noun], [(0, 0, True)]
    else:
        forms, before = _adjective_forms(adjective)
        fr_adjective = _agree(forms, gender, plural)
        if fr_adjective == "beau" and fr_noun.startswith(_VOWELS):
            fr_adjective = "bel"
        if before:  # "the small house" -> "la petite maison": in order
            french, links = [fr_adjective, fr_noun], [(0, 0, True), (1, 1, True)]
        else:  # "the black cat" -> "le chat noir": the links cross
            french, links = [fr_noun, fr_adjective], [(0, 1, True), (1, 0, True)]

    if determiner in ("the", "a"):
        if determiner == "the":
            english = ["the"] + english
            french = [("les" if plural else "le" if gender == "m" else "la")] + french
        else:
            english = [("an" if english[0].startswith(tuple("aeiou")) else "a")] + english
            french = [("un" if gender == "m" else "une")] + french
        links = [(0, 0, True)] + [(e + 1, f + 1, sure) for e, f, sure in links]
    return NounPhrase(english, french, en_sg, gender, plural, (en_sg, adjective) if adjective else None, links)


def _elide(tokens: list[str]) -> list[str]:
    """``le homme`` -> ``l' homme``, ``je aime`` -> ``j' aime``, ... before a vowel or mute h."""
    out = []
    for index, token in enumerate(tokens):
        following = tokens[index + 1] if index + 1 < len(tokens) else ""
        out.append(_ELISIONS[token] if token in _ELISIONS and following.startswith(_VOWELS) else token)
    return out


def _subject_piece(subject: str | NounPhrase) -> tuple[_Piece, int, bool]:
    """A pronoun (``"she"``) or a noun phrase: its words and links, the French person index, and
    whether English conjugates it in the third person singular."""
    if isinstance(subject, NounPhrase):
        return subject.piece(), 5 if subject.plural else 2, not subject.plural
    try:
        en, fr, person, third_singular = next(entry for entry in PRONOUNS if entry[0] == subject)
    except StopIteration:
        raise ValueError(f"sentence_pair: unknown pronoun {subject!r}") from None
    return _one_to_one([en], [fr]), person, third_singular


# "does not eat" -> "ne mange pas": "not" gives both "ne" and "pas" (sure), the verb gives the
# verb (sure), and the auxiliary, which French does not write, may link to all three (possible).
_NEGATED_VERB_LINKS = [(1, 0, True), (1, 2, True), (2, 1, True), (0, 0, False), (0, 1, False), (0, 2, False)]
KINDS = ("statement", "negation", "question", "is", "is_not", "where")


def sentence_pair(kind: str, subject: str | NounPhrase, verb: str | None = None, obj: NounPhrase | None = None,
                  adjective: str | None = None) -> tuple[list[str], list[str], Alignment]:
    """One sentence pair of the grammar as token lists, and its gold alignment.

    ``kind``: ``"statement"`` (she eats the apple.), ``"negation"`` (she does not eat the apple.) or
    ``"question"`` (does she eat the apple?), which take a ``subject`` (a pronoun or a
    ``noun_phrase``), an English ``verb`` (base form) and an object ``obj``; ``"is"`` (the cat is
    white.) and ``"is_not"``, which take a noun-phrase subject and an ``adjective``; ``"where"``
    (where is the cat?), which takes a noun-phrase subject.
    """
    if kind in ("statement", "negation", "question"):
        subject_words, person, third = _subject_piece(subject)
        try:
            en_base, en_third, fr_forms = next(entry for entry in VERBS if entry[0] == verb)
        except StopIteration:
            raise ValueError(f"sentence_pair: unknown verb {verb!r}") from None
        fr_verb = fr_forms[person]
        auxiliary = "does" if third else "do"
        if kind == "statement":
            english, french, links = _join(subject_words, _one_to_one([en_third if third else en_base], [fr_verb]),
                                           obj.piece(), _one_to_one(["."], ["."]))
        elif kind == "negation":
            fr_object = obj.french
            if obj.english[0] in ("a", "an"):  # negated indefinite: "pas de", "de" from "a"
                fr_object = ["de"] + obj.french[1:]
            negated = ([auxiliary, "not", en_base], ["ne", fr_verb, "pas"], _NEGATED_VERB_LINKS)
            english, french, links = _join(subject_words, negated, (obj.english, fr_object, obj.links),
                                           _one_to_one(["."], ["."]))
        else:  # "does he eat ...?" -> "est-ce qu'il mange ...?": the auxiliary asks the question
            question = ([auxiliary], ["est-ce", "que"], [(0, 0, True), (0, 1, True)])
            english, french, links = _join(question, subject_words, _one_to_one([en_base], [fr_verb]),
                                           obj.piece(), _one_to_one(["?"], ["?"]))
        return english, _elide(french), _alignment(links)
    if kind not in KINDS:
        raise ValueError(f"sentence_pair: kind must be one of {KINDS}, got {kind!r}")
    verb_en = "are" if subject.plural else "is"
    verb_fr = "sont" if subject.plural else "est"
    if kind == "where":
        english, french, links = _join(_one_to_one(["where", verb_en], ["où", verb_fr]), subject.piece(),
                                       _one_to_one(["?"], ["?"]))
        return english, _elide(french), _alignment(links)
    forms, _ = _adjective_forms(adjective)
    predicate = _agree(forms, subject.gender, subject.plural)
    if kind == "is":
        predicate_words = _one_to_one([verb_en, adjective], [verb_fr, predicate])
    else:  # "is not white" -> "n'est pas blanc": "not" gives "ne" and "pas"
        predicate_words = ([verb_en, "not", adjective], ["ne", verb_fr, "pas", predicate],
                           [(0, 1, True), (1, 0, True), (1, 2, True), (2, 3, True)])
    english, french, links = _join(subject.piece(), predicate_words, _one_to_one(["."], ["."]))
    return english, _elide(french), _alignment(links)


# The kinds' probabilities as the cumulative sums ``rng.choice(KINDS, p=...)`` would search: drawing
# one uniform number and searching these gives the same kind from the same generator, 20x faster.
_KIND_CUMULATIVE = (lambda sums: (sums / sums[-1]).tolist())(numpy.cumsum([0.3, 0.2, 0.15, 0.15, 0.1, 0.1]))
_ADJECTIVES = list(ADJECTIVES_AFTER) + list(ADJECTIVES_BEFORE)
_ADJECTIVES_OR_NONE = [None] + _ADJECTIVES

# One draw of the grammar: (kind, subject, verb, object, adjective); a noun phrase is drawn as the
# arguments of ``noun_phrase`` (noun, adjective, determiner, plural), a pronoun as its English word.
_Draw = tuple


def _draw_noun_phrase(rng: numpy.random.Generator, determiner: str) -> tuple:
    """A random noun phrase's arguments: a noun, plural 40% of the time after "the", an adjective or none."""
    noun = NOUNS[rng.integers(len(NOUNS))][0]
    plural = determiner == "the" and rng.random() < 0.4
    return noun, _ADJECTIVES_OR_NONE[rng.integers(len(_ADJECTIVES_OR_NONE))], determiner, plural


def _draw(rng: numpy.random.Generator) -> _Draw:
    """A random sentence of the grammar, as the choices that make it (hashable: equal choices,
    equal sentence)."""
    kind = KINDS[bisect.bisect_right(_KIND_CUMULATIVE, rng.random())]
    if kind in ("statement", "negation", "question"):
        subject = (PRONOUNS[rng.integers(len(PRONOUNS))][0] if rng.random() < 0.5
                   else _draw_noun_phrase(rng, "the"))
        verb = VERBS[rng.integers(len(VERBS))][0]
        return kind, subject, verb, _draw_noun_phrase(rng, "the" if rng.random() < 0.6 else "a"), None
    subject = _draw_noun_phrase(rng, "the")
    adjective = None if kind == "where" else _ADJECTIVES[rng.integers(len(_ADJECTIVES))]
    return kind, subject, None, None, adjective


def _sentence_of(draw: _Draw) -> tuple[list[str], list[str], set, Alignment]:
    """The pair of token lists a draw makes, the (noun, adjective) pairs it contains, and its alignment."""
    kind, subject, verb, obj, adjective = draw
    if not isinstance(subject, str):
        subject = noun_phrase(*subject)
    if obj is not None:
        obj = noun_phrase(*obj)
    pairs = {p.pair for p in (subject, obj) if isinstance(p, NounPhrase) and p.pair}
    if adjective is not None:
        pairs.add((subject.noun, adjective))  # "the cat is white" also pairs cat with white
    english, french, alignment = sentence_pair(kind, subject, verb, obj, adjective)
    return english, french, pairs, alignment


def _sentence(rng: numpy.random.Generator) -> tuple[list[str], list[str], set, Alignment]:
    """A random pair of token lists, the (noun, adjective) pairs it contains, and its alignment."""
    return _sentence_of(_draw(rng))


@dataclass
class Splits:
    """Parallel sentence pairs (English, French), detokenised strings.

    ``alignments``: for the embedded corpus, each split's gold ``Alignment`` per pair, in the
    same order (``alignments["test"][i]`` belongs to ``test[i]``); empty for other data.
    ``long``: pairs longer than the test split's, held out of training to measure long input
    (``npformer train --long-words``); empty otherwise.
    """

    train: list[tuple[str, str]]
    valid: list[tuple[str, str]]
    test: list[tuple[str, str]]
    alignments: dict[str, list[Alignment]] = field(default_factory=dict)
    long: list[tuple[str, str]] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {"train": len(self.train), "valid": len(self.valid), "test": len(self.test)}


def toy_corpus(n_train: int = 12000, n_valid: int = 500, n_test: int = 1000, seed: int = 0) -> Splits:
    """Deterministic splits of distinct pairs; test sentences are new combinations.

    A sentence containing a held-out (noun, adjective) pair can only go to test;
    every other sentence goes to train or validation. Each English sentence
    appears once in the whole corpus, so no source is in two splits.

    The pairs are drawn once per process and set of arguments (about 3 s for the default
    sizes); each call returns new lists, which the caller may change.
    """
    buckets = _toy_rows(n_train, n_valid, n_test, seed)
    return Splits(**{name: [(source, target) for source, target, _ in rows] for name, rows in buckets.items()},
                  alignments={name: [alignment for _, _, alignment in rows] for name, rows in buckets.items()})


@functools.lru_cache(maxsize=4)
def _toy_rows(n_train: int, n_valid: int, n_test: int, seed: int) -> Mapping[str, tuple]:
    """``toy_corpus``'s draw: split name -> (english, french, alignment) rows, all immutable (a
    read-only mapping of tuples of strings and frozen alignments), so the cache can share them."""
    from .tokenizer import detokenize

    rng = numpy.random.default_rng(seed)
    seen: set[str] = set()
    drawn: set[_Draw] = set()  # a draw made before gives a sentence seen before: skipped unbuilt
    novel: list[tuple[str, str, Alignment]] = []
    familiar: list[tuple[str, str, Alignment]] = []
    attempts = 0
    while len(novel) < n_test or len(familiar) < n_train + n_valid:
        attempts += 1
        if attempts > 100 * (n_train + n_valid + n_test):
            raise RuntimeError("toy_corpus: the grammar cannot produce that many distinct pairs")
        draw = _draw(rng)
        if draw in drawn:
            continue
        drawn.add(draw)
        english, french, pairs, alignment = _sentence_of(draw)
        source = detokenize(english, "en")
        if source in seen:
            continue
        is_novel = bool(pairs & HELD_OUT_PAIRS)
        target = novel if is_novel else familiar
        limit = n_test if is_novel else n_train + n_valid
        if len(target) < limit:
            seen.add(source)
            target.append((source, detokenize(french, "fr"), alignment))
    return types.MappingProxyType({"train": tuple(familiar[:n_train]), "valid": tuple(familiar[n_train:]),
                                   "test": tuple(novel)})
