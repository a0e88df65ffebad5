"""Right and wrong answers to the WordPiece exercise of notebook 07, as data for tests/test_grading_wordpiece.py.

CORRECT: (name, function) pairs that must pass, written in different styles; MISTAKES:
(name, function, fragment): the check must fail with a message containing `fragment`.
Adding a mistake is one entry.
"""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

from plmcourse.data.wordpiece import wordpiece as course_wordpiece


# ============================================================================
# Correct, in several styles


def wp_while(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    if lowercase:
        word = word.lower()
    if len(word) > max_chars:
        return [unk]
    tokens, start = [], 0
    while start < len(word):
        end, found = len(word), None
        while end > start:
            candidate = word[start:end] if start == 0 else "##" + word[start:end]
            if candidate in vocab:
                found = candidate
                break
            end -= 1
        if found is None:
            return [unk]
        tokens.append(found)
        start = end
    return tokens


def wp_recursive(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    if lowercase:
        word = word.lower()
    if len(word) > max_chars:
        return [unk]

    def split(rest, first):
        if not rest:
            return []
        for end in range(len(rest), 0, -1):
            piece = rest[:end] if first else "##" + rest[:end]
            if piece in vocab:
                tail = split(rest[end:], False)
                return None if tail is None else [piece] + tail
        return None

    pieces = split(word, True)
    return [unk] if pieces is None else pieces


def wp_short_to_long(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    """Tries prefixes from the shortest to the longest, but keeps the longest that matched."""
    text = word.lower() if lowercase else word
    if len(text) > max_chars:
        return [unk]
    out, i = [], 0
    while i < len(text):
        best = None
        for j in range(i + 1, len(text) + 1):
            piece = ("##" if i else "") + text[i:j]
            if piece in vocab:
                best = (piece, j)
        if best is None:
            return [unk]
        out.append(best[0])
        i = best[1]
    return out


def wp_vocab_set(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    """Builds a set of the vocabulary first (a dict gives its keys, a list its items)."""
    known = set(vocab)
    word = word.lower() if lowercase else word
    if len(word) > max_chars:
        return [unk]
    pieces = []
    position = 0
    while position < len(word):
        for end in reversed(range(position + 1, len(word) + 1)):
            piece = word[position:end]
            if position > 0:
                piece = "##" + piece
            if piece in known:
                pieces.append(piece)
                position = end
                break
        else:
            return [unk]
    return pieces


def wp_scan_vocabulary(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    """Looks through the whole vocabulary at each position for the longest piece that fits."""
    if lowercase:
        word = word.lower()
    if len(word) > max_chars:
        return [unk]
    result, at = [], 0
    while at < len(word):
        rest = word[at:]
        fitting = [p for p in vocab if (p.startswith("##") and at > 0 and p[2:] and rest.startswith(p[2:]))
                   or (not p.startswith("##") and at == 0 and p and rest.startswith(p))]
        if not fitting:
            return [unk]
        best = max(fitting, key=len)
        result.append(best)
        at += len(best) - (2 if at > 0 else 0)
    return result


WORDPIECE_CORRECT = [
    ("while loop, longest first", wp_while),
    ("recursive", wp_recursive),
    ("short to long, keeping the longest", wp_short_to_long),
    ("set of the vocabulary first", wp_vocab_set),
    ("scan the vocabulary", wp_scan_vocabulary),
]


# ============================================================================
# Mistakes


def _greedy(word, vocab, *, longest=True, continuation="##", shown="##", first="", on_gap="whole", unk="[UNK]"):
    pieces, start = [], 0
    while start < len(word):
        ends = range(len(word), start, -1) if longest else range(start + 1, len(word) + 1)
        for end in ends:
            lookup = (first if start == 0 else continuation) + word[start:end]
            if lookup in vocab:
                pieces.append((first if start == 0 else shown) + word[start:end])
                start = end
                break
        else:
            if on_gap == "whole":
                return [unk]
            if on_gap == "rest":
                return pieces + [unk]
            if on_gap == "stop":
                return pieces
            start += 1  # "skip": leave the character out
    return pieces


def wp_shortest(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    word = word.lower() if lowercase else word
    return [unk] if len(word) > max_chars else _greedy(word, vocab, longest=False, unk=unk)


def wp_no_hashes(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    word = word.lower() if lowercase else word
    return [unk] if len(word) > max_chars else _greedy(word, vocab, continuation="", shown="", unk=unk)


def wp_hashes_stripped(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    pieces = wp_while(word, vocab, unk, max_chars, lowercase)
    return [p[2:] if p.startswith("##") else p for p in pieces]


def wp_hashes_on_first(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    word = word.lower() if lowercase else word
    return [unk] if len(word) > max_chars else _greedy(word, vocab, first="##", unk=unk)


def wp_partial_rest(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    word = word.lower() if lowercase else word
    return [unk] if len(word) > max_chars else _greedy(word, vocab, on_gap="rest", unk=unk)


def wp_partial_skip(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    word = word.lower() if lowercase else word
    return [unk] if len(word) > max_chars else _greedy(word, vocab, on_gap="skip", unk=unk)


def wp_partial_stop(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    word = word.lower() if lowercase else word
    return [unk] if len(word) > max_chars else _greedy(word, vocab, on_gap="stop", unk=unk)


def wp_never_folds(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    return wp_while(word, vocab, unk, max_chars, lowercase=False)


def wp_always_folds(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    return wp_while(word.lower(), vocab, unk, max_chars, lowercase=False)


def wp_max_chars_off_by_one(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    word = word.lower() if lowercase else word
    if len(word) >= max_chars:
        return [unk]
    return wp_while(word, vocab, unk, max_chars, lowercase=False)


def wp_max_chars_ignored(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    return wp_while(word, vocab, unk, 10 ** 9, lowercase)


def wp_length_before_lower(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    if len(word) > max_chars:  # compared before folding: "İ".lower() is two characters
        return [unk]
    return wp_while(word, vocab, unk, 10 ** 9, lowercase)


def wp_max_chars_in_bytes(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    word = word.lower() if lowercase else word
    if len(word.encode("utf-8")) > max_chars:
        return [unk]
    return wp_while(word, vocab, unk, max_chars, lowercase=False)


def wp_unk_ignored(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    return wp_while(word, vocab, "[UNK]", max_chars, lowercase)


def wp_literal_unk(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    """Reads the spec's [unk] as the text '[unk]'."""
    pieces = wp_while(word, vocab, unk, max_chars, lowercase)
    return ["[unk]"] if pieces == [unk] else pieces


def wp_unk_folded(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    """Lower-cases the unk token along with the word."""
    return wp_while(word, vocab, unk.lower() if lowercase else unk, max_chars, lowercase)


def wp_returns_string(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    return " ".join(wp_while(word, vocab, unk, max_chars, lowercase))


def wp_returns_tuple(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    return tuple(wp_while(word, vocab, unk, max_chars, lowercase))


def wp_empty_is_unk(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    return wp_while(word, vocab, unk, max_chars, lowercase) or [unk]


def wp_returns_ids(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    ids = {piece: i for i, piece in enumerate(sorted(vocab))}
    return [ids.get(piece, -1) for piece in wp_while(word, vocab, unk, max_chars, lowercase)]


def wp_dict_only(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    """Written for a dict vocabulary: vocab.get(piece) fails on a set."""
    word = word.lower() if lowercase else word
    if len(word) > max_chars:
        return [unk]
    pieces, start = [], 0
    while start < len(word):
        for end in range(len(word), start, -1):
            piece = ("##" if start else "") + word[start:end]
            if vocab.get(piece) is not None:
                pieces.append(piece)
                start = end
                break
        else:
            return [unk]
    return pieces


def wp_adds_unk_to_vocab(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    if isinstance(vocab, set):
        vocab.add(unk)
    elif isinstance(vocab, dict):
        vocab.setdefault(unk, len(vocab))
    else:
        vocab.append(unk)
    return wp_while(word, vocab, unk, max_chars, lowercase)


def wp_no_return(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    wp_while(word, vocab, unk, max_chars, lowercase)


def wp_course(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    return course_wordpiece(word, vocab, unk=unk, max_chars=max_chars, lowercase=lowercase)


WORDPIECE_MISTAKES = [
    ("shortest match instead of longest", wp_shortest, "the shortest matching piece taken instead of the longest"),
    ("missing ##", wp_no_hashes, "continuation pieces without the '##' prefix"),
    ("## stripped from the result", wp_hashes_stripped, "continuation pieces without the '##' prefix"),
    ("## on the first piece too", wp_hashes_on_first, "'##' on the first piece too"),
    ("partial word: pieces so far and [UNK]", wp_partial_rest, "a partial split of a word that cannot be covered"),
    ("partial word: unknown character skipped", wp_partial_skip, "a partial split of a word that cannot be covered"),
    ("partial word: stops at the gap", wp_partial_stop, "a partial split of a word that cannot be covered"),
    ("case not folded", wp_never_folds, "not lower-cased although lowercase=True"),
    ("always folded", wp_always_folds, "lower-cased although lowercase=False"),
    ("max_chars off by one", wp_max_chars_off_by_one, "exactly max_chars characters treated as too long"),
    ("max_chars ignored", wp_max_chars_ignored, "max_chars ignored"),
    ("max_chars counted in bytes", wp_max_chars_in_bytes, "max_chars counted in UTF-8 bytes"),
    ("length compared before lower-casing", wp_length_before_lower, "compared with max_chars before lower-casing"),
    ("unk argument ignored", wp_unk_ignored, "the unk argument ignored"),
    ("[unk] returned as the text '[unk]'", wp_literal_unk, "[unk] spelled in lower case"),
    ("unk lower-cased with the word", wp_unk_folded, "[unk] spelled in lower case"),
    ("returns a string", wp_returns_string, "expected a list of str, one item per piece"),
    ("returns a tuple", wp_returns_tuple, "a tuple of 3 items, expected a list of str"),
    ("empty word gives [UNK]", wp_empty_is_unk, "an empty word giving [unk]"),
    ("returns ids", wp_returns_ids, "return the pieces themselves, not their ids"),
    ("vocab.get on a set", wp_dict_only, "test membership with `piece in vocab`"),
    ("adds unk to the vocab", wp_adds_unk_to_vocab, "changed its input vocab"),
    ("forgot return", wp_no_return, "is a `return` missing"),
    ("calls the course's version", wp_course, "calls plmcourse.data.wordpiece; write it yourself"),
]


CATALOGUE = {
    "check_wordpiece": (WORDPIECE_CORRECT, WORDPIECE_MISTAKES),
}
