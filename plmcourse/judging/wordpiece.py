"""The check for notebook 07 (inside a real BERT): WordPiece, one word at a time.

check_wordpiece runs the student's `wordpiece(word, vocab, unk="[UNK]", max_chars=100,
lowercase=True)` on words and small vocabularies written out below (never read from a
file: grading depends on no package data), chosen so that every rule of the exercise
decides at least one case: the longest piece wins, "##" marks continuations only, a word
that cannot be covered is [unk] alone (never a partial split), `unk`, `max_chars` and
`lowercase` are obeyed, vocab may be a set, a dict or a list, and words may be empty,
one character or non-ASCII. The answers are compared with plmcourse.data.wordpiece
(hidden=True adds other words and vocabularies), and a wrong answer is matched against
the known mistakes, each a variant of the algorithm with one rule broken (and right on
every case passed before it, so that a coincidence on one case names no wrong rule).

Sealed while the student's function runs: plmcourse.data.wordpiece, every method of the
course's WordPieceTokenizer, and Hugging Face's Python tokenizer entry points when the
notebook loaded them. The tokenizers library's Rust model used directly
(tokenizers.models.WordPiece) is not sealed: the seal sees Python calls and torch
functions only.
"""

import importlib
import sys

from plmcourse.grading import wordpiece as declared
from plmcourse.judging.core import Case, Spec, describe, matches

__all__ = ["check_wordpiece"]

# plmcourse.data's package attribute `wordpiece` is the function (it shadows the module).
course_wordpiece = importlib.import_module("plmcourse.data.wordpiece")

_str = str.__str__  # an exact str, whatever str subclass the student returned
_list_iter = list.__iter__


# ----------------------------------------------------------------------------
# Sealing: the course's WordPiece and, when the notebook loaded one, Hugging Face's.

# (module, attribute path, label); looked up when a check runs, so importing the checks
# never imports transformers, and a library the notebook did not load is not sealed.
LIBRARY_WORDPIECE = [
    ("transformers.models.bert.tokenization_bert_legacy", "WordpieceTokenizer.tokenize",
     "Hugging Face's WordpieceTokenizer.tokenize"),
    ("transformers.models.bert.tokenization_bert_legacy", "BertTokenizerLegacy._tokenize",
     "Hugging Face's BertTokenizer"),
    ("transformers.models.bert.tokenization_bert", "WordpieceTokenizer.tokenize",
     "Hugging Face's WordpieceTokenizer.tokenize"),
    ("transformers.tokenization_utils_base", "PreTrainedTokenizerBase.__call__", "a Hugging Face tokenizer"),
    ("transformers.tokenization_utils_base", "PreTrainedTokenizerBase.encode", "a Hugging Face tokenizer"),
    ("transformers.tokenization_utils_base", "PreTrainedTokenizerBase.tokenize", "a Hugging Face tokenizer"),
    ("transformers.tokenization_utils_tokenizers", "TokenizersBackend.tokenize", "a Hugging Face tokenizer"),
    ("transformers.tokenization_utils_fast", "PreTrainedTokenizerFast.tokenize", "a Hugging Face tokenizer"),
    ("transformers.tokenization_utils", "PreTrainedTokenizer.tokenize", "a Hugging Face tokenizer"),
    ("tokenizers.implementations.base_tokenizer", "BaseTokenizer.encode", "the tokenizers library's encode"),
]

TOKENIZER_CLASSES = ("WordPieceTokenizer", "WordpieceTokenizer")


def _functions_of(cls):
    """(name, plain function) for each method, static method and class method defined in `cls`."""
    for name, member in vars(cls).items():
        if isinstance(member, (staticmethod, classmethod)):
            member = member.__func__
        if callable(member) and hasattr(member, "__code__"):
            yield name, member


def _wordpiece_seal():
    """What wordpiece must not call, looked up now (the course module may gain a class later)."""
    seal = [(course_wordpiece.wordpiece, "plmcourse.data.wordpiece")]
    for class_name in TOKENIZER_CLASSES:
        cls = getattr(course_wordpiece, class_name, None)
        if isinstance(cls, type):
            seal += [(fn, f"plmcourse.data.{class_name}.{name}") for name, fn in _functions_of(cls)]
    for module_name, path, label in LIBRARY_WORDPIECE:
        obj = sys.modules.get(module_name)
        for attribute in path.split("."):
            obj = getattr(obj, attribute, None)
        if obj is not None and hasattr(obj, "__code__"):
            seal.append((obj, label))
    return seal


# ----------------------------------------------------------------------------
# Vocabularies, written out (BERT's own example first: "unaffable" -> un ##aff ##able)

# Uncased. "aff" and "able" are there so that dropping "##" gives another split, not [UNK];
# the single letters, so that taking the shortest piece gives another split too.
AFFABLE = ["un", "##aff", "##able", "aff", "able", "u", "##n", "##a", "##f", "##ff", "##b", "##l", "##e",
           "a", "##s"]
# As a dict, the way a vocab.txt is loaded: piece -> id.
PLAY = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "play": 4, "##ing": 5, "##s": 6, "##ed": 7, "p": 8,
        "##l": 9, "##a": 10, "##y": 11, "playing": 12, "##i": 13, "##n": 14, "##g": 15, "##e": 16, "##d": 17}
# Cased and uncased entries side by side: whether the word is lower-cased decides the split.
CASED = ["Paris", "par", "##is", "P", "p", "##a", "##r", "##i", "##s", "##IS", "É", "é", "##mile", "##MILE"]
# Non-ASCII: accents kept (stripping them belongs to basic tokenization) and CJK characters.
INTERNATIONAL = ["caf", "##é", "ca", "##f", "école", "é", "##cole", "東", "京", "##京", "##都", "naï", "##ve", "n",
                 "##a", "##ï", "##v", "##e"]
HAHA = ["ha", "##ha", "h", "##h", "##a", "##s"]
# "İ".lower() is two characters ("i" and a combining dot): lower-casing can lengthen a word.
DOTTED = ["i\u0307s", "i\u0307", "i", "##\u0307", "##s"]
# Hidden cases only.
TOKEN = ["token", "##ization", "##ize", "##izer", "##r", "##s", "to", "##ken", "t", "##o", "##k", "##e", "##n",
         "##i", "##z", "##a", "##t", "##on", "##iz", "Token", "##IZE"]
ZURICH = {"zü": 0, "##rich": 1, "z": 2, "##ü": 3, "##r": 4, "##i": 5, "##c": 6, "##h": 7, "zürich": 8, "Zü": 9,
          "北": 10, "##京": 11, "北京": 12, "京": 13, "##北": 14}


def _as(kind, pieces):
    """A fresh vocab of the given kind (each case gets its own, so that one case cannot change another's)."""
    if kind is dict:
        return dict(pieces) if isinstance(pieces, dict) else {p: i for i, p in enumerate(pieces)}
    return kind(pieces)


def _short(text, limit=24):
    return repr(text) if len(text) <= limit else f"{text[:12]!r}... ({len(text)} characters)"


def _show(pieces):
    """A list of pieces for a message, shortened when long."""
    text = repr(pieces)
    if len(text) <= 90:
        return text
    return repr(pieces[:4])[:-1] + f", ...] ({len(pieces)} pieces)"


def _wp_case(word, pieces, kind=set, **kwargs):
    vocab = _as(kind, pieces)
    shown = sorted(vocab)
    label = f"word={_short(word)}, vocab a {kind.__name__} of {len(vocab)} pieces {shown}"
    label += "".join(f", {name}={value!r}" for name, value in kwargs.items())
    data = {"word": word, "vocab": _as(kind, pieces), "kind": kind, "unk": kwargs.get("unk", "[UNK]"),
            "max_chars": kwargs.get("max_chars", 100), "lowercase": kwargs.get("lowercase", True)}
    return Case(label, (word, vocab), kwargs, data=data)


def _wordpiece_cases(hidden):
    cases = [
        _wp_case("unaffable", AFFABLE),                           # longest match, "##" on continuations
        _wp_case("playing", PLAY, dict),                          # the word itself is in the vocab
        _wp_case("plays", PLAY, dict, max_chars=5),               # exactly max_chars: split
        _wp_case("played", PLAY, dict, max_chars=5),              # max_chars + 1: [UNK]
        _wp_case("unaffable", AFFABLE, list, max_chars=9),        # exactly max_chars again
        _wp_case("unaffables", AFFABLE, max_chars=9),             # one more: [UNK]
        _wp_case("xunaffable", AFFABLE),                          # uncoverable at the start
        _wp_case("unxable", AFFABLE),                             # ... in the middle
        _wp_case("unaffablex", AFFABLE),                          # ... at the end
        _wp_case("unaffablex", AFFABLE, unk="<unk>"),             # a custom unk
        _wp_case("UnQ", AFFABLE, list, unk="<UNK>"),              # an upper-case unk is returned as passed
        _wp_case("UnAffable", AFFABLE),                           # lowercase=True (the default) folds
        _wp_case("Paris", CASED, list, lowercase=True),           # folded: par ##is
        _wp_case("Paris", CASED, list, lowercase=False),          # not folded: Paris
        _wp_case("", AFFABLE),                                    # empty word
        _wp_case("a", AFFABLE),                                   # one character
        _wp_case("q", AFFABLE),                                   # one character, not in the vocab
        _wp_case("Café", INTERNATIONAL),                          # accents
        _wp_case("東京都", INTERNATIONAL, max_chars=4),           # CJK; max_chars counts characters
        _wp_case("ÉCOLE", INTERNATIONAL, list),                   # non-ASCII lower-casing
        _wp_case("ha" * 50 + "s", HAHA),                          # 101 characters, default max_chars
        _wp_case("İs", DOTTED, max_chars=2),                      # 2 characters, 3 once lower-cased: [UNK]
    ]
    if hidden:
        cases += [
            _wp_case("tokenization", TOKEN),
            _wp_case("Tokenizer", TOKEN, dict),
            _wp_case("Tokenizer", TOKEN, list, lowercase=False),
            _wp_case("TokenIZE", TOKEN, lowercase=False),
            _wp_case("tokenization", TOKEN, list, max_chars=12),
            _wp_case("tokenizations", TOKEN, max_chars=12),
            _wp_case("tokenqs", TOKEN, unk="[unk]"),
            _wp_case("QTOKEN", TOKEN, dict, unk="[OOV]"),
            _wp_case("x" * 13, TOKEN, list, max_chars=12, unk="[LONG]"),
            _wp_case("qtoken", TOKEN, dict, unk="<?>"),
            _wp_case("tokenq", TOKEN, list),
            _wp_case("tokenizations", TOKEN, dict, unk="<long>", max_chars=10),
            _wp_case("Zürich", ZURICH, dict),
            _wp_case("Zürich", ZURICH, dict, lowercase=False),
            _wp_case("北京", ZURICH, list),
            _wp_case("北北京", ZURICH, max_chars=3),
            _wp_case("Émile", CASED, lowercase=False),
            _wp_case("ÉMILE", CASED, list, lowercase=False),
            _wp_case("PARIS", CASED, lowercase=False, unk="?"),
            _wp_case("", TOKEN, list, lowercase=False, unk="<unk>", max_chars=0),
            _wp_case("t", TOKEN, dict, max_chars=1),
            _wp_case("h", HAHA, max_chars=0),
            _wp_case("ha" * 50, HAHA, list),
            _wp_case("naïve", INTERNATIONAL, dict),
            _wp_case("İs", DOTTED, list, max_chars=3),
            _wp_case("İİs", DOTTED, dict, max_chars=4),
        ]
    return cases


# ----------------------------------------------------------------------------
# Known mistakes: the algorithm with one rule broken


def _variant(d, *, longest=True, continuation="##", shown="##", first="", gap="whole", fold="flag",
             limit="chars", unk=None, empty=None, limit_first=False, fold_unk=False):
    """WordPiece with switches; the defaults give the right answer.

    continuation / shown: the prefix a continuation piece is looked up with / returned with;
    first: the prefix of the first piece; gap: what an uncovered position does ("whole": the
    word is [unk]; "unk-rest": pieces so far + [unk]; "stop": pieces so far; "skip": drop
    that character; "unk-char": [unk] for that character); fold: "flag", "never", "always";
    limit: "chars" (len > max_chars), "ge" (len >= max_chars), "bytes", "none";
    limit_first: the length compared with max_chars before lower-casing; fold_unk: unk lower-cased
    along with the word.
    """
    word, vocab, max_chars = d["word"], d["vocab"], d["max_chars"]
    unk = d["unk"] if unk is None else unk
    if fold_unk and d["lowercase"]:
        unk = unk.lower()
    if limit_first:
        if len(word) > max_chars:
            return [unk]
        limit = "none"  # compared already, before folding
    if fold == "always" or (fold == "flag" and d["lowercase"]):
        word = word.lower()
    if empty is not None and word == "":
        return [unk if empty == "unk" else empty]
    size = len(word.encode("utf-8")) if limit == "bytes" else len(word)
    if (limit in ("chars", "bytes") and size > max_chars) or (limit == "ge" and size >= max_chars):
        return [unk]
    pieces, start = [], 0
    while start < len(word):
        ends = range(len(word), start, -1) if longest else range(start + 1, len(word) + 1)
        prefix = first if start == 0 else continuation
        for end in ends:
            if prefix + word[start:end] in vocab:
                pieces.append((first if start == 0 else shown) + word[start:end])
                start = end
                break
        else:
            if gap == "whole":
                return [unk]
            if gap == "unk-rest":
                return pieces + [unk]
            if gap == "stop":
                return pieces
            if gap == "unk-char":
                pieces.append(unk)
            start += 1
    return pieces


PARTIAL = ("a partial split of a word that cannot be covered: when some position has no piece in the "
           "vocabulary, the whole word becomes [unk] alone")
NO_HASHES = ("continuation pieces without the '##' prefix: a piece that does not start the word is looked up, "
             "and returned, as '##' + piece")
EMPTY = "an empty word giving {}: an empty word has no pieces, []"
UNK_SPELLING = ("[unk] spelled in lower case: [unk] stands for a list holding the unk argument exactly as passed "
                "(['[UNK]'] by default), not the text '[unk]', and it is not lower-cased with the word")

# (description, switches of _variant); a description may come with several variants.
WORDPIECE_MISTAKES = [
    ("the shortest matching piece taken instead of the longest: try the longest candidate first (from the "
     "end of the word) and shorten it one character at a time", {"longest": False}),
    (NO_HASHES, {"continuation": "", "shown": ""}),
    (NO_HASHES, {"shown": ""}),
    ("'##' on the first piece too: only the pieces that continue a word carry '##'", {"first": "##"}),
    (PARTIAL, {"gap": "unk-rest"}),
    (PARTIAL, {"gap": "stop"}),
    (PARTIAL, {"gap": "skip"}),
    (PARTIAL, {"gap": "unk-char"}),
    ("the unk argument ignored: a word that cannot be covered gives [unk], the token passed as unk, not "
     "always '[UNK]'", {"unk": "[UNK]"}),
    (UNK_SPELLING, {"unk": "[unk]"}),
    (UNK_SPELLING, {"fold_unk": True}),
    ("the word not lower-cased although lowercase=True: fold it first (word.lower())", {"fold": "never"}),
    ("the word lower-cased although lowercase=False: fold case only when lowercase is True", {"fold": "always"}),
    ("a word of exactly max_chars characters treated as too long: only a word LONGER than max_chars "
     "(len(word) > max_chars) is [unk]", {"limit": "ge"}),
    ("the length compared with max_chars before lower-casing: fold the word first, then compare (lower() can "
     "lengthen a word: 'İ' becomes two characters)", {"limit_first": True}),
    ("max_chars ignored: a word longer than max_chars characters is [unk] without trying to split it",
     {"limit": "none"}),
    ("max_chars counted in UTF-8 bytes: count characters (len(word))", {"limit": "bytes"}),
    (EMPTY.format("[unk]"), {"empty": "unk"}),
    (EMPTY.format("['']"), {"empty": ""}),
]


def _matching_mistake(got, data, passed):
    """The first known mistake that gives `got` here and the right answer on every case passed before.

    A variant that would have failed an earlier case cannot be what the student wrote:
    that keeps, say, a word left in upper case from being taken for "##" on the first piece
    when both give [UNK] on this case.
    """
    for description, switches in WORDPIECE_MISTAKES:
        try:
            if _variant(data, **switches) == got and all(
                    _variant(before, **switches) == answer for before, answer in passed):
                return description
        except Exception:  # a variant that does not apply to this case
            continue
    return None


# ----------------------------------------------------------------------------
# Judging


def _vocab_changed(case):
    vocab, before = case.args[1], case.data["vocab"]
    if type(vocab) is not type(before):
        return True
    if isinstance(vocab, dict):
        return list(vocab.items()) != list(before.items())
    return vocab != before if isinstance(vocab, set) else list(vocab) != list(before)


def _judge_wordpiece(case, got, expected, passed):
    """None if `got` is `expected`; else the problem. `passed`: (data, answer) of the cases passed so far."""
    if _vocab_changed(case):
        return "your function changed its input vocab; only look pieces up in it (piece in vocab)"
    if isinstance(got, str):
        return (f"your function returned the str {_short(got, 40)}, expected a list of str, one item per piece "
                f"(here {_show(expected)})")
    if not isinstance(got, list):
        return f"your function returned {describe(got)}, expected a list of str, one item per piece"
    items = list(_list_iter(got))
    for index, item in enumerate(items):
        if not isinstance(item, str):
            if isinstance(item, int):
                return (f"item {index} of the result is the int {item}, expected a str (return the pieces "
                        f"themselves, not their ids)")
            return f"item {index} of the result is {describe(item)}, expected a str"
    pieces = [_str(item) for item in items]
    if pieces == expected:
        passed.append((case.data, expected))
        return None
    problem = f"the result is {_show(pieces)}, expected {_show(expected)}"
    return matches(problem, _matching_mistake(pieces, case.data, passed))


def _explain_wordpiece_error(error):
    text = str(error)
    if isinstance(error, (TypeError, AttributeError)) and any(
            kind in text for kind in ("'set' object", "'list' object", "'dict' object")):
        return ("vocab may be a set, a dict or a list: test membership with `piece in vocab`, which works "
                "for all three")
    if isinstance(error, KeyError):
        return "test whether a piece exists with `piece in vocab` before using it"
    if isinstance(error, IndexError):
        return "an empty word gives [] (does the code read word[0] or pieces[-1] when there is none?)"
    if isinstance(error, RecursionError):
        return "a word can have up to max_chars characters; a loop avoids deep recursion"
    return None


def _reference(case):
    d = case.data
    return course_wordpiece.wordpiece(d["word"], d["vocab"], unk=d["unk"], max_chars=d["max_chars"],
                                      lowercase=d["lowercase"])


def _folded(case):
    return case.data["word"].lower() if case.data["lowercase"] else case.data["word"]


check_wordpiece = Spec(
    declared.check_wordpiece,
    cases=_wordpiece_cases,
    reference=_reference,
    judge=lambda case, got, expected, passed: _judge_wordpiece(case, got, expected, passed),
    seal=_wordpiece_seal,
    explain_error=_explain_wordpiece_error,
    memory=list,
    clauses=(
        ("vocab any container of token strings: a set", lambda c: c.data["kind"] is set),
        ("... a dict", lambda c: c.data["kind"] is dict),
        ("... or a list", lambda c: c.data["kind"] is list),
        ("lowercase=True (the default): fold the word to lower case first",
         lambda c: c.data["lowercase"] and c.data["word"] != c.data["word"].lower()),
        ("lowercase=False: leave it as it is", lambda c: not c.data["lowercase"]),
        ("a word longer than max_chars characters is [unk] straight away",
         lambda c: len(_folded(c)) > c.data["max_chars"]),
        ("max_chars not passed: 100", lambda c: "max_chars" not in c.kwargs and len(_folded(c)) > 100),
        ("max_chars counts the characters after lower-casing",
         lambda c: len(c.data["word"]) <= c.data["max_chars"] < len(_folded(c))),
        ("the longest piece in vocab first, with \"##\" in front of every piece but the first",
         lambda c: len(_reference(c)) > 1),
        ("if at some position no piece fits, [unk] alone",
         lambda c: len(_folded(c)) <= c.data["max_chars"] and _reference(c) == [c.data["unk"]]),
        ("unk passed", lambda c: "unk" in c.kwargs),
        ("[unk] is the unk argument as passed: '[UNK]' when not passed, never lower-cased with the word",
         lambda c: "unk" not in c.kwargs and c.data["lowercase"] and _reference(c) == ["[UNK]"]),
        ("... a custom unk in upper case, with lowercase=True",
         lambda c: c.data["unk"] != c.data["unk"].lower() and c.data["lowercase"] and _reference(c) == [c.data["unk"]]),
        ("an empty word gives []", lambda c: c.data["word"] == ""),
    ),
)
