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
sentence in two splits. The test split holds **new combinations**: every test
sentence contains a (noun, adjective) pair that never occurs in training or
validation (e.g. "white cat" -> "chat blanc"), so the model has to compose
what it learned separately.
"""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass
class NounPhrase:
    """One noun phrase, known in both languages, with what agreement needs."""

    english: list[str]
    french: list[str]
    noun: str  # the English singular, e.g. "cat"
    gender: str
    plural: bool
    pair: tuple[str, str] | None  # (noun, adjective), or None without an adjective


def _adjective_forms(adjective: str) -> tuple[tuple[str, ...], bool]:
    if adjective in ADJECTIVES_BEFORE:
        return ADJECTIVES_BEFORE[adjective], True
    return ADJECTIVES_AFTER[adjective], False


def _agree(forms: tuple[str, ...], gender: str, plural: bool) -> str:
    return forms[(2 if plural else 0) + (1 if gender == "f" else 0)]


def _noun_phrase(rng: numpy.random.Generator, determiner: str, allow_adjective: bool = True) -> NounPhrase:
    """``determiner`` is "the", "a" (singular) or "bare" (no article, for "pas de")."""
    en_sg, en_pl, fr_sg, fr_pl, gender = NOUNS[rng.integers(len(NOUNS))]
    plural = determiner == "the" and rng.random() < 0.4
    adjectives = [None] + list(ADJECTIVES_AFTER) + list(ADJECTIVES_BEFORE)
    adjective = adjectives[rng.integers(len(adjectives))] if allow_adjective else None
    en_noun, fr_noun = (en_pl, fr_pl) if plural else (en_sg, fr_sg)

    english = [en_noun] if adjective is None else [adjective, en_noun]
    if adjective is None:
        french = [fr_noun]
    else:
        forms, before = _adjective_forms(adjective)
        fr_adjective = _agree(forms, gender, plural)
        if fr_adjective == "beau" and fr_noun.startswith(_VOWELS):
            fr_adjective = "bel"
        french = [fr_adjective, fr_noun] if before else [fr_noun, fr_adjective]

    if determiner == "the":
        english = ["the"] + english
        french = [("les" if plural else "le" if gender == "m" else "la")] + french
    elif determiner == "a":
        english = [("an" if english[0].startswith(tuple("aeiou")) else "a")] + english
        french = [("un" if gender == "m" else "une")] + french
    return NounPhrase(english, french, en_sg, gender, plural, (en_sg, adjective) if adjective else None)


def _elide(tokens: list[str]) -> list[str]:
    """``le homme`` -> ``l' homme``, ``je aime`` -> ``j' aime``, ... before a vowel or mute h."""
    out = []
    for index, token in enumerate(tokens):
        following = tokens[index + 1] if index + 1 < len(tokens) else ""
        out.append(_ELISIONS[token] if token in _ELISIONS and following.startswith(_VOWELS) else token)
    return out


def _subject(rng: numpy.random.Generator) -> tuple[list[str], list[str], int, bool, NounPhrase | None]:
    """English words, French words, French person index, English third singular, noun phrase."""
    if rng.random() < 0.5:
        en, fr, person, third_singular = PRONOUNS[rng.integers(len(PRONOUNS))]
        return [en], [fr], person, third_singular, None
    phrase = _noun_phrase(rng, "the")
    person = 5 if phrase.plural else 2
    return phrase.english, phrase.french, person, not phrase.plural, phrase


def _sentence(rng: numpy.random.Generator) -> tuple[list[str], list[str], set]:
    """One pair of token lists and the (noun, adjective) pairs it contains."""
    kind = rng.choice(["statement", "negation", "question", "is", "is_not", "where"],
                      p=[0.3, 0.2, 0.15, 0.15, 0.1, 0.1])
    if kind in ("statement", "negation", "question"):
        en_subject, fr_subject, person, third, subject_phrase = _subject(rng)
        en_base, en_third, fr_forms = VERBS[rng.integers(len(VERBS))]
        obj = _noun_phrase(rng, "the" if rng.random() < 0.6 else "a")
        pairs = {p.pair for p in (subject_phrase, obj) if p is not None and p.pair}
        fr_verb = fr_forms[person]
        if kind == "statement":
            english = en_subject + [en_third if third else en_base] + obj.english + ["."]
            french = fr_subject + [fr_verb] + obj.french + ["."]
        elif kind == "negation":
            english = en_subject + ["does" if third else "do", "not", en_base] + obj.english + ["."]
            fr_object = obj.french
            if obj.english[0] in ("a", "an"):  # negated indefinite: "pas de"
                fr_object = ["de"] + obj.french[1:]
            french = fr_subject + ["ne", fr_verb, "pas"] + fr_object + ["."]
        else:
            english = ["does" if third else "do"] + en_subject + [en_base] + obj.english + ["?"]
            french = ["est-ce", "que"] + fr_subject + [fr_verb] + obj.french + ["?"]
        return english, _elide(french), pairs

    phrase = _noun_phrase(rng, "the")
    verb_en = "are" if phrase.plural else "is"
    verb_fr = "sont" if phrase.plural else "est"
    pairs = {phrase.pair} if phrase.pair else set()
    if kind == "where":
        return ["where", verb_en] + phrase.english + ["?"], ["où", verb_fr] + _elide(phrase.french) + ["?"], pairs
    adjectives = list(ADJECTIVES_AFTER) + list(ADJECTIVES_BEFORE)
    adjective = adjectives[rng.integers(len(adjectives))]
    forms, _ = _adjective_forms(adjective)
    predicate = _agree(forms, phrase.gender, phrase.plural)
    pairs.add((phrase.noun, adjective))  # "the cat is white" also pairs cat with white
    if kind == "is":
        english = phrase.english + [verb_en, adjective, "."]
        french = phrase.french + [verb_fr, predicate, "."]
    else:
        english = phrase.english + [verb_en, "not", adjective, "."]
        french = phrase.french + ["ne", verb_fr, "pas", predicate, "."]
    return english, _elide(french), pairs


@dataclass
class Splits:
    """Parallel sentence pairs (English, French), detokenised strings."""

    train: list[tuple[str, str]]
    valid: list[tuple[str, str]]
    test: list[tuple[str, str]]

    def counts(self) -> dict[str, int]:
        return {"train": len(self.train), "valid": len(self.valid), "test": len(self.test)}


def toy_corpus(n_train: int = 12000, n_valid: int = 500, n_test: int = 1000, seed: int = 0) -> Splits:
    """Deterministic splits of distinct pairs; test sentences are new combinations.

    A sentence containing a held-out (noun, adjective) pair can only go to test;
    every other sentence goes to train or validation. Each English sentence
    appears once in the whole corpus, so no source is in two splits.
    """
    from .tokenizer import detokenize

    rng = numpy.random.default_rng(seed)
    seen: set[str] = set()
    novel: list[tuple[str, str]] = []
    familiar: list[tuple[str, str]] = []
    attempts = 0
    while len(novel) < n_test or len(familiar) < n_train + n_valid:
        attempts += 1
        if attempts > 100 * (n_train + n_valid + n_test):
            raise RuntimeError("toy_corpus: the grammar cannot produce that many distinct pairs")
        english, french, pairs = _sentence(rng)
        source = detokenize(english, "en")
        if source in seen:
            continue
        is_novel = bool(pairs & HELD_OUT_PAIRS)
        target = novel if is_novel else familiar
        limit = n_test if is_novel else n_train + n_valid
        if len(target) < limit:
            seen.add(source)
            target.append((source, detokenize(french, "fr")))
    return Splits(train=familiar[:n_train], valid=familiar[n_train:], test=novel)
