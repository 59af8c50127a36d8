"""The final mark an English sentence typed without one would have had: ``?``, ``!`` or ``.``.

Tatoeba ends every sentence with a mark, so a model trained on it has rarely read a sentence that
stops without one, and people do not type one into a prompt ("I am tired", "what time is it").
Given the sentence's word tokens, ``final_mark`` restores the mark from the order of its words,
the way English marks a question:

* a question word first ("What time is it", "Who's there"), unless a subject follows it at once
  ("What you need is a friend", "When I run, I get sweaty"): that is a statement;
* an auxiliary verb first ("Is it far", "Can you help me"), except ``do`` read as a command
  ("Do it this way") and ``have`` before an article ("Have a nice trip");
* a negative auxiliary first followed by a subject ("Don't you like it"), but not a command
  ("Don't cry");
* a tag at the end ("You're tired, aren't you", "Tom is here, right");

and "What a ..." or "How ..." before an adjective and a subject ("What a relief", "How beautiful she
is") is an exclamation. Anything else is a statement. Only the last sentence of the input counts, and
words such as "so", "and" or an interjection and a comma before it are skipped ("Hey, what was that").

The rule reads word order only, so it is wrong on a question asked as a statement ("You're
leaving?") and on most exclamations ("Stop!"); on the English of Tatoeba's training split it tells
a question from a statement in 99.7% of sentences (``benchmarks/typed_input.py marks`` measures it
on the validation and test splits). ``marks_of`` says whether a training text asks for this at all.
"""

from __future__ import annotations

from typing import Sequence

GUESS = "guess"   # a run's input style "final_mark": the mark ``final_mark`` gives each sentence
QUESTION_WORDS = frozenset("what who whom whose where when why how which".split())
AUXILIARIES = frozenset("do does did is are was were am can could will would shall should may might must "
                        "have has had".split())
NEGATIVE_AUXILIARIES = frozenset({verb + "n't" for verb in AUXILIARIES} | {"can't", "won't", "shan't", "ain't"})
SUBJECTS = frozenset("i you he she it we they there this that tom mary anyone anybody someone somebody everyone "
                     "everybody".split())
OBJECTS_OF_A_COMMAND = frozenset("it this that your as what something so the".split())   # "Do it", "Do your best"
PERSONS = frozenset("i you he she we they".split())              # a subject straight after a question word
HOW_MUCH = frozenset("much many long old far often soon about come".split())   # "How old is he", "How about you" ask
ARTICLES = frozenset("a an the".split())
LEAD_WORDS = frozenset("so and but then oh well just hey ok okay now".split())
TAGS = (("right",), ("ok",), ("okay",), ("eh",), ("huh",))
ENDS = (".", "!", "?", "...", "…")
QUOTES = ('"', "“", "”", "«", "»", "'")


def last_sentence(words: Sequence[str]) -> list[str]:
    """The words (lower-cased, quotes left out) after the last sentence end that is not the final token."""
    words = [word.lower() for word in words if word not in QUOTES]
    while words and words[-1] in ENDS:
        words = words[:-1]
    start = max((index + 1 for index, word in enumerate(words) if word in ENDS), default=0)
    return words[start:]


def _opening(words: list[str]) -> list[str]:
    """The clause that opens the sentence, past lead words ("so", "well,") and a short phrase before
    a comma that neither asks nor commands ("Hey, what was that", "By the way, have you seen him")."""
    while len(words) > 1 and (words[0] in LEAD_WORDS or words[0] == ","):
        words = words[1:]
    if "," in words[1:4] and words[0] not in QUESTION_WORDS | AUXILIARIES | NEGATIVE_AUXILIARIES:
        words = words[words.index(",") + 1:]
    return words


def _has_tag(words: list[str]) -> bool:
    """Whether the sentence ends with a question tag after a comma (", aren't you", ", right")."""
    if "," not in words:
        return False
    tail = tuple(words[len(words) - words[::-1].index(","):])
    if tail in TAGS:
        return True
    return len(tail) in (2, 3) and (tail[0] in AUXILIARIES or tail[0] in NEGATIVE_AUXILIARIES) \
        and tail[-1] in SUBJECTS | {"not"}


def final_mark(words: Sequence[str]) -> str:
    """``"?"``, ``"!"`` or ``"."``: the mark that ends ``words`` (a sentence's tokens, typed without
    a final mark) in written English; see the module docstring."""
    sentence = last_sentence(words)
    if _has_tag(sentence):
        return "?"
    sentence = _opening(sentence)
    if not sentence:
        return "."
    first, second = sentence[0], (sentence[1] if len(sentence) > 1 else "")
    stem = first.split("'")[0]                                              # "what's" -> "what"
    if first == "what" and second in ("a", "an"):
        return "!"                                                          # "What a relief"
    if first == "how" and len(sentence) > 2 and sentence[2] in PERSONS and second not in HOW_MUCH \
            and second not in AUXILIARIES | NEGATIVE_AUXILIARIES:
        return "!"                                                          # "How beautiful she is"
    if first in QUESTION_WORDS and second.split("'")[0] in PERSONS:
        return "."                                                          # "When I'm with you, ..."
    if stem in QUESTION_WORDS:
        return "?"
    if first in AUXILIARIES:
        if first == "do" and second in OBJECTS_OF_A_COMMAND:
            return "."                                                      # "Do it this way"
        if first in ("have", "has") and second in ARTICLES:
            return "."                                                      # "Have a nice trip"
        return "?"
    if first in NEGATIVE_AUXILIARIES:
        return "?" if second in SUBJECTS else "."                           # "Don't you ..." / "Don't cry"
    return "."


def ends_with_a_mark(tokens: Sequence[str]) -> bool:
    """Whether a sentence's tokens end with a sentence end, perhaps inside closing quotes ('He said "Hi."')."""
    for token in reversed(tokens):
        if token not in QUOTES:
            return token in ENDS
    return False


def marks_of(sentences: Sequence[Sequence[str]], share: float = 0.9) -> str | None:
    """A training text's final-mark style, from its English ``sentences`` (each a list of tokens):
    ``GUESS`` when at least ``share`` of them end with ``.``, ``!`` or ``?`` (``ends_with_a_mark``;
    Tatoeba and the embedded corpus: all of them), so that input typed without one gets the mark its
    words ask for; otherwise ``None`` (input is read as typed)."""
    ended = sum(ends_with_a_mark(tokens) for tokens in sentences)
    return GUESS if sentences and ended >= share * len(sentences) else None
