"""Questions made from captions by COCO-QA's four rules (Ren, Kiros and Zemel, NIPS 2015), in the VQA v2 layout.

A caption that describes a photo ("a black dog runs through the grass") holds answers to questions about it:

* object:   "what runs through the grass?" -> dog (the subject), "what does the man throw?" -> ball (the object);
* number:   "two children play in the snow" -> "how many children play in the snow?" -> two;
* color:    "a man in a red shirt climbs a rock" -> "what is the color of the shirt?" -> red;
* location: "a dog runs through the grass" -> "where does the dog run?" -> grass.

The rules are deterministic and read only the caption's tokens: closed word classes (determiners, prepositions,
conjunctions, number and colour words) are fixed lists here, every other word's part of speech and base form come
from a `Lexicon` (WordNet through `WordNetLexicon`). A caption is parsed as far as the shape
`[det] modifiers* noun verb-group rest` goes; a question is formed only where its rule's pattern is found whole,
and a caption no rule reads well gives no question (nothing is guessed). Colour questions never ask about people
("a black man"): the answer would be about skin, not about anything the photo's objects are coloured.

`caption_questions` turns one caption into questions; `data.question_sets` makes a question set of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

QUESTION_TYPES: tuple[str, ...] = ("object", "number", "color", "location")

DETERMINERS = frozenset({"a", "an", "the"})
NUMBERS: tuple[str, ...] = ("two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
COLORS = frozenset(
    {"black", "white", "red", "blue", "green", "yellow", "brown", "orange", "pink", "purple", "gray", "grey", "tan"}
)
# where a thing is: the prepositions whose object is a place ("in the water", "through the grass")
LOCATION_PREPOSITIONS = frozenset(
    {"in", "on", "through", "across", "into", "onto", "along", "near", "under", "down", "up", "inside",
     "beside", "around"}
)
# words that end a noun phrase and are never part of one
BOUNDARIES = LOCATION_PREPOSITIONS | frozenset(
    {"over", "behind", "by", "and", "or", "but", "while", "with", "as", "at", "of", "for", "from", "to", "toward",
     "towards", "past", "next", "during", "after", "before", "off", "against", "outside", "out", "among", "between",
     "beneath", "below", "above", "underneath", "alongside", "atop", "like", "that", "who", "which", "where", "is",
     "are", "was", "were", "his", "her", "their", "its", "some", "one", "another", "other", "very", "each", "has",
     "have", "s", "it", "he", "she", "they", "them", "him", "this", "these", "those", "there", "not", "no", "all",
     "only", "just", "back", "away", "together", "then", "so", "if", "than", "too", "also", "about", "via", "upon",
     "own"}
)
PEOPLE = frozenset(
    {"man", "woman", "boy", "girl", "person", "people", "child", "children", "kid", "kids", "men", "women", "boys",
     "girls", "guy", "guys", "lady", "ladies", "baby", "toddler", "player", "players", "skier", "biker", "rider",
     "adult", "adults", "teenager", "teenagers", "gentleman", "female", "male", "crowd", "group", "couple"}
)
# nouns after a location preposition that name a part or a view, not a place ("in front of", "on top of")
NOT_PLACES = frozenset({"front", "top", "side", "middle", "edge", "camera", "picture", "background", "foreground",
                        "distance", "way", "midst", "center", "centre", "bottom", "end", "shape", "form", "air"})
# verbs whose object is no thing to ask about ("takes a rest", "makes a jump", "does a trick")
LIGHT_VERBS = frozenset({"take", "make", "do", "have", "get", "give"})
# verbs whose prepositional phrase says where the subject looks or what it wears, not where it is
NOT_LOCATED = frozenset({"look", "stare", "smile", "point", "wear", "watch", "be", "have", "do", "get"})
IRREGULAR_PLURALS = frozenset({"people", "children", "men", "women", "feet", "teeth", "geese", "mice"})
MAX_MODIFIERS = 3  # adjectives/nouns before a phrase's head ("a small brown dog")
MAX_REST = 10  # words after the verb group that a question repeats


class Lexicon(Protocol):
    """What the rules ask of a dictionary about an open-class word (lower case, one token)."""

    def is_noun(self, word: str) -> bool: ...

    def is_adjective(self, word: str) -> bool: ...

    def noun_base(self, word: str) -> str | None:
        """The singular of a noun ("dogs" -> "dog"), the word itself when singular; None for no noun."""

    def verb_base(self, word: str) -> str | None:
        """The base form of a verb ("runs" -> "run", "running" -> "run"); None for no verb."""

    def names_a_person(self, word: str) -> bool:
        """Whether the noun's first sense is a kind of person ("musician", "skier"; not "dog")."""


class WordNetLexicon:
    """A `Lexicon` from WordNet: a word's parts of speech are those of its synsets, its base form WordNet's
    `morphy`. Takes nltk's WordNet reader (`nltk.corpus.wordnet`, loaded offline by
    `core.training.wordnet.ensure_wordnet`) so that this module needs no install step of its own."""

    def __init__(self, *, wordnet) -> None:
        self._wordnet = wordnet
        self._cache: dict[tuple[str, str], str | None] = {}

    def _base(self, word: str, pos: str) -> str | None:
        key = (word, pos)
        if key not in self._cache:
            self._cache[key] = self._wordnet.morphy(word, pos)
        return self._cache[key]

    def is_noun(self, word: str) -> bool:
        return self._base(word, "n") is not None

    def is_adjective(self, word: str) -> bool:
        return self._base(word, "a") is not None or self._base(word, "s") is not None

    def noun_base(self, word: str) -> str | None:
        return self._base(word, "n")

    def verb_base(self, word: str) -> str | None:
        return self._base(word, "v")

    def names_a_person(self, word: str) -> bool:
        senses = self._wordnet.synsets(word, pos="n")
        person = self._wordnet.synset("person.n.01")
        return bool(senses) and (senses[0] == person or person in senses[0].closure(lambda s: s.hypernyms()))


@dataclass(frozen=True)
class Question:
    """One question formed from a caption, and the one-word answer the caption gives."""

    question: str
    answer: str
    kind: str  # one of QUESTION_TYPES


@dataclass(frozen=True)
class NounPhrase:
    """tokens[start:end] of a caption: an optional determiner (a/an/the or a number word), modifiers, a head noun."""

    start: int
    end: int  # exclusive
    determiner: str | None
    words: tuple[str, ...]  # the modifiers and the head, without the determiner
    plural: bool

    @property
    def head(self) -> str:
        return self.words[-1]

    def definite(self) -> str:
        """The phrase as a question refers back to it: "a black dog" -> "the black dog", "two dogs" -> "the two
        dogs"."""
        number = [self.determiner] if self.determiner in NUMBERS else []
        return " ".join(["the", *number, *self.words])


@dataclass(frozen=True)
class Clause:
    """A caption read as subject, verb group and the words after it.

    `form` is "finite" ("runs", "play"), "progressive" ("is running"), "participle" ("running", no auxiliary)
    or "copula" ("is" followed by a preposition: "a dog is in the water").
    """

    subject: NounPhrase
    form: str
    verb: str  # the verb as the caption has it: "runs", "running" (also for "is running"), "is"
    base: str  # its base form: "run", "be"
    rest: tuple[str, ...]  # the words after the verb group


class CaptionReader:
    """Reads the phrases of a caption with a `Lexicon`; the four rules are its methods' users (`caption_questions`)."""

    def __init__(self, *, lexicon: Lexicon) -> None:
        self.lexicon = lexicon

    def _content(self, word: str) -> bool:
        """A word that can stand in a noun phrase: not a closed-class word, and a noun, adjective or colour."""
        if word in BOUNDARIES or word in DETERMINERS or word in NUMBERS or not word.isalpha():
            return False
        return word in COLORS or self.lexicon.is_noun(word) or self.lexicon.is_adjective(word)

    def _plural(self, word: str) -> bool:
        base = self.lexicon.noun_base(word)
        return word in IRREGULAR_PLURALS or (base is not None and base != word)

    def finite_after(self, words: Sequence[str], plural: bool) -> bool:
        """Whether words[0] reads as the finite verb of a subject of that number ("runs" after "dog", "play" after
        "dogs"), or as "is"/"are"."""
        if not words:
            return False
        word = words[0]
        if word in ("is", "are"):
            return True
        if word in BOUNDARIES or not word.isalpha():
            return False
        base = self.lexicon.verb_base(word)
        if base is None:
            return False
        if plural:
            return base == word
        return word.endswith("s") and base != word

    def participle(self, word: str) -> bool:
        return word.endswith("ing") and word not in BOUNDARIES and self.lexicon.verb_base(word) not in (None, word)

    def noun_phrase(self, tokens: Sequence[str], start: int) -> NounPhrase | None:
        """The noun phrase at tokens[start:], or None: an optional determiner, then the shortest run of noun,
        adjective or colour words whose last word is a noun (not a colour) and which is followed by the caption's
        end, a boundary word or a word that reads as its verb ("a black dog | runs", "a dirt bike | on")."""
        i = start
        determiner = None
        if i < len(tokens) and (tokens[i] in DETERMINERS or tokens[i] in NUMBERS):
            determiner = tokens[i]
            i += 1
        first = i
        while i < len(tokens) and i - first <= MAX_MODIFIERS and self._content(tokens[i]):
            i += 1
            head = tokens[i - 1]
            if head in COLORS or not self.lexicon.is_noun(head):
                continue
            plural = self._plural(head)
            after = tokens[i:]
            if not after or after[0] in BOUNDARIES or self.finite_after(after, plural) or self.participle(after[0]):
                words = tuple(tokens[first:i])
                return NounPhrase(start=start, end=i, determiner=determiner, words=words, plural=plural)
        return None

    def clause(self, tokens: Sequence[str]) -> Clause | None:
        """The caption as subject + verb group + rest, when it begins that way; None otherwise."""
        subject = self.noun_phrase(tokens, 0)
        if subject is None or subject.determiner is None:
            return None
        if subject.plural != (subject.determiner in NUMBERS or (subject.determiner == "the" and subject.plural)):
            return None  # "a dogs", "two dog"
        i = subject.end
        if i >= len(tokens):
            return None
        word = tokens[i]
        if word in ("is", "are"):
            if (word == "are") != subject.plural or i + 1 >= len(tokens):
                return None
            following = tokens[i + 1]
            if self.participle(following):
                base = self.lexicon.verb_base(following)
                return Clause(subject, "progressive", following, base, tuple(tokens[i + 2 :]))
            if following in LOCATION_PREPOSITIONS and (tokens[i + 2 : i + 3] or [""])[0] in DETERMINERS:
                return Clause(subject, "copula", word, "be", tuple(tokens[i + 1 :]))  # "is in the water"
            return None
        if self.participle(word):
            return Clause(subject, "participle", word, self.lexicon.verb_base(word), tuple(tokens[i + 1 :]))
        if self.finite_after(tokens[i:], subject.plural):
            return Clause(subject, "finite", word, self.lexicon.verb_base(word), tuple(tokens[i + 1 :]))
        return None

    def second_verb(self, words: Sequence[str]) -> bool:
        """Whether `words` hold another finite verb ("a man wearing a hat walks down the street": "walks"), the
        sign of a caption whose parts the rules would join wrongly."""
        for i, word in enumerate(words):
            if word in ("is", "are", "was", "were"):
                return True
            if i and self.lexicon.is_noun(words[i - 1]) and self.finite_after(words[i:], self._plural(words[i - 1])):
                return True  # "a hat walks", "blue jeans enjoy"
            after = words[i + 1] if i + 1 < len(words) else ""
            if i and self._content(words[i - 1]) and self.participle(word) and (
                    not after or after in BOUNDARIES or after in DETERMINERS):
                return True  # "wearing brown running in dirt" (but "a rock climbing wall" is one phrase)
        return False


def _ends_phrase(tokens: Sequence[str], end: int) -> bool:
    """Whether a noun phrase ending at `end` is whole: the caption ends there or a boundary word follows
    (but not "of": "the front of the house" is about the house)."""
    return end == len(tokens) or (tokens[end] in BOUNDARIES and tokens[end] != "of")


def _auxiliary(clause: Clause) -> str:
    """The question's verb group for the subject of `clause`: "runs" / "is running" / "play" / "are playing"."""
    be = "are" if clause.subject.plural else "is"
    if clause.form == "copula":
        return be
    if clause.form in ("progressive", "participle"):
        return f"{be} {clause.verb}"
    return clause.verb


def _asked_about(clause: Clause) -> str:
    """The question's subject and verb after "what"/"where": "does the dog run", "is the dog running"."""
    subject = clause.subject.definite()
    be = "are" if clause.subject.plural else "is"
    if clause.form in ("progressive", "participle"):
        return f"{be} {subject} {clause.verb}"
    if clause.form == "copula":
        return f"{be} {subject}"
    does = "do" if clause.subject.plural else "does"
    return f"{does} {subject} {clause.base}"


def caption_questions(tokens: Sequence[str], *, reader: CaptionReader) -> list[Question]:
    """The questions the four rules form from one caption's tokens (lower case), in the order object, number,
    color, location; none when no rule's pattern is found whole."""
    tokens = list(tokens)
    questions: list[Question] = []
    clause = reader.clause(tokens)
    clean = clause is not None and 0 < len(clause.rest) <= MAX_REST and not reader.second_verb(clause.rest)
    if clean:
        questions += _subject_questions(clause)
        questions += _object_questions(clause, reader)
    questions += _color_questions(tokens, reader)
    if clean:
        questions += _location_questions(clause, reader)
    order = {kind: k for k, kind in enumerate(QUESTION_TYPES)}
    return sorted(questions, key=lambda q: order[q.kind])


def _subject_questions(clause: Clause) -> list[Question]:
    """object: "a dog runs through the grass" -> what runs through the grass? (dog);
    number: "two dogs play in the snow" -> how many dogs play in the snow? (two)."""
    subject, rest = clause.subject, " ".join(clause.rest)
    if subject.determiner in DETERMINERS and not subject.plural:
        verb = _auxiliary(clause)
        return [Question(f"what {verb} {rest}?", subject.head, "object")]
    if subject.determiner in NUMBERS:
        asked = f"how many {' '.join(subject.words)} {_auxiliary(clause)} {rest}?"
        return [Question(asked, subject.determiner, "number")]
    return []


def _object_questions(clause: Clause, reader: CaptionReader) -> list[Question]:
    """The verb's object: "a man throws a ball" -> what does the man throw? (ball);
    "a man holds two puppies" -> how many puppies does the man hold? (two)."""
    if clause.form == "copula" or clause.base in LIGHT_VERBS | (NOT_LOCATED - {"wear", "hold", "watch"}):
        return []
    phrase = reader.noun_phrase(clause.rest, 0)
    if phrase is None or phrase.determiner is None or not _ends_phrase(clause.rest, phrase.end):
        return []
    asked = _asked_about(clause)
    if phrase.determiner in NUMBERS and phrase.plural:
        return [Question(f"how many {' '.join(phrase.words)} {asked}?", phrase.determiner, "number")]
    if phrase.determiner in DETERMINERS and not phrase.plural and phrase.head not in PEOPLE:
        return [Question(f"what {asked}?", phrase.head, "object")]
    return []


def _color_questions(tokens: Sequence[str], reader: CaptionReader) -> list[Question]:
    """"a man in a red shirt" -> what is the color of the shirt? (red): one colour word before a phrase's head,
    the head named once in the caption and not a person."""
    questions = []
    for i, word in enumerate(tokens):
        if word not in COLORS or i == 0:
            continue
        before = tokens[i - 1]  # "a red", "small red": not "in black" (a colour as a noun) nor "black and red"
        if before in COLORS or before in BOUNDARIES or reader.participle(before) or not (
                before in DETERMINERS or before in NUMBERS or reader.lexicon.is_adjective(before)):
            continue
        phrase = reader.noun_phrase(tokens, i + 1)
        if phrase is None or phrase.determiner is not None:
            continue
        following = tokens[phrase.end : phrase.end + 1]
        if following and following[0] in ("of", "and", "or"):  # "a red shirt and hat"
            continue
        subject = all(t in DETERMINERS or t in NUMBERS or reader.lexicon.is_adjective(t) for t in tokens[:i])
        after = tokens[phrase.end + 1 : phrase.end + 2]
        if following and not subject and reader.lexicon.is_noun(following[0]) and following[0] not in BOUNDARIES \
                and (not after or after[0] in BOUNDARIES):
            continue  # "in white plastic chairs that": "chairs" may be the phrase's head as well as a verb
        if any(w in COLORS for w in phrase.words) or phrase.head in PEOPLE or tokens.count(phrase.head) > 1:
            continue
        if reader.lexicon.noun_base(phrase.head) in PEOPLE or reader.lexicon.names_a_person(phrase.head):
            continue
        questions.append(Question(f"what is the color of the {phrase.head}?", word, "color"))
    return questions


def _location_questions(clause: Clause, reader: CaptionReader) -> list[Question]:
    """"a dog runs through the grass" -> where does the dog run? (grass): the first place phrase after the verb
    (and its object, if any), the phrase whole, its head a place."""
    if clause.base in NOT_LOCATED and clause.form != "copula":
        return []
    rest = clause.rest
    middle_end = 0
    if rest and rest[0] not in LOCATION_PREPOSITIONS:
        phrase = reader.noun_phrase(rest, 0)
        if phrase is None or phrase.determiner is None or phrase.end >= len(rest):
            return []
        middle_end = phrase.end
    if middle_end >= len(rest) or rest[middle_end] not in LOCATION_PREPOSITIONS:
        return []
    place = reader.noun_phrase(rest, middle_end + 1)
    if place is None or place.determiner not in DETERMINERS or not _ends_phrase(rest, place.end):
        return []
    if place.head in NOT_PLACES or place.head in PEOPLE or place.plural:
        return []
    middle = " ".join(rest[:middle_end])
    asked = f"where {_asked_about(clause)}" + (f" {middle}" if middle else "")
    return [Question(f"{asked}?", place.head, "location")]
