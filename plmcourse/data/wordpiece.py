"""WordPiece: BERT's tokenizer, in plain Python.

Two stages, as in the original BERT code:

    basic tokenization   clean the text, (lower-case and strip accents for an uncased
                         vocabulary), put spaces around punctuation and CJK characters,
                         split on whitespace  ->  words
    WordPiece            split each word greedily into the longest pieces the
                         vocabulary has; a piece that continues a word is written
                         with "##" in front; a word that cannot be covered is [UNK]

`wordpiece(word, vocab)` is the second stage for one word (the exercise of notebook 07).
`WordPieceTokenizer` is the whole tokenizer: both stages, the special tokens, ids,
pairs of texts, truncation and padded batches. It gives the same tokens and ids as
Hugging Face `tokenizers` (a BertNormalizer, a BertPreTokenizer and a WordPiece model)
on a BERT vocab.txt; tests/test_data_wordpiece.py holds the two side by side.

Characters are classified with Python's `unicodedata` (Unicode 14.0 in Python 3.11).
`tokenizers` classifies them with older tables (Unicode 8.0, of 2015), to which a
character added since is an ordinary letter. Held side by side on every code point
(Python 3.11), the two disagree on about 500 rare characters, all added or re-classified
after Unicode 8.0: about 380 combining marks (Mn, stripped here with the accents, kept
there), about 100 punctuation marks of newer scripts (U+061D, U+2E43 and later: split
off here, not there), 13 format characters (U+0890 ARABIC POUND MARK ABOVE, Egyptian
hieroglyph joiners: removed here, kept there). On every other character they agree.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["wordpiece", "WordPieceTokenizer"]


def wordpiece(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    """Split one word into WordPiece tokens by greedy longest-match-first.

    word: one word, already split off by basic tokenization (no spaces).
    vocab: any container of token strings (set, dict, list); continuation pieces carry "##".
    unk: the token returned, alone, for a word that cannot be covered.
    max_chars: a word longer than this (in characters, after lower-casing) is `[unk]`.
    lowercase: fold the word to lower case first (an uncased vocabulary, like MiniLM's).

    "unaffable" with {"un", "##aff", "##able"} -> ["un", "##aff", "##able"].
    If any position of the word has no piece in the vocabulary, the whole word is
    [unk]: never a partial split. An empty word gives [].
    """
    if lowercase:
        word = word.lower()
    if len(word) > max_chars:  # BERT's guard: very long "words" are URLs, hashes, noise
        return [unk]
    pieces = []
    start = 0
    while start < len(word):
        # Try the longest candidate first and shorten it one character at a time:
        # greedy, so "playing" is "playing" if the vocabulary has it, not "play" "##ing".
        for end in range(len(word), start, -1):
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                pieces.append(piece)
                start = end
                break
        else:  # no piece starts here: the word is unknown as a whole
            return [unk]
    return pieces


# ----------------------------------------------------------------------------
# Basic tokenization: what happens to each character


# The CJK blocks whose characters each become a word of their own (Chinese is written
# without spaces; BERT's vocabulary has one token per common character). The ranges are
# Hugging Face's; Google's original BERT starts the second to last block at 0x2B820
# instead of 0x2B920 (only rare characters of CJK Extension E lie in between).
CJK_RANGES = (
    (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F), (0x2B740, 0x2B81F), (0x2B920, 0x2CEAF), (0x2F800, 0x2FA1F),
)


def is_cjk(char):
    """A CJK ideograph (Chinese characters, also used in Japanese and Korean); not kana, not Hangul."""
    cp = ord(char)
    return any(low <= cp <= high for low, high in CJK_RANGES)


def is_whitespace(char):
    """Spaces of every kind, line and paragraph separators, and \\t \\n \\r."""
    return char in "\t\n\r" or unicodedata.category(char) in ("Zs", "Zl", "Zp")


def is_control(char):
    """Characters that carry no text: controls (Cc), format characters such as the
    zero-width space and the soft hyphen (Cf), private use (Co). \\t \\n \\r are whitespace.

    Unassigned code points (Cn) are kept, as `tokenizers` keeps them: one may be a
    character newer than this Python's Unicode tables (a new emoji), which then
    becomes [UNK] rather than vanish.
    """
    if char in "\t\n\r":
        return False
    return unicodedata.category(char) in ("Cc", "Cf", "Co", "Cs")


def is_punctuation(char):
    """Unicode punctuation (categories P*), and every ASCII symbol: BERT also splits
    off $ + < = > ^ ` | ~, which Unicode calls symbols (S*), not punctuation."""
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


class CharMap(dict):
    """A table for str.translate that fills itself: char_map[ord(c)] = rule(c), computed
    the first time c is met. A text is then rewritten in one linear pass, at C speed,
    and the rule (plain Python) runs once per distinct character, not once per character.
    """

    def __init__(self, rule):
        super().__init__()
        self.rule = rule

    def __missing__(self, cp):
        self[cp] = self.rule(chr(cp))
        return self[cp]


# ----------------------------------------------------------------------------
# The tokenizer


class WordPieceTokenizer:
    """BERT's tokenizer: basic tokenization, WordPiece, special tokens, ids, batches.

    vocab: the tokens in id order (a list, as in vocab.txt) or a dict token -> id.
    lowercase: fold to lower case (an uncased vocabulary, like MiniLM's).
    strip_accents: drop accents ("café" -> "cafe"); None follows `lowercase`, as BERT does.
    tokenize_chinese_chars: make each CJK ideograph a word of its own.
    unk_token ... mask_token: the special tokens; each must be in the vocabulary, and
        each one written in a text ("Paris is the [MASK] of France.") is kept whole.
    max_chars_per_word: a longer word becomes [UNK].

    >>> tok = WordPieceTokenizer.from_file(vocab_path)
    >>> tok.tokenize("Unaffable café!")
    ['una', '##ffa', '##ble', 'cafe', '!']
    >>> tok.encode("Hi!", "Bye.")
    {'input_ids': [101, 7632, 999, 102, 9061, 1012, 102],
     'token_type_ids': [0, 0, 0, 0, 1, 1, 1], 'attention_mask': [1, 1, 1, 1, 1, 1, 1]}
    """

    def __init__(self, vocab, lowercase=True, strip_accents=None, tokenize_chinese_chars=True,
                 unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]",
                 mask_token="[MASK]", max_chars_per_word=100):
        if isinstance(vocab, dict):
            self.vocab = dict(vocab)
        else:
            vocab = list(vocab)
            self.vocab = {token: i for i, token in enumerate(vocab)}
            if len(self.vocab) != len(vocab):
                raise ValueError("the vocabulary lists some token twice")
        self.ids_to_tokens = {i: token for token, i in self.vocab.items()}
        if len(self.ids_to_tokens) != len(self.vocab):
            raise ValueError("the vocabulary gives two tokens the same id")
        self.vocab_size = len(self.vocab)

        self.lowercase = lowercase
        self.strip_accents = lowercase if strip_accents is None else strip_accents
        self.tokenize_chinese_chars = tokenize_chinese_chars
        self.max_chars_per_word = max_chars_per_word

        self.unk_token, self.cls_token, self.sep_token = unk_token, cls_token, sep_token
        self.pad_token, self.mask_token = pad_token, mask_token
        specials = [unk_token, cls_token, sep_token, pad_token, mask_token]
        missing = [token for token in specials if token not in self.vocab]
        if missing:
            raise ValueError(f"special tokens missing from the vocabulary: {missing}")
        self.unk_id, self.cls_id, self.sep_id, self.pad_id, self.mask_id = (self.vocab[t] for t in specials)
        self.special_ids = {self.vocab[t] for t in specials}
        # Longest first, so that of two special tokens starting at the same place the longer wins.
        alternatives = sorted(set(specials), key=len, reverse=True)
        self.special_pattern = re.compile("(" + "|".join(map(re.escape, alternatives)) + ")")

        # The two passes of basic tokenization; they remember the options above, which are
        # therefore fixed: make a new tokenizer rather than change tok.lowercase.
        self.clean_map = CharMap(self.clean_char)
        self.fold_map = CharMap(self.fold_char)

    @classmethod
    def from_file(cls, path, **kwargs):
        """Read a BERT vocab.txt: one token a line, the id of a token is its line number (from 0)."""
        # newline="\n": split lines at \n only; str.splitlines() would also split at
        # \x1c or \u2028, which may be inside tokens. rstrip(), like tokenizers' reader,
        # drops whitespace at the end of a line, a \r of Windows included.
        with open(path, encoding="utf-8", newline="\n") as f:
            tokens = [line.rstrip() for line in f]
        return cls(tokens, **kwargs)

    # --- basic tokenization ----------------------------------------------------

    def clean_char(self, char):
        """The first pass over a text, for one character: "" (drop it), " ", or the text it becomes."""
        if char in "\x00\ufffd" or is_control(char):
            return ""
        if is_whitespace(char):
            return " "
        if self.tokenize_chinese_chars and is_cjk(char):
            return f" {char} "
        return char

    def fold_char(self, char):
        """The second pass, after accents were decomposed (NFD): drop accents, lower-case,
        put spaces around punctuation."""
        if self.strip_accents and unicodedata.category(char) == "Mn":
            return ""  # a combining mark (Mn: "nonspacing"), e.g. the acute of é = e + U+0301
        if self.lowercase:
            # One character at a time, as `tokenizers` does: so "Σ" is always "σ", where
            # Python's str.lower() writes the final form "ς" at the end of a word.
            char = char.lower()
        return "".join(f" {c} " if is_punctuation(c) else c for c in char)

    def basic_tokenize(self, text):
        """Text -> words: clean, lower-case, strip accents, split on whitespace and punctuation.

        The order matters and is BERT's: accents are stripped before lower-casing, and
        punctuation is looked for after both (NFD may reveal some: U+1FEF is "`").
        """
        text = text.translate(self.clean_map)
        if self.strip_accents and not text.isascii():  # ASCII has nothing to decompose
            text = unicodedata.normalize("NFD", text)  # "é" -> "e" + U+0301, the accent alone
        text = text.translate(self.fold_map)
        # No whitespace is left but " ": clean_map made every other kind a space or removed it.
        return text.split()

    def tokenize(self, text):
        """Text -> WordPiece tokens, e.g. "Tokenization!" -> ["token", "##ization", "!"].

        Special tokens written in the text ("[MASK]") are kept whole; everything else goes
        through basic tokenization, then `wordpiece` word by word.
        """
        tokens = []
        # With a capturing group, re.split keeps the separators: odd positions are special tokens.
        for i, part in enumerate(self.special_pattern.split(text)):
            if i % 2 == 1:
                tokens.append(part)
                continue
            for word in self.basic_tokenize(part):
                # lowercase=False: basic tokenization has already folded the case, if asked to.
                tokens += wordpiece(word, self.vocab, self.unk_token, self.max_chars_per_word,
                                    lowercase=False)
        return tokens

    # --- ids ---------------------------------------------------------------------

    def convert_tokens_to_ids(self, tokens):
        """A token -> its id, or a list of tokens -> a list of ids; unknown tokens get unk_id."""
        if isinstance(tokens, str):
            return self.vocab.get(tokens, self.unk_id)
        return [self.vocab.get(token, self.unk_id) for token in tokens]

    def convert_ids_to_tokens(self, ids):
        """An id -> its token, or a list of ids -> a list of tokens (KeyError for an unknown id)."""
        if isinstance(ids, int):
            return self.ids_to_tokens[ids]
        return [self.ids_to_tokens[int(i)] for i in ids]

    def decode(self, ids, skip_special_tokens=True):
        """Ids -> text: "##" pieces glued to the piece before, other tokens separated by a space.

        skip_special_tokens drops [CLS], [SEP], [PAD], [MASK] and [UNK] (as Hugging Face
        does). Lossy: case, accents and the spacing around punctuation do not come back.
        Hugging Face's decode also "cleans up" spaces (" ." -> ".", " do not" -> " don't");
        this one does not.
        """
        if hasattr(ids, "tolist"):  # a tensor or an array
            ids = ids.tolist()
        if skip_special_tokens:
            ids = [i for i in ids if i not in self.special_ids]
        words = []
        for i, token in enumerate(self.convert_ids_to_tokens(ids)):
            if i > 0 and token.startswith("##"):
                words[-1] += token[2:]
            else:  # a leading "##" piece has nothing to join and keeps its "##"
                words.append(token)
        return " ".join(words)

    # --- model inputs -----------------------------------------------------------------

    def truncate(self, a, b, budget):
        """Shorten token lists a and b (b may be None) to at most `budget` tokens together.

        One text: keep its first `budget` tokens. Two: Hugging Face's "longest_first",
        which removes tokens one at a time from the end of the longer list. The result
        in closed form: if the shorter fits in half the budget it stays whole and the
        longer gets the rest; otherwise both get half, and an odd token goes to the
        longer one (to b when they are equally long), as `tokenizers` does.
        """
        if b is None:
            return a[:budget], None
        if len(a) + len(b) <= budget:
            return a, b
        short, long = sorted((len(a), len(b)))
        if short <= budget // 2:
            n_short, n_long = short, budget - short
        else:
            n_short, n_long = budget // 2, budget - budget // 2
        if len(a) > len(b):
            return a[:n_long], b[:n_short]
        return a[:n_short], b[:n_long]

    def encode(self, text, pair=None, max_length=None):
        """One text (or a pair of texts) -> the inputs of BERT, as lists of ints.

        input_ids       [CLS] A [SEP]      or   [CLS] A [SEP] B [SEP]
        token_type_ids  0 for [CLS] A [SEP], 1 for B [SEP] (the segment embedding's index)
        attention_mask  1 for every token (padding, in a batch, gets 0)

        max_length: at most this many tokens, special tokens included (see `truncate`).
        """
        a = self.convert_tokens_to_ids(self.tokenize(text))
        b = None if pair is None else self.convert_tokens_to_ids(self.tokenize(pair))
        if max_length is not None:
            n_special = 2 if b is None else 3
            if max_length < n_special:
                raise ValueError(f"max_length={max_length} leaves no room for the {n_special} special tokens")
            a, b = self.truncate(a, b, max_length - n_special)
        input_ids = [self.cls_id] + a + [self.sep_id]
        token_type_ids = [0] * len(input_ids)
        if b is not None:
            input_ids += b + [self.sep_id]
            token_type_ids += [1] * (len(b) + 1)
        return {"input_ids": input_ids, "token_type_ids": token_type_ids,
                "attention_mask": [1] * len(input_ids)}

    def __call__(self, texts, pairs=None, max_length=None, padding=True, return_tensors=None):
        """A batch of texts (or of pairs: texts[i] with pairs[i]) -> a dict of (B, T) inputs.

        padding: pad every row with [PAD] to the longest row (token type 0, attention_mask
            0 there). False leaves rows of different lengths (only with return_tensors=None).
        return_tensors: None gives lists of lists, attention_mask 1/0;
            "pt" torch tensors, "np" NumPy arrays: ids int64, attention_mask bool, True
            for real tokens (the course's convention, which `plmcourse.nn.Bert` expects).
        A single string is a batch of one.
        """
        if isinstance(texts, str):
            texts = [texts]
            pairs = None if pairs is None else [pairs]
        if pairs is not None and len(pairs) != len(texts):
            raise ValueError(f"{len(texts)} texts but {len(pairs)} pairs")
        rows = [self.encode(text, None if pairs is None else pairs[i], max_length)
                for i, text in enumerate(texts)]
        batch = {key: [row[key] for row in rows] for key in ("input_ids", "token_type_ids", "attention_mask")}
        if padding:
            width = max((len(ids) for ids in batch["input_ids"]), default=0)
            for key, fill in (("input_ids", self.pad_id), ("token_type_ids", 0), ("attention_mask", 0)):
                batch[key] = [row + [fill] * (width - len(row)) for row in batch[key]]
        elif return_tensors is not None:
            raise ValueError("rows of different lengths make no tensor: use padding=True")
        return to_tensors(batch, return_tensors)


def to_tensors(batch, return_tensors):
    """Lists of equal-length rows -> tensors ("pt"), arrays ("np"), or the lists (None)."""
    if return_tensors is None:
        return batch
    if return_tensors == "pt":
        import torch  # only here: the tokenizer itself needs no torch

        as_tensor, int64, boolean = torch.tensor, torch.int64, torch.bool
    elif return_tensors == "np":
        import numpy as np

        as_tensor, int64, boolean = np.array, np.int64, np.bool_
    else:
        raise ValueError(f"return_tensors must be None, 'pt' or 'np', not {return_tensors!r}")
    return {"input_ids": as_tensor(batch["input_ids"], dtype=int64),
            "token_type_ids": as_tensor(batch["token_type_ids"], dtype=int64),
            "attention_mask": as_tensor(batch["attention_mask"], dtype=boolean)}
