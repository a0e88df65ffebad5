"""Checks for notebook 14 (text and images): patch tokens, the single-stream attention mask, CLIP's loss, NumPy.

    check_patchify               patchify(images, patch) -> (B, N, C * patch * patch)
    check_joint_attention_mask   joint_attention_mask(text_mask, image_mask) -> (B, T + N, T + N) bool
    check_clip_loss              clip_loss(image_emb, text_emb, temperature=0.07) -> a float

check_patchify compares with plmcourse.ref.patchify exactly (a reshape and a transpose change no value)
on images whose every pixel is different (so that any other order shows): square and non-square images
(wide and tall: a transposed grid gives the right shape on a square image only), patch 1 (every pixel a
token), patch = H = W (one patch), patch 2, 3, 4, 8, C = 1, 2, 3, 4, B = 1 and several, patch passed by
keyword, float64, float32 and uint8 images (the result keeps their dtype). Where H or W (or both) is not
a multiple of patch the function must raise ValueError, checked before any reshape: NumPy's own
"cannot reshape" ValueError is named as not the clear error asked for, and an answer that crops the
image or returns anything is named. Orders of the grid and of the inside of a patch that differ from the
stated one are named by cause (12 of them), as are F.unfold's (B, C·p·p, N) layout and a grid left
unflattened.

check_joint_attention_mask compares with plmcourse.ref.joint_attention_mask exactly: padding in the text
only, in the image only, in both, in neither, a caption whose image is entirely padding (the picture left
out), padding between real tokens (not only at the end), B = 1 with one token of each, 0/1 integer masks
(read as booleans) and the notebook's sizes. Twelve wrong masks are named by cause (padding that attends
or is attended to, empty rows, [image; text] order, one modality's padding ignored, an inverted mask, a
block-diagonal or a causal mask...), and a (B, 1, L, L) or an (L, L) result by its shape.

check_clip_loss compares with plmcourse.ref.clip_loss (float64): the default temperature (not passed)
and temperatures from 1 down to 0.001 (logits of 1000, where an unshifted softmax overflows), positional
and keyword, B = 1 (the loss is 0), d = 1, float32 inputs (float32 tolerance), a zero row (cosine 0,
never NaN), rows whose largest cosines lie far apart at temperature 0.001 (where one global max shift
underflows a whole row), two identical captions in a batch (the positives are the diagonal, by index, not the most
similar text), and embeddings of norm 50 to 200 (so that forgetting to normalise shows). A softmax over
the wrong axis in BOTH directions gives the right loss (the two terms swap) and cannot be seen; in one
direction only it is the same direction twice, and is named with "only one direction".
"""

import math

import numpy as np
import torch.nn.functional as F

from plmcourse.grading import multimodal as declared
from plmcourse.judging.core import (
    EXPECT_ERROR,
    F32,
    F64,
    Case,
    Spec,
    as_scalar,
    compare,
    describe,
    dtype_name,
    error_report_problem,
    expect_array,
    hidden_salt,
    hint_for,
    judge_bool_mask,
    log_softmax,
    name_mistake,

)
from plmcourse.judging.sentence_embeddings import _scalar_problem
from plmcourse.nn import multimodal as nn_multimodal
from plmcourse.ref import multimodal as ref_multimodal

__all__ = ["check_patchify", "check_joint_attention_mask", "check_clip_loss"]


# ============================================================================
# patchify(images, patch), NumPy

PATCHIFY_SEAL = [
    (ref_multimodal.patchify, "plmcourse.ref.patchify"),
    (nn_multimodal.patchify, "plmcourse.nn.patchify"),
    (F.unfold, "torch.nn.functional.unfold"),
]


def _patch_case(seed, B, C, H, W, patch, dtype=np.float64, keyword=False):
    """Images (B, C, H, W) whose pixels all differ (uint8: random bytes); patch positional or by keyword.
    When H or W is not a multiple of patch, the case expects ValueError."""
    rng = np.random.default_rng(seed)
    if dtype == np.uint8:
        images = rng.integers(0, 256, (B, C, H, W)).astype(np.uint8)
    else:
        images = (rng.permutation(B * C * H * W).reshape(B, C, H, W) * 0.25 - 7.0).astype(dtype)
    error = bool(H % patch or W % patch)
    args, kwargs = ((images,), {"patch": patch}) if keyword else ((images, patch), {})
    if error:
        kwargs[EXPECT_ERROR] = True
    label = f"seed {seed}: images of shape ({B}, {C}, {H}, {W}) {dtype_name(np.dtype(dtype))}, patch={patch}"
    label += " (keyword)" if keyword else ""
    if error:
        which = " and ".join(n for n, size in (("H", H), ("W", W)) if size % patch)
        label += f" ({which} not a multiple of patch: ValueError)"
    tags = {"error"} if error else set()
    tags |= {"non-square"} if H != W else set()
    return Case(label, args, kwargs, tags=frozenset(tags),
                data={"images": images, "patch": patch, "error": error, "dtype": np.dtype(dtype)})


def _patchify_cases(hidden):
    cases = [
        _patch_case(0, 2, 3, 8, 8, 4),
        _patch_case(1, 1, 1, 4, 6, 2),
        _patch_case(2, 2, 3, 8, 12, 4),
        _patch_case(3, 3, 2, 6, 4, 2),
        _patch_case(4, 1, 3, 4, 4, 1),
        _patch_case(5, 2, 3, 8, 8, 8),
        _patch_case(6, 2, 4, 6, 9, 3, dtype=np.float32, keyword=True),
        _patch_case(7, 2, 3, 8, 8, 4, dtype=np.uint8),
        _patch_case(8, 2, 3, 16, 16, 4),
        _patch_case(9, 1, 3, 10, 8, 4),
        _patch_case(10, 2, 1, 8, 6, 4),
        _patch_case(11, 1, 3, 6, 6, 4),
    ]
    salt = hidden_salt(hidden)
    if hidden:
        cases += [
            _patch_case(salt + 100, 4, 3, 12, 8, 4),
            _patch_case(salt + 101, 1, 2, 9, 6, 3, keyword=True),
            _patch_case(salt + 102, 2, 3, 32, 32, 8, dtype=np.float32),
            _patch_case(salt + 103, 3, 1, 2, 10, 2, dtype=np.uint8),
            _patch_case(salt + 104, 1, 3, 5, 5, 5),
            _patch_case(salt + 105, 2, 3, 12, 12, 6),
            _patch_case(salt + 106, 2, 3, 12, 10, 4),
            _patch_case(salt + 107, 1, 3, 7, 7, 2, keyword=True),
            _patch_case(salt + 108, 2, 2, 4, 8, 1),
        ]
    return cases


def _patchify_reference(case):
    d = case.data
    return None if d["error"] else ref_multimodal.patchify(d["images"], d["patch"])


def _patchify_signature_args(case):
    return case.args, {k: v for k, v in case.kwargs.items() if k != EXPECT_ERROR}


def _order(images, patch, grid="rows", inside="cij", whole_transposed=False):
    """The patches in a given grid order ("rows" or "columns") with each flattened in the order `inside`,
    a string of c (channel), i (pixel row), j (pixel column), outermost first."""
    if whole_transposed:
        images = np.swapaxes(images, 2, 3)
    B, C, H, W = images.shape
    gh, gw = H // patch, W // patch
    x = images.reshape(B, C, gh, patch, gw, patch)               # (B, C, gh, i, gw, j)
    where = {"c": 1, "i": 3, "j": 5}
    outer = (2, 4) if grid == "rows" else (4, 2)
    x = x.transpose(0, *outer, *(where[a] for a in inside))
    return x.reshape(B, gh * gw, C * patch * patch)


INSIDE_NAMES = {
    "ijc": ("each patch flattened channels last (row, column, channel, the order of an (H, W, C) image or of "
            "einops' '(p1 p2 c)'): flatten channel first, then pixel row, then pixel column"),
    "cji": ("each patch transposed inside (pixel column before pixel row): flatten channel, then row, then "
            "column, entry c·p·p + i·p + j"),
    "jic": ("each patch flattened column, row, channel (a (W, H, C) reading): flatten channel first, then "
            "pixel row, then pixel column"),
    "icj": ("each patch flattened row, channel, column (the axes moved to (i, c, j)): the channel is the "
            "outermost, transpose to (B, H/p, W/p, C, p, p)"),
    "jci": "each patch flattened column, channel, row: the channel is the outermost, then the row, then the column",
}


def _patchify_mistakes(images, patch):
    B, C, H, W = images.shape
    gh, gw = H // patch, W // patch
    yield ("the patches in column-major order (down each column of patches first): number them row by row, "
           "left to right, as one reads"), lambda: (_order(images, patch, grid="columns"),)
    yield ("the image transposed (H and W swapped, np.swapaxes(images, 2, 3) or .T on the pixel axes): the "
           "grid comes out column by column and each patch transposed"),\
        lambda: (_order(images, patch, whole_transposed=True),)
    for inside, name in INSIDE_NAMES.items():
        yield name, lambda inside=inside: (_order(images, patch, inside=inside),)
        yield (f"the patches in column-major order, and {name}"), \
            lambda inside=inside: (_order(images, patch, grid="columns", inside=inside),)
    yield ("a plain reshape without a transpose, which cuts runs of pixels, not squares: reshape to "
           "(B, C, H/p, p, W/p, p), move the axes to (B, H/p, W/p, C, p, p), then flatten"), \
        lambda: (images.reshape(B, gh * gw, C * patch * patch),)
    yield ("the pixel axes split in the wrong order: H is (H/p, p), the patch row outside the pixel row, so "
           "reshape to (B, C, H/p, p, W/p, p), not (B, C, p, H/p, p, W/p)"), \
        lambda: (images.reshape(B, C, patch, gh, patch, gw).transpose(0, 3, 5, 1, 2, 4).reshape(B, gh * gw, -1),)
    yield ("a reshape to (B, C, H/p, W/p, p, p), which does not cut squares: split H into (H/p, p) and W into "
           "(W/p, p), (B, C, H/p, p, W/p, p)"), \
        lambda: (images.reshape(B, C, gh, gw, patch, patch).transpose(0, 2, 3, 1, 4, 5).reshape(B, gh * gw, -1),)
    yield ("the channels outside the patches (every patch of channel 0, then of channel 1...): each patch "
           "holds all its channels, (B, N, C·p·p)"), \
        lambda: (images.reshape(B, C, gh, patch, gw, patch).transpose(0, 1, 2, 4, 3, 5).reshape(B, gh * gw, -1),)


def _patchify_shape_hint(shape, case):
    B, C, H, W = case.data["images"].shape
    p = case.data["patch"]
    N, D = (H // p) * (W // p), C * p * p
    if H != W and len(shape) == 3 and shape[0] == B and shape[1] in ((H // p) ** 2, (W // p) ** 2):
        return " (N counted as if the image were square: N = (H/p)·(W/p))"
    if shape == (B, D, N) and D != N:
        return " (F.unfold's layout, (B, C·p·p, N): the patches go along axis 1, swap the last two axes)"
    if shape == (B, H // p, W // p, D):
        return " (the grid of patches is left 2-D: flatten it to N = (H/p)·(W/p) patches in row-major order)"
    if shape == (N, D) and B == 1:
        return " (the batch axis is gone: keep it, (B, N, C·p·p))"
    return ""


def _judge_patchify_error(case, got):
    d = case.data
    B, C, H, W = d["images"].shape
    p = d["patch"]
    which = " and ".join(f"{n} = {size}" for n, size in (("H", H), ("W", W)) if size % p)
    wanted = f"{which} is not a multiple of patch={p}, so your function must raise ValueError"
    problem = error_report_problem(got, wanted)
    if problem:
        return problem
    if "raised" in got:
        text = str(got.get("message", ""))[:160]
        if "cannot reshape" in text:
            return (f"{wanted} with a message of its own, but the ValueError came from NumPy's reshape "
                    f"({text}); test H % patch and W % patch first and raise ValueError saying which "
                    f"size is not a multiple")
        return None
    value = got["returned"]
    shown = f"an array of shape {tuple(value.shape)}" if isinstance(value, np.ndarray) else describe(value)
    return (f"{wanted}, but it returned {shown}: the pixels past the last whole patch would be dropped "
            f"silently; test H % patch and W % patch first")


def _judge_patchify(case, got, expected):
    d = case.data
    if d["error"]:
        return _judge_patchify_error(case, got)
    problem = expect_array(got, "the result")
    if problem:
        return problem
    if got.shape != expected.shape:
        hint = _patchify_shape_hint(tuple(got.shape), case)
        return f"the result has shape {tuple(got.shape)}, expected {expected.shape} (B, N, C·patch·patch){hint}"
    if got.dtype != d["dtype"]:
        return (f"the result has dtype {got.dtype}, expected {d['dtype']} like the images: cutting into patches "
                f"moves pixels and changes none, so keep their dtype (no astype, no np.zeros of another dtype)")
    problem = compare(got, expected, atol=0, rtol=0, what="the result")
    if problem is None:
        return None
    problem += " (patches in row-major order, each flattened channel, then pixel row, then pixel column)"
    return name_mistake(problem, (got,), _patchify_mistakes(d["images"], d["patch"]), {"atol": 0, "rtol": 0})


def _explain_patchify_error(error):
    return hint_for(error, [
        (("cannot reshape",),
         "a reshape must keep the number of entries: (B, C, H, W) -> (B, C, H/p, p, W/p, p) -> transpose -> "
         "(B, (H/p)·(W/p), C·p·p); compute the sizes with // from the image's own shape"),
        (("axes don't match", "repeated axis"),
         "transpose takes one position for each of the array's axes (6 after the first reshape)"),
        (("'float' object cannot be interpreted as an integer", "must be int"),
         "sizes must be integers: H // patch, not H / patch"),
        (("not enough values to unpack", "too many values to unpack"),
         "images is (B, C, H, W): B, C, H, W = images.shape"),
    ])


check_patchify = Spec(
    declared.check_patchify,
    cases=_patchify_cases,
    reference=_patchify_reference,
    judge=_judge_patchify,
    seal=PATCHIFY_SEAL,
    explain_error=_explain_patchify_error,
    signature_args=_patchify_signature_args,
    clauses=(
        ("the patches in row-major order, on a non-square image (wide)",
         lambda c: not c.data["error"] and c.data["images"].shape[3] > c.data["images"].shape[2]),
        ("... and a tall one",
         lambda c: not c.data["error"] and c.data["images"].shape[2] > c.data["images"].shape[3]),
        ("each patch flattened channel, row, column, with several channels",
         lambda c: not c.data["error"] and c.data["images"].shape[1] > 1 and c.data["patch"] > 1),
        ("one channel", lambda c: not c.data["error"] and c.data["images"].shape[1] == 1),
        ("patch = 1: every pixel a token", lambda c: not c.data["error"] and c.data["patch"] == 1),
        ("patch = H = W: one patch",
         lambda c: not c.data["error"] and c.data["images"].shape[2] == c.data["images"].shape[3] == c.data["patch"]),
        ("B = 1 and B > 1", lambda c: not c.data["error"] and c.data["images"].shape[0] == 1),
        ("float32 images keep float32", lambda c: not c.data["error"] and c.data["dtype"] == np.float32),
        ("uint8 images keep uint8", lambda c: not c.data["error"] and c.data["dtype"] == np.uint8),
        ("patch passed by keyword", lambda c: "patch" in c.kwargs),
        ("H not a multiple of patch: ValueError",
         lambda c: c.data["error"] and c.data["images"].shape[2] % c.data["patch"] != 0
         and c.data["images"].shape[3] % c.data["patch"] == 0),
        ("W not a multiple of patch: ValueError",
         lambda c: c.data["error"] and c.data["images"].shape[3] % c.data["patch"] != 0
         and c.data["images"].shape[2] % c.data["patch"] == 0),
        ("neither a multiple: ValueError",
         lambda c: c.data["error"] and c.data["images"].shape[2] % c.data["patch"] != 0
         and c.data["images"].shape[3] % c.data["patch"] != 0),
    ),
)


# ============================================================================
# joint_attention_mask(text_mask, image_mask), NumPy bool

MASK_SEAL = [
    (ref_multimodal.joint_attention_mask, "plmcourse.ref.joint_attention_mask"),
    (nn_multimodal.joint_attention_mask, "plmcourse.nn.joint_attention_mask"),
]


def _mask_case(seed, text_lengths, image_lengths, T, N, *, gaps=False, dtype=bool, note=""):
    """text_mask (B, T) and image_mask (B, N): row b real for its first text_lengths[b] / image_lengths[b]
    positions (gaps: then a random real/padding pattern with that many real positions)."""
    rng = np.random.default_rng(seed)

    def make(lengths, L):
        mask = np.zeros((len(lengths), L), dtype=bool)
        for b, n in enumerate(lengths):
            where = np.sort(rng.choice(L, size=n, replace=False)) if gaps else np.arange(n)
            mask[b, where] = True
        return mask.astype(dtype)

    text_mask, image_mask = make(text_lengths, T), make(image_lengths, N)
    label = (f"seed {seed}: text_mask ({len(text_lengths)}, {T}) with {list(text_lengths)} real tokens, "
             f"image_mask ({len(image_lengths)}, {N}) with {list(image_lengths)}")
    label += f", {np.dtype(dtype).name} masks" if dtype is not bool else ""
    label += ", padding between real tokens" if gaps else ""
    label += note
    text_pad = any(n < T for n in text_lengths)
    image_pad = any(n < N for n in image_lengths)
    tags = {"text padding"} if text_pad else set()
    tags |= {"image padding"} if image_pad else set()
    tags |= {"gaps"} if gaps else set()
    tags |= {"no image"} if 0 in image_lengths else set()
    tags |= {"integer masks"} if dtype is not bool else set()
    return Case(label, (text_mask, image_mask), tags=frozenset(tags),
                data={"text": text_mask.astype(bool), "image": image_mask.astype(bool)})


def _mask_cases(hidden):
    cases = [
        _mask_case(0, [5, 3], [4, 2], 5, 4),
        _mask_case(10, [5, 3], [4, 4], 5, 4),
        _mask_case(1, [4, 4], [6, 2], 4, 6),
        _mask_case(2, [6, 3, 4], [3, 5, 1], 6, 5),
        _mask_case(3, [3, 3], [4, 4], 3, 4),
        _mask_case(4, [4, 3], [5, 0], 4, 5, note=", row 1's picture entirely padding"),
        _mask_case(5, [5, 2], [3, 4], 5, 4, gaps=True),
        _mask_case(6, [1], [1], 1, 1),
        _mask_case(7, [4, 2], [2, 3], 4, 3, dtype=np.int64),
        _mask_case(8, [8, 5, 6, 8], [16, 16, 16, 16], 8, 16),
    ]
    salt = hidden_salt(hidden)
    if hidden:
        rng = np.random.default_rng(170 + salt)
        B, T, N = 5, 7, 9
        cases += [
            _mask_case(salt + 100, rng.integers(1, T + 1, B).tolist(), rng.integers(0, N + 1, B).tolist(), T, N),
            _mask_case(salt + 101, [0, 3], [2, 2], 3, 2, note=", row 0's caption entirely padding"),
            _mask_case(salt + 102, rng.integers(1, 9, 3).tolist(), rng.integers(1, 5, 3).tolist(), 8, 4, gaps=True),
            _mask_case(salt + 103, [2, 1], [3, 1], 2, 3, dtype=np.uint8),
            _mask_case(salt + 104, [1, 1], [4, 2], 1, 4),
            _mask_case(salt + 105, [6, 6], [1, 0], 6, 1),
            _mask_case(salt + 106, [3, 5, 2], [7, 7, 7], 5, 7, dtype=np.int32),
        ]
    return cases


def _mask_reference(case):
    return ref_multimodal.joint_attention_mask(case.data["text"], case.data["image"])


def _mask_mistakes(text, image):
    B, T = text.shape
    N = image.shape[1]
    L = T + N
    eye = np.eye(L, dtype=bool)[None]
    real = np.concatenate([text, image], axis=1)
    q, k = real[:, :, None], real[:, None, :]
    right = (q & k) | eye
    yield ("a pair allowed when EITHER token is real (or instead of and): both must be real, "
           "mask = (real_i and real_j) or i == j"), lambda: ((q | k) | eye,)
    yield ("a padding position attends to the real tokens (only the keys are masked): a padding query's row "
           "allows itself only, mask = (real_i and real_j) or i == j"), lambda: ((k | eye) & np.ones_like(q),)
    yield ("a padding position attends to the real tokens (only the keys are masked): a padding query's row "
           "allows itself only, mask = (real_i and real_j) or i == j"), lambda: (np.broadcast_to(k, (B, L, L)),)
    yield ("the padding is attended to (only the queries are masked): no token may attend to a padding "
           "position, the columns of padding are False"), lambda: ((q | eye) & np.ones_like(k),)
    yield ("a padding position's row is empty (all False): a softmax over no key is NaN, so let each "
           "padding position attend to itself (OR the identity)"), lambda: (q & k,)
    yield ("a padding position's row allows everything: it attends to itself only"),\
        lambda: (right | ~q,)
    yield ("the image's padding ignored: image_mask says which patches are real too"), \
        lambda: (_from_real(np.concatenate([text, np.ones_like(image)], axis=1)),)
    yield ("the text's padding ignored: text_mask says which words are real too"), \
        lambda: (_from_real(np.concatenate([np.ones_like(text), image], axis=1)),)
    yield "the padding is not masked at all (all True)", lambda: (np.ones((B, L, L), dtype=bool),)
    yield ("the image tokens first: the sequence is [text; image], text_mask's T positions first"), \
        lambda: (_swapped_order(text, image),)
    yield ("an inverted mask: True marks the blocked pairs, but in this course True means may attend"), \
        lambda: (~right,)
    modality = np.arange(L) >= T
    same = modality[:, None] == modality[None, :]
    yield ("text and image kept apart (a block-diagonal mask): in a single stream every real token attends to "
           "every real token of both modalities"), lambda: (right & same,)
    yield ("a causal mask: a single-stream encoder reads both ways, every real token sees every real token"), \
        lambda: (right & np.tril(np.ones((L, L), dtype=bool)),)
    yield ("a mask from the counts of real tokens (a padding position only at the end): the masks can have "
           "padding anywhere; use them position by position"), lambda: (_from_real(_as_prefix(real, T)),)


def _from_real(real):
    L = real.shape[1]
    return (real[:, :, None] & real[:, None, :]) | np.eye(L, dtype=bool)[None]


def _swapped_order(text, image):
    return _from_real(np.concatenate([image, text], axis=1))


def _as_prefix(real, T):
    """Each modality's real tokens moved to its front, keeping their counts."""
    out = np.zeros_like(real)
    for b in range(len(real)):
        n_text, n_image = real[b, :T].sum(), real[b, T:].sum()
        out[b, :n_text] = True
        out[b, T:T + n_image] = True
    return out


def _judge_mask(case, got, expected):
    d = case.data
    B, T = d["text"].shape
    L = T + d["image"].shape[1]
    if isinstance(got, np.ndarray) and got.shape != expected.shape:
        hint = ""
        if got.shape == (B, 1, L, L):
            hint = (" (a mask with a head axis, (B, 1, L, L), is what a multi-head attention broadcasts; this "
                    "function returns (B, T + N, T + N))")
        elif got.shape == (L, L):
            hint = " (one mask for the whole batch: each example has its own padding, (B, T + N, T + N))"
        elif got.shape == (B, L):
            hint = " (the real-token vector of each example; the mask pairs every query with every key)"
        return f"the result has shape {got.shape}, expected {expected.shape}{hint}"
    return judge_bool_mask(got, expected, _mask_mistakes(d["text"], d["image"]))


def _explain_mask_error(error):
    return hint_for(error, [
        (("all the input array dimensions", "along dimension 1", "concatenat"),
         "the two masks have the same batch size B but their own lengths T and N: join them along axis 1, "
         "np.concatenate([text_mask, image_mask], axis=1)"),
        (("ufunc 'invert' not supported", "ufunc 'bitwise_and' not supported"),
         "convert the masks to booleans first (.astype(bool)): 0/1 integer masks are allowed"),
        (("could not be broadcast",),
         "a (B, L, L) mask pairs queries with keys: real[:, :, None] & real[:, None, :]"),
    ])


check_joint_attention_mask = Spec(
    declared.check_joint_attention_mask,
    cases=_mask_cases,
    reference=_mask_reference,
    judge=_judge_mask,
    seal=MASK_SEAL,
    explain_error=_explain_mask_error,
    clauses=(
        ("text padding: padded words neither attend nor are attended to",
         lambda c: "text padding" in c.tags and "image padding" not in c.tags),
        ("image padding likewise", lambda c: "image padding" in c.tags and "text padding" not in c.tags),
        ("padding in both", lambda c: {"text padding", "image padding"} <= c.tags),
        ("no padding: all True", lambda c: not c.tags & {"text padding", "image padding"}),
        ("a picture entirely padding: the caption attends to itself only", lambda c: "no image" in c.tags),
        ("padding anywhere, not only at the end", lambda c: "gaps" in c.tags),
        ("a padding position attends to itself (no empty row)",
         lambda c: bool((~c.data["text"]).any() or (~c.data["image"]).any())),
        ("0/1 integer masks read as booleans", lambda c: "integer masks" in c.tags),
        ("one token of each", lambda c: c.data["text"].shape[1] == 1 and c.data["image"].shape[1] == 1),
        ("T != N (text first, then image)", lambda c: c.data["text"].shape[1] != c.data["image"].shape[1]),
    ),
)


# ============================================================================
# clip_loss(image_emb, text_emb, temperature=0.07), NumPy

DEFAULT_TEMPERATURE = 0.07

CLIP_SEAL = [
    (ref_multimodal.clip_loss, "plmcourse.ref.clip_loss"),
    (nn_multimodal.clip_loss, "plmcourse.nn.clip_loss"),
]


def _clip_case(seed, B, d, temperature=None, keyword=False, dtype=np.float64, zero=None, duplicate=False,
               spread=1.5):
    """image_emb (B, d) rows of norm 50 to 200; text_emb = image_emb + noise of `spread` times each row's
    norm, rescaled to other norms (positives with cosines of about 0.5). temperature None: not passed.
    zero: "image" or "text", a row of zeros there; duplicate: rows 0 and 1 of text_emb equal."""
    rng = np.random.default_rng(seed)

    def directions(m):
        x = rng.standard_normal((m, d))
        if d == 1:
            x = np.where(x < 0, -1.0, 1.0)
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    image = directions(B) * rng.uniform(50.0, 200.0, (B, 1))
    unit = image / np.linalg.norm(image, axis=1, keepdims=True)
    text = unit + spread * directions(B) if d > 1 else unit * rng.choice([1.0, 1.0, -1.0], (B, 1))
    text = text / np.linalg.norm(text, axis=1, keepdims=True) * rng.uniform(50.0, 200.0, (B, 1))
    if duplicate and B > 1:
        text[1] = text[0]
    zero_row = None
    if zero is not None:
        zero_row = int(rng.integers(0, B))
        (image if zero == "image" else text)[zero_row] = 0.0
    image, text = image.astype(dtype), text.astype(dtype)
    args, kwargs = [image, text], {}
    if temperature is not None:
        if keyword:
            kwargs["temperature"] = temperature
        else:
            args.append(temperature)
    label = f"seed {seed}: image_emb, text_emb of shape ({B}, {d}) {dtype_name(np.dtype(dtype))}"
    label += (", temperature not passed (0.07)" if temperature is None else
              f", temperature={temperature:g}" + (" (keyword)" if keyword else ""))
    label += f", row {zero_row} of {zero}_emb all zeros" if zero else ""
    label += ", rows 0 and 1 of text_emb equal (two identical captions)" if duplicate and B > 1 else ""
    tags = {"float32"} if dtype == np.float32 else set()
    tags |= {"default temperature"} if temperature is None else set()
    tags |= {"zero row"} if zero else set()
    tags |= {"duplicate"} if duplicate and B > 1 else set()
    tau = DEFAULT_TEMPERATURE if temperature is None else temperature
    return Case(label, tuple(args), kwargs, tags=frozenset(tags),
                data={"image": image.astype(np.float64), "text": text.astype(np.float64), "tau": tau,
                      "dtype": np.dtype(dtype)})


def _far_rows_case(seed, temperature, B=4, d=3):
    """Rows whose largest cosines lie far apart: image 0 sits on its caption (cosine 1), image 1 points away
    from every caption (its best cosine is below -0.5). At a small temperature a softmax shifted by one
    global max underflows to exp = 0 across row 1 (log 0); each row shifted by its own max does not."""
    for attempt in range(100):
        rng = np.random.default_rng(seed * 100 + attempt)
        text = rng.standard_normal((B, d)) + np.array([4.0] + [0.0] * (d - 1))  # captions in one half-space
        text /= np.linalg.norm(text, axis=1, keepdims=True)
        image = text + 0.3 * rng.standard_normal((B, d))
        image[0] = text[0]
        image[1] = -text.mean(axis=0)
        image *= rng.uniform(50.0, 200.0, (B, 1))
        text *= rng.uniform(50.0, 200.0, (B, 1))
        cosines = _units(image) @ _units(text).T
        if cosines[1].max() < -0.5:
            break
    else:
        raise RuntimeError(f"no case with rows far apart for seed {seed}")
    label = (f"seed {seed}: image_emb, text_emb of shape ({B}, {d}) float64, temperature={temperature:g}, the rows' "
             f"largest cosines far apart (1 for image 0, {cosines[1].max():.2f} for image 1)")
    return Case(label, (image, text, temperature), tags=frozenset({"far rows"}),
                data={"image": image, "text": text, "tau": temperature, "dtype": np.dtype(np.float64)})


def _clip_cases(hidden):
    cases = [
        _clip_case(0, 4, 8),
        _clip_case(1, 5, 6, temperature=0.1),
        _clip_case(2, 3, 4, temperature=1.0, keyword=True),
        _clip_case(3, 1, 5, temperature=0.1),
        _clip_case(4, 4, 1, temperature=0.5),
        _clip_case(5, 4, 16, temperature=0.07, dtype=np.float32),
        _clip_case(6, 4, 6, temperature=0.1, zero="image"),
        _clip_case(7, 6, 4, temperature=0.001, spread=3.0),
        _clip_case(8, 4, 5, temperature=0.2, duplicate=True),
        _clip_case(9, 8, 32, temperature=0.05, keyword=True),
        _far_rows_case(10, 0.001),
    ]
    salt = hidden_salt(hidden)
    if hidden:
        cases += [
            _clip_case(salt + 100, 6, 12),
            _clip_case(salt + 101, 16, 32, temperature=0.07),
            _clip_case(salt + 102, 2, 3, temperature=0.3, keyword=True),
            _clip_case(salt + 103, 5, 8, temperature=0.01, dtype=np.float32),
            _clip_case(salt + 104, 3, 4, zero="text"),
            _clip_case(salt + 105, 7, 2, temperature=0.002, spread=3.0),
            _clip_case(salt + 106, 5, 6, temperature=0.15, duplicate=True),
            _clip_case(salt + 107, 1, 3),
            _far_rows_case(salt + 108, 0.002, B=5, d=4),
        ]
    return cases


def _clip_reference(case):
    d = case.data
    return ref_multimodal.clip_loss(d["image"], d["text"], d["tau"])


def _units(x, axis=-1):
    norms = np.linalg.norm(x, axis=axis, keepdims=True)
    return x / np.where(norms == 0, 1.0, norms)


def _clip_numpy(image, text, tau, *, normalise=True, norm_axis=-1, scale=None, directions="both", combine="mean",
                reduce="mean", targets=None, with_positive=True, sign=1.0):
    """CLIP's loss in float64 NumPy, with the switches that reproduce known mistakes."""
    B = len(image)
    a, b = (_units(image, norm_axis), _units(text, norm_axis)) if normalise else (image, text)
    logits = a @ b.T * (1.0 / tau if scale is None else scale)   # (B, B)
    rows = np.arange(B)
    columns = rows if targets is None else targets

    def direction(z):
        if with_positive:
            per_row = -log_softmax(z, axis=1)[rows, columns]
        else:
            others = np.where(np.eye(B, dtype=bool), -np.inf, z)
            top = np.max(others, axis=1)
            per_row = -z[rows, columns] + top + np.log(np.exp(others - top[:, None]).sum(axis=1))
        return per_row.sum() if reduce == "sum" else per_row.mean()

    terms = {"image": [direction(logits)], "text": [direction(logits.T)],
             "both": [direction(logits), direction(logits.T)]}[directions]
    total = sum(terms) / (len(terms) if combine == "mean" else 1)
    return np.array(sign * total)


def _clip_mistakes(d, tags):
    image, text, tau = d["image"], d["text"], d["tau"]
    B = len(image)

    def loss(**switches):
        return lambda: (_clip_numpy(image, text, tau, **switches),)

    if B > 1:
        yield ("only one direction, image to text (each image against all the texts; or the same direction "
               "twice): CLIP averages it with text to image, the cross-entropy over each column, logits.T"),\
            loss(directions="image")
        yield ("only one direction, text to image (or the same direction twice): CLIP averages it with image "
               "to text, the cross-entropy over each row of the logits"), loss(directions="text")
        yield "the two directions added, not averaged: (image-to-text + text-to-image) / 2", loss(combine="sum")
        yield "the sum over the batch instead of the mean", loss(reduce="sum")
        yield ("the sum over the batch, and the two directions added instead of averaged"),\
            loss(reduce="sum", combine="sum")
    yield ("dot products instead of cosines: normalise each row to length 1 first "
           "(x / np.linalg.norm(x, axis=1, keepdims=True))"), loss(normalise=False)
    if tau != 1.0:
        yield ("the cosines divided by the temperature squared: logits = cos / temperature, once",
               loss(scale=1.0 / tau ** 2))
        yield ("the cosines not divided by the temperature (logits = cos, as if it were 1): "
               "logits = cos / temperature", loss(scale=1.0))
        yield "the cosines multiplied by the temperature instead of divided by it", loss(scale=tau)
    if "default temperature" in tags:
        for other in (0.1, 0.05, 0.5, 0.2, 0.01, 0.07 ** 2):
            yield (f"a temperature of {other:g} where none was passed: the default must be temperature=0.07",
                   loss(scale=1.0 / other))
    if tau != DEFAULT_TEMPERATURE:
        yield ("a temperature of 0.07 whatever the argument says: divide by the temperature argument, not by a "
               "constant", loss(scale=1.0 / DEFAULT_TEMPERATURE))
    if B > 1:
        yield ("the rows normalised along axis 0 (each feature over the batch) instead of each embedding along "
               "its last axis"), loss(norm_axis=0)
        yield ("the positive left out of the denominator: the softmax runs over all B candidates, the matching "
               "one included"), loss(with_positive=False)
        yield ("targets of 0 for every row instead of 0..B-1: pair i's match is column i, the diagonal"),\
            loss(targets=np.zeros(B, dtype=int))
    yield "the log-likelihood instead of the loss: the minus sign is missing", loss(sign=-1.0)


def _judge_clip(case, got, expected):
    d = case.data
    value = as_scalar(got)
    if value is None:
        if isinstance(got, np.ndarray) and got.shape == (len(d["image"]),):
            return f"your function returned an array of shape {got.shape}, expected one number: the mean over the B pairs"
        if isinstance(got, np.ndarray) and got.ndim == 2:
            return (f"your function returned an array of shape {got.shape} (the logits or the log-probabilities?), "
                    f"expected one number: the loss")
        if isinstance(got, (tuple, list)):
            return (f"your function returned {describe(got)}, expected one number: the mean of the two directions' "
                    f"losses, not the pair")
        return f"your function returned {describe(got)}, expected one number (a float)"
    if not math.isfinite(value):
        if "zero row" in case.tags:
            return (f"the loss is {value} for a batch with a zero embedding: x / norm is 0 / 0 for it; a zero "
                    f"row has cosine 0 with everything, so divide by the norm only where it is not 0 "
                    f"(np.where(norm == 0, 1, norm))")
        if "far rows" in case.tags:
            return (f"the loss is {value} where one row's largest logit is far below another's (temperature "
                    f"{d['tau']:g}): shifted by the largest logit of the whole matrix, every exp of that row "
                    f"underflows to 0 and its log is -inf; shift each row (and each column, for the other "
                    f"direction) by its own max (keepdims=True)")
        if 1.0 / d["tau"] > 300:
            return (f"the loss is {value} for logits of up to {1.0 / d['tau']:g} (temperature {d['tau']:g}): exp of "
                    f"logits this large overflows; subtract each row's max before the exponential (a stable "
                    f"log-softmax)")
        return f"the loss is {value}"
    tolerance = F32 if d["dtype"] == np.float32 else F64
    return _scalar_problem(value, expected, tolerance, "the loss", _clip_mistakes(d, case.tags))


def _explain_clip_error(error):
    return hint_for(error, [
        (("shapes", "not aligned", "mismatch in its core dimension"),
         "the logits are (B, B): image_emb (B, d) @ text_emb.T (d, B)"),
        (("could not be broadcast",),
         "keep the axis you reduce (keepdims=True), so that the norms (B, 1) divide the rows (B, d)"),
        (("out of bounds",),
         "the targets are 0..B-1, one per row: np.arange(B)"),
    ])


check_clip_loss = Spec(
    declared.check_clip_loss,
    cases=_clip_cases,
    reference=_clip_reference,
    judge=_judge_clip,
    seal=CLIP_SEAL,
    explain_error=_explain_clip_error,
    clauses=(
        ("temperature not passed: 0.07", lambda c: "default temperature" in c.tags),
        ("temperature passed, positionally or by keyword", lambda c: "default temperature" not in c.tags),
        ("logits: cosines (rows normalised) divided by the temperature", lambda c: c.data["tau"] != 1.0),
        ("both directions, averaged", lambda c: len(c.data["image"]) > 1),
        ("B = 1: the loss is 0", lambda c: len(c.data["image"]) == 1),
        ("d = 1", lambda c: c.data["image"].shape[1] == 1),
        ("the positives are the diagonal, by index (two identical captions)", lambda c: "duplicate" in c.tags),
        ("a zero row has cosine 0: never NaN", lambda c: "zero row" in c.tags),
        ("a stable log-softmax: temperature 0.001", lambda c: c.data["tau"] <= 0.001),
        ("... shifted row by row: rows whose largest logits lie far apart", lambda c: "far rows" in c.tags),
        ("float32 inputs", lambda c: "float32" in c.tags),
    ),
)
