"""Fresh student-style implementations for notebook 07 (inside a real BERT):
wordpiece (plain Python), mean_pool (PyTorch)."""
import numpy as np
import torch


# ---- wordpiece -------------------------------------------------------------
def wordpiece_shortest_first(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    """WRONG: tries the pieces from shortest to longest, so the shortest piece in vocab wins."""
    if lowercase:
        word = word.lower()
    if len(word) > max_chars:
        return [unk]
    pieces, start = [], 0
    while start < len(word):
        for end in range(start + 1, len(word) + 1):
            piece = ("##" if start else "") + word[start:end]
            if piece in vocab:
                break
        else:
            return [unk]
        pieces.append(piece)
        start = end
    return pieces


def wordpiece_no_hashes(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    """WRONG: looks continuation pieces up (and returns them) without the '##' prefix."""
    if lowercase:
        word = word.lower()
    if len(word) > max_chars:
        return [unk]
    pieces, start = [], 0
    while start < len(word):
        for end in range(len(word), start, -1):
            if word[start:end] in vocab:
                break
        else:
            return [unk]
        pieces.append(word[start:end])
        start = end
    return pieces


def wordpiece_partial_unk(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    """WRONG: when nothing fits, keeps the pieces found so far and appends unk (half a word survives)."""
    if lowercase:
        word = word.lower()
    if len(word) > max_chars:
        return [unk]
    pieces, start = [], 0
    while start < len(word):
        for end in range(len(word), start, -1):
            piece = ("##" if start else "") + word[start:end]
            if piece in vocab:
                break
        else:
            pieces.append(unk)
            break
        pieces.append(piece)
        start = end
    return pieces


def wordpiece_length_off_by_one(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    """WRONG: uses len(word) >= max_chars, so a word of exactly max_chars characters becomes unk."""
    if lowercase:
        word = word.lower()
    if len(word) >= max_chars:
        return [unk]
    pieces, start = [], 0
    while start < len(word):
        for end in range(len(word), start, -1):
            piece = ("##" if start else "") + word[start:end]
            if piece in vocab:
                break
        else:
            return [unk]
        pieces.append(piece)
        start = end
    return pieces




def wordpiece_hardcoded_unk(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    """WRONG: returns the literal '[UNK]' instead of the unk argument; also [UNK] for an empty word."""
    if lowercase:
        word = word.lower()
    if len(word) > max_chars:
        return ["[UNK]"]
    pieces, start = [], 0
    while start < len(word):
        for end in range(len(word), start, -1):
            piece = ("##" if start else "") + word[start:end]
            if piece in vocab:
                break
        else:
            return ["[UNK]"]
        pieces.append(piece)
        start = end
    return pieces or ["[UNK]"]


def wordpiece_length_before_lowercase(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    """WRONG: checks the length before lower-casing; lower() can make a word longer (e.g. 'İ' -> 'i̇')."""
    if len(word) > max_chars:
        return [unk]
    if lowercase:
        word = word.lower()
    pieces, start = [], 0
    while start < len(word):
        for end in range(len(word), start, -1):
            piece = ("##" if start else "") + word[start:end]
            if piece in vocab:
                break
        else:
            return [unk]
        pieces.append(piece)
        start = end
    return pieces


def wordpiece_recursive(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    """CORRECT: greedy longest match written recursively on the rest of the word."""
    if lowercase:
        word = word.lower()
    if len(word) > max_chars:
        return [unk]

    def split(rest, prefix):
        if not rest:
            return []
        for end in range(len(rest), 0, -1):
            piece = prefix + rest[:end]
            if piece in vocab:
                tail = split(rest[end:], "##")
                return None if tail is None else [piece] + tail
        return None

    result = split(word, "")
    return [unk] if result is None else result


def wordpiece_two_pointers(word, vocab, unk="[UNK]", max_chars=100, lowercase=True):
    """CORRECT: the classic two-pointer loop with the end pointer moving left."""
    text = word.lower() if lowercase else word
    if len(text) > max_chars:
        return [unk]
    out = []
    start = 0
    while start < len(text):
        end = len(text)
        found = None
        while end > start:
            candidate = text[start:end] if start == 0 else "##" + text[start:end]
            if candidate in vocab:
                found = candidate
                break
            end -= 1
        if found is None:
            return [unk]
        out.append(found)
        start = end
    return out


# ---- mean_pool -------------------------------------------------------------
def mean_pool_ignores_mask(hidden, mask):
    """WRONG: averages over all T positions, padding included."""
    return hidden.mean(dim=1)


def mean_pool_multiply_mask(hidden, mask):
    """WRONG: masks by multiplying with the mask; NaN or inf in padded positions gives NaN (NaN * 0)."""
    m = mask.to(hidden.dtype).unsqueeze(-1)
    return (hidden * m).sum(dim=1) / m.sum(dim=1).clamp(min=1)


def mean_pool_divide_by_zero(hidden, mask):
    """WRONG: divides by the number of real tokens without a guard; a row with none gives 0 / 0 = NaN."""
    keep = mask.bool().unsqueeze(-1)
    total = torch.where(keep, hidden, torch.zeros_like(hidden)).sum(dim=1)
    return total / keep.sum(dim=1).to(hidden.dtype)


def mean_pool_nan_to_num(hidden, mask):
    """WRONG: mask-multiplied sum divided by the raw count, then nan_to_num: an empty row's value is 0 but its
    gradient is NaN (0 * inf); NaN padding also turns a real row's mean into 0."""
    m = mask.to(hidden.dtype).unsqueeze(-1)
    mean = (hidden * m).sum(dim=1) / m.sum(dim=1)
    return torch.nan_to_num(mean, nan=0.0)


def mean_pool_count_in_mask_dtype(hidden, mask):
    """WRONG: divides by mask.sum() in the mask's own dtype; a float64 mask turns a float32 result into float64."""
    keep = (mask != 0).unsqueeze(-1)
    total = torch.where(keep, hidden, torch.zeros_like(hidden)).sum(dim=1)
    count = mask.sum(dim=1, keepdim=True)
    return total / count.clamp(min=1)


def mean_pool_zero_padding_in_place(hidden, mask):
    """WRONG: zeroes the padded positions of `hidden` in place before averaging (modifies the input)."""
    keep = mask.bool()
    with torch.no_grad():
        hidden[~keep] = 0
    count = keep.sum(dim=1, keepdim=True).clamp(min=1).to(hidden.dtype)
    return hidden.sum(dim=1) / count


def mean_pool_where_clamp(hidden, mask):
    """CORRECT: torch.where keeps padding out (even NaN), count clamped to 1 so empty rows give 0."""
    keep = (mask != 0).unsqueeze(-1)
    total = torch.where(keep, hidden, torch.zeros((), dtype=hidden.dtype, device=hidden.device)).sum(dim=1)
    count = keep.sum(dim=1).clamp(min=1).to(hidden.dtype)
    return total / count


def mean_pool_row_loop(hidden, mask):
    """CORRECT: one row at a time with boolean indexing; an empty row gives hidden[b, :0].sum(0) * 0 = zeros."""
    keep = mask != 0
    rows = []
    for b in range(hidden.shape[0]):
        real = hidden[b][keep[b].to(hidden.device)]
        if real.shape[0] == 0:
            rows.append(real.sum(dim=0))          # zeros of (d,), connected to hidden, zero gradient
        else:
            rows.append(real.mean(dim=0))
    return torch.stack(rows)


FRESH = {
    "check_wordpiece": {
        "wrong": [
            ("shortest match first", wordpiece_shortest_first, "Takes the shortest fitting piece, not the longest."),
            ("no ## prefix", wordpiece_no_hashes, "Continuation pieces are looked up and returned without '##'."),
            ("partial word kept", wordpiece_partial_unk, "Returns the pieces found so far plus unk, not unk alone."),
            ("length >= max_chars", wordpiece_length_off_by_one, "A word of exactly max_chars becomes unk."),
            ("hard-coded [UNK]", wordpiece_hardcoded_unk,
             "Ignores the unk argument, and gives ['[UNK]'] for an empty word instead of []."),
            ("length checked before lower()", wordpiece_length_before_lowercase,
             "Checks max_chars before lower-casing, though lower() can lengthen the word."),
        ],
        "correct": [
            ("recursive", wordpiece_recursive),
            ("two pointers", wordpiece_two_pointers),
        ],
    },
    "check_mean_pool": {
        "wrong": [
            ("mask ignored", mean_pool_ignores_mask, "Averages over padding too."),
            ("mask multiplied", mean_pool_multiply_mask, "NaN/inf in padding leaks through NaN * 0."),
            ("0/0 for empty rows", mean_pool_divide_by_zero, "A row with no real token gives NaN."),
            ("nan_to_num after 0/0", mean_pool_nan_to_num, "The value is 0 but the gradient of an empty row is NaN."),
            ("count in the mask's dtype", mean_pool_count_in_mask_dtype,
             "With a float64 mask and float32 hidden, the result is float64, not hidden's dtype."),
            ("in-place zeroing", mean_pool_zero_padding_in_place, "Writes zeros into the caller's hidden tensor."),
        ],
        "correct": [
            ("where + clamp", mean_pool_where_clamp),
            ("row loop", mean_pool_row_loop),
        ],
    },
}
