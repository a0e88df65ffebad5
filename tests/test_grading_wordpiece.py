"""plmcourse.judging.wordpiece: right answers pass, every catalogued mistake fails with its hint,
and the check holds up against delegation, monkey-patching and cached answers."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import importlib

import pytest
import torch

# An alias taken before the checks are imported, as a notebook might: sealing must still see it.
from plmcourse.data import wordpiece as early_wordpiece

from mistake_catalogue import catalogue_tests, failure, find_mistake
from mistake_catalogue.wordpiece_mistakes import CATALOGUE, wp_recursive, wp_while
from plmcourse.grading import CheckFailed, check_wordpiece
from plmcourse.judging import wordpiece as checks

course_module = importlib.import_module("plmcourse.data.wordpiece")


def mistake(name):
    return find_mistake(CATALOGUE, "check_wordpiece", name)


# ----------------------------------------------------------------------------
# The catalogue


(test_correct_implementation_passes, test_mistake_fails_with_its_hint,
 test_mistake_also_fails_the_hidden_cases) = catalogue_tests(CATALOGUE)


def test_the_named_mistakes_are_in_the_catalogue():
    names = {name for _, (_, mistakes) in CATALOGUE.items() for name, _, _ in mistakes}
    for named in ("shortest match instead of longest", "missing ##", "## on the first piece too",
                  "partial word: pieces so far and [UNK]", "case not folded", "always folded",
                  "max_chars off by one", "max_chars ignored", "unk argument ignored", "returns a string",
                  "calls the course's version"):
        assert named in names


# ----------------------------------------------------------------------------
# The cases: every rule decides at least one of them


def test_the_visible_cases_cover_every_clause():
    cases = checks._wordpiece_cases(False)
    data = [c.data for c in cases]
    expected = [course_module.wordpiece(d["word"], d["vocab"], unk=d["unk"], max_chars=d["max_chars"],
                                        lowercase=d["lowercase"]) for d in data]
    kinds = {d["kind"] for d in data}
    assert kinds == {set, dict, list}
    assert any(d["word"] == "" for d in data) and any(len(d["word"]) == 1 for d in data)
    assert any(not d["word"].isascii() for d in data)
    assert any("\u4e00" <= ch <= "\u9fff" for d in data for ch in d["word"])  # CJK
    assert any(d["unk"] != "[UNK]" for d in data)
    assert {d["lowercase"] for d in data} == {True, False}
    assert any(d["max_chars"] == 5 for d in data)
    boundary = [d for d in data if len(d["word"]) == d["max_chars"]]
    over = [d for d in data if len(d["word"]) == d["max_chars"] + 1]
    assert boundary and over
    assert any(d["word"] in d["vocab"] for d in data)  # a word that is itself in the vocab
    unknown = [d for d, e in zip(data, expected) if e == [d["unk"]] and len(d["word"]) <= d["max_chars"]]
    where = {("start" if d["word"][0] == "x" else "end" if d["word"].endswith("x") else "middle") for d in unknown
             if "x" in d["word"]}
    assert where == {"start", "middle", "end"}


@pytest.mark.parametrize("hidden", [False, True])
def test_every_known_mistake_is_told_apart_from_the_right_answer_somewhere(hidden):
    """Each variant of the algorithm that breaks one rule fails at least one case."""
    cases = [c.data for c in checks._wordpiece_cases(hidden)]
    for description, switches in checks.WORDPIECE_MISTAKES:
        assert any(checks._variant(d, **switches) != checks._variant(d) for d in cases), description


def test_expected_answers_agree_with_hugging_face():
    legacy = pytest.importorskip("transformers.models.bert.tokenization_bert_legacy")
    for case in checks._wordpiece_cases(True):
        d = case.data
        word = d["word"].lower() if d["lowercase"] else d["word"]
        theirs = legacy.WordpieceTokenizer(d["vocab"], d["unk"], max_input_chars_per_word=d["max_chars"])
        assert theirs.tokenize(word) == course_module.wordpiece(
            d["word"], d["vocab"], unk=d["unk"], max_chars=d["max_chars"], lowercase=d["lowercase"]), case.label


def test_a_mistake_is_named_by_the_rule_it_breaks_not_by_a_coincidence():
    # Left in upper case, "UnAffable" gives [UNK], as "##" on the first piece would; but that
    # variant would have failed "unaffable", which this answer passed.
    message = str(failure(check_wordpiece, mistake("case not folded")))
    assert "not lower-cased although lowercase=True" in message and "first piece" not in message


def test_messages_shorten_long_words_and_long_answers():
    def student(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
        return wp_while(word, vocab, unk, 200 if max_chars == 100 else max_chars, lowercase)

    message = str(failure(check_wordpiece, student))
    assert "(101 characters)" in message and "(51 pieces)" in message and len(message) < 700


# ----------------------------------------------------------------------------
# Sealing


def test_sealing_catches_an_alias_imported_before_the_checks():
    def student(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
        return early_wordpiece(word, vocab, unk, max_chars, lowercase)

    assert "calls plmcourse.data.wordpiece; write it yourself" in str(failure(check_wordpiece, student))


def test_sealing_is_not_fooled_by_try_except():
    def student(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
        try:
            early_wordpiece(word, None, unk, max_chars, lowercase)  # fails: None has no `in`
        except Exception:
            pass
        return wp_while(word, vocab, unk, max_chars, lowercase)

    assert "calls plmcourse.data.wordpiece" in str(failure(check_wordpiece, student))


def test_a_verbatim_copy_of_the_reference_counts_as_calling_it():
    namespace = {}
    exec(compile(open(course_module.__file__).read(), "copied.py", "exec"), namespace)
    assert "calls plmcourse.data.wordpiece" in str(failure(check_wordpiece, namespace["wordpiece"]))


def test_sealing_covers_the_course_tokenizer_class(monkeypatch):
    cls = getattr(course_module, "WordPieceTokenizer", None)
    if cls is None:  # a stand-in, for as long as the course module has no such class
        class WordPieceTokenizer:
            def __init__(self, vocab, lowercase=True):
                self.vocab, self.lowercase = vocab, lowercase

            def tokenize(self, text):
                return wp_while(text, self.vocab, lowercase=self.lowercase)

        cls = WordPieceTokenizer
        monkeypatch.setattr(course_module, "WordPieceTokenizer", cls, raising=False)
    specials = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]
    tokenizer = cls(specials + ["un", "##aff", "##able"])  # built outside, as in an earlier cell

    def student(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
        tokenizer.tokenize(word)
        return wp_while(word, vocab, unk, max_chars, lowercase)

    assert "calls plmcourse.data.WordPieceTokenizer.tokenize" in str(failure(check_wordpiece, student))

    def builds_its_own(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
        try:
            cls(list(vocab) + specials, lowercase=lowercase)
        except Exception:
            pass
        return wp_while(word, vocab, unk, max_chars, lowercase)

    assert "calls plmcourse.data.WordPieceTokenizer.__init__" in str(failure(check_wordpiece, builds_its_own))


def test_sealing_covers_hugging_face_once_it_is_loaded():
    legacy = pytest.importorskip("transformers.models.bert.tokenization_bert_legacy")

    def student(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
        word = word.lower() if lowercase else word
        return legacy.WordpieceTokenizer(vocab, unk, max_chars).tokenize(word)

    assert "calls Hugging Face's WordpieceTokenizer.tokenize" in str(failure(check_wordpiece, student))


def test_the_seal_is_lifted_afterwards():
    with pytest.raises(CheckFailed):
        check_wordpiece(early_wordpiece)
    assert early_wordpiece("unaffable", {"un", "##aff", "##able"}) == ["un", "##aff", "##able"]
    assert not torch.overrides._get_current_function_mode_stack()


# ----------------------------------------------------------------------------
# Tampering and cached answers


def test_a_str_subclass_that_equals_everything_does_not_pass():
    class Everything(str):
        def __eq__(self, other):
            return True

        __hash__ = str.__hash__

    def student(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
        return [Everything("?")]

    assert "the result is ['?']" in str(failure(check_wordpiece, student))


def test_cached_answers_fail_the_hidden_cases():
    seen = {}

    def recorder(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
        answer = wp_recursive(word, vocab, unk, max_chars, lowercase)
        seen[(word, unk, max_chars, lowercase, tuple(sorted(vocab)))] = answer
        return answer

    check_wordpiece(recorder)

    def cached(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
        return seen.get((word, unk, max_chars, lowercase, tuple(sorted(vocab))), [unk])

    check_wordpiece(cached)
    with pytest.raises(CheckFailed):
        check_wordpiece(cached, hidden=True)


def test_an_exception_is_named_and_chained():
    def student(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
        raise ValueError("no vocabulary today")

    error = failure(check_wordpiece, student)
    assert "your function raised ValueError: no vocabulary today" in str(error)
    assert isinstance(error.__cause__, ValueError)


def test_the_verdict_does_not_depend_on_the_string_hash_seed(tmp_path):
    """Vocabularies are sets: the same verdict whatever order Python's hash seed gives them."""
    import os
    import subprocess
    import sys

    script = tmp_path / "run.py"
    script.write_text(
        "import sys; sys.path.insert(0, %r)\n"
        "from mistake_catalogue.wordpiece_mistakes import CATALOGUE\n"
        "from plmcourse.grading import check_wordpiece, CheckFailed\n"
        "for name, fn, _ in CATALOGUE['check_wordpiece'][1][:8]:\n"
        "    try:\n        check_wordpiece(fn, hidden=True)\n"
        "    except CheckFailed as failure:\n        print(failure)\n" % os.path.dirname(__file__))
    outputs = [subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                              env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")]
    assert outputs[0] == outputs[1] and outputs[0].count("check_wordpiece failed") == 8
