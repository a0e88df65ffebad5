"""Right and wrong answers to the three exercises of notebook 14 (patchify, joint_attention_mask, clip_loss,
all NumPy), as data for tests/test_grading_multimodal.py.

CORRECT: (name, function) pairs that must pass, written in different styles; MISTAKES: (name, function,
fragment): the check must fail with a message containing `fragment`, the fragment naming the mistake.
Adding a mistake is one entry.
"""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import numpy as np
import torch
import torch.nn.functional as F


# ============================================================================
# patchify(images, patch)


def _check_sizes(images, patch):
    H, W = images.shape[2:]
    if H % patch or W % patch:
        raise ValueError(f"{H} x {W} is not a multiple of {patch}")


def patchify_notebook(images, patch):
    """Reshape, transpose, reshape: the notebook's solution."""
    B, C, H, W = images.shape
    if H % patch != 0 or W % patch != 0:
        raise ValueError(f"H={H} and W={W} must be multiples of patch={patch}")
    gh, gw = H // patch, W // patch
    x = images.reshape(B, C, gh, patch, gw, patch)
    x = x.transpose(0, 2, 4, 1, 3, 5)
    return x.reshape(B, gh * gw, C * patch * patch)


def patchify_loops(images, patch):
    """Slice each square out, row of patches by row of patches."""
    _check_sizes(images, patch)
    B, C, H, W = images.shape
    rows = []
    for r in range(H // patch):
        for s in range(W // patch):
            square = images[:, :, r * patch:(r + 1) * patch, s * patch:(s + 1) * patch]  # (B, C, p, p)
            rows.append(square.reshape(B, -1))
    return np.stack(rows, axis=1)


def patchify_unfold(images, patch):
    """torch's Tensor.unfold twice (not F.unfold), back to NumPy."""
    _check_sizes(images, patch)
    x = torch.from_numpy(np.ascontiguousarray(images))
    B, C = x.shape[:2]
    x = x.unfold(2, patch, patch).unfold(3, patch, patch)        # (B, C, gh, gw, p, p)
    x = x.permute(0, 2, 3, 1, 4, 5).reshape(B, -1, C * patch * patch)
    return x.numpy().copy()


def patchify_einsum(images, patch):
    """np.einsum to move the axes; np.moveaxis would do as well."""
    B, C, H, W = images.shape
    if H % patch or W % patch:
        raise ValueError("image not divisible into patches")
    x = images.reshape(B, C, H // patch, patch, W // patch, patch)
    return np.einsum("bcrisj->brscij", x).reshape(B, -1, C * patch ** 2)


def patchify_stride_tricks(images, patch):
    """A strided view, then a copy."""
    _check_sizes(images, patch)
    B, C, H, W = images.shape
    windows = np.lib.stride_tricks.sliding_window_view(images, (patch, patch), axis=(2, 3))[:, :, ::patch, ::patch]
    return np.ascontiguousarray(windows.transpose(0, 2, 3, 1, 4, 5)).reshape(B, -1, C * patch * patch)


PATCHIFY_CORRECT = [
    ("reshape and transpose", patchify_notebook),
    ("loops over the squares", patchify_loops),
    ("torch Tensor.unfold", patchify_unfold),
    ("einsum", patchify_einsum),
    ("sliding_window_view", patchify_stride_tricks),
]


def _patch_with(images, patch, axes=(0, 2, 4, 1, 3, 5), check=True):
    if check:
        _check_sizes(images, patch)
    B, C, H, W = images.shape
    gh, gw = H // patch, W // patch
    x = images.reshape(B, C, gh, patch, gw, patch).transpose(*axes)
    return x.reshape(B, gh * gw, C * patch * patch)


def patch_column_major(images, patch):
    return _patch_with(images, patch, (0, 4, 2, 1, 3, 5))


def patch_channels_last(images, patch):
    return _patch_with(images, patch, (0, 2, 4, 3, 5, 1))


def patch_transposed_inside(images, patch):
    return _patch_with(images, patch, (0, 2, 4, 1, 5, 3))


def patch_image_transposed(images, patch):
    return _patch_with(np.swapaxes(images, 2, 3), patch)


def patch_plain_reshape(images, patch):
    _check_sizes(images, patch)
    B, C, H, W = images.shape
    return images.reshape(B, (H // patch) * (W // patch), C * patch * patch)


def patch_hwc_image(images, patch):
    """The image moved to (B, H, W, C) first, then cut as ViT code written for channels-last images."""
    _check_sizes(images, patch)
    x = images.transpose(0, 2, 3, 1)
    B, H, W, C = x.shape
    x = x.reshape(B, H // patch, patch, W // patch, patch, C).transpose(0, 1, 3, 2, 4, 5)
    return x.reshape(B, -1, patch * patch * C)


def patch_unfold_layout(images, patch):
    """F.unfold's (B, C p p, N), not transposed."""
    _check_sizes(images, patch)
    return patchify_notebook(images, patch).transpose(0, 2, 1)


def patch_grid_unflattened(images, patch):
    _check_sizes(images, patch)
    B, C, H, W = images.shape
    return patchify_notebook(images, patch).reshape(B, H // patch, W // patch, -1)


def patch_as_float(images, patch):
    return patchify_notebook(images, patch).astype(np.float64)


def patch_float32(images, patch):
    return patchify_notebook(images, patch).astype(np.float32)


def patch_no_check(images, patch):
    """No size check: the sizes floor-divided, the image cropped to whole patches."""
    B, C, H, W = images.shape
    gh, gw = H // patch, W // patch
    return _patch_with(images[:, :, :gh * patch, :gw * patch], patch, check=False)


def patch_assert(images, patch):
    B, C, H, W = images.shape
    assert H % patch == 0 and W % patch == 0, "not divisible"
    return _patch_with(images, patch, check=False)


def patch_numpy_reshape_error(images, patch):
    """No check of its own: NumPy's reshape raises a ValueError of its own (or crops)."""
    B, C, H, W = images.shape
    gh, gw = H // patch, W // patch
    x = images.reshape(B, C, gh, patch, -1, patch) if W % patch == 0 else images.reshape(B, C, gh, patch, gw, patch)
    return x.transpose(0, 2, 4, 1, 3, 5).reshape(B, gh * gw, C * patch * patch)


def patch_square_assumption(images, patch):
    """N = (H / p) ** 2: written for square images."""
    _check_sizes(images, patch)
    B, C, H, W = images.shape
    g = H // patch
    return images.reshape(B, C, g, patch, -1, patch).transpose(0, 2, 4, 1, 3, 5).reshape(B, g * g, -1)


def patch_wrong_split(images, patch):
    _check_sizes(images, patch)
    B, C, H, W = images.shape
    gh, gw = H // patch, W // patch
    return images.reshape(B, C, gh, gw, patch, patch).transpose(0, 2, 3, 1, 4, 5).reshape(B, gh * gw, -1)


def patch_channels_outside(images, patch):
    return _patch_with(images, patch, (0, 1, 2, 4, 3, 5))


def patch_type_error(images, patch):
    B, C, H, W = images.shape
    if H % patch or W % patch:
        raise TypeError("bad patch size")
    return _patch_with(images, patch, check=False)


def patch_row_channel_column(images, patch):
    return _patch_with(images, patch, (0, 2, 4, 3, 1, 5))


def patch_column_major_channels_last(images, patch):
    return _patch_with(images, patch, (0, 4, 2, 3, 5, 1))


def patch_true_division(images, patch):
    _check_sizes(images, patch)
    B, C, H, W = images.shape
    return images.reshape(B, C, H / patch, patch, W / patch, patch)


PATCHIFY_MISTAKES = [
    ("patches column-major", patch_column_major, "column-major order"),
    ("channels last inside a patch", patch_channels_last, "channels last"),
    ("each patch transposed", patch_transposed_inside, "each patch transposed inside"),
    ("image transposed", patch_image_transposed, "the image transposed"),
    ("plain reshape", patch_plain_reshape, "a plain reshape without a transpose"),
    ("(H, W, C) image cut as ViT code for channels last", patch_hwc_image, "channels last"),
    ("F.unfold's layout", patch_unfold_layout, "F.unfold's layout"),
    ("grid left 2-D", patch_grid_unflattened, "the grid of patches is left 2-D"),
    ("uint8 made float64", patch_as_float, "keep their dtype"),
    ("float64 made float32", patch_float32, "keep their dtype"),
    ("no size check (cropped)", patch_no_check, "the pixels past the last whole patch would be dropped"),
    ("assert instead of ValueError", patch_assert, "an assert is not the error asked for"),
    ("NumPy's reshape error", patch_numpy_reshape_error, "came from NumPy's reshape"),
    ("N for a square image", patch_square_assumption, "as if the image were square"),
    ("pixel axes split (H/p, W/p, p, p)", patch_wrong_split, "does not cut squares"),
    ("channels outside the patches", patch_channels_outside, "the channels outside the patches"),
    ("TypeError instead of ValueError", patch_type_error, "but it raised TypeError"),
    ("row, channel, column", patch_row_channel_column, "row, channel, column"),
    ("column-major and channels last", patch_column_major_channels_last, "column-major order, and each patch"),
    ("H / patch (float sizes)", patch_true_division, "H // patch"),
]


# ============================================================================
# joint_attention_mask(text_mask, image_mask)


def mask_notebook(text_mask, image_mask):
    """The notebook's solution: real tokens in [text; image] order, queries and keys both real, or i == j."""
    real = np.concatenate([text_mask, image_mask], axis=1).astype(bool)  # (B, T + N)
    L = real.shape[1]
    return (real[:, :, None] & real[:, None, :]) | np.eye(L, dtype=bool)


def mask_loops(text_mask, image_mask):
    B, T = text_mask.shape
    N = image_mask.shape[1]
    out = np.zeros((B, T + N, T + N), dtype=bool)
    for b in range(B):
        real = [bool(x) for x in text_mask[b]] + [bool(x) for x in image_mask[b]]
        for i in range(T + N):
            for j in range(T + N):
                out[b, i, j] = (real[i] and real[j]) or i == j
    return out


def mask_outer(text_mask, image_mask):
    """np.logical_and.outer per row, np.fill_diagonal on each."""
    real = np.hstack([text_mask != 0, image_mask != 0])
    out = np.stack([np.logical_and.outer(r, r) for r in real])
    for m in out:
        np.fill_diagonal(m, True)
    return out


def mask_einsum(text_mask, image_mask):
    real = np.concatenate([text_mask, image_mask], axis=-1).astype(np.int64)
    both = np.einsum("bi,bj->bij", real, real) > 0
    return np.logical_or(both, np.identity(real.shape[1], dtype=bool)[None, :, :])


MASK_CORRECT = [
    ("broadcast and identity", mask_notebook),
    ("loops", mask_loops),
    ("logical_and.outer and fill_diagonal", mask_outer),
    ("einsum", mask_einsum),
]


def _real(text_mask, image_mask):
    return np.concatenate([text_mask, image_mask], axis=1).astype(bool)


def mask_either_real(text_mask, image_mask):
    """A pair allowed when either token is real."""
    real = np.concatenate([np.asarray(text_mask, bool), np.asarray(image_mask, bool)], axis=1)
    return real[:, :, None] | real[:, None, :] | np.eye(real.shape[1], dtype=bool)


def mask_keys_only(text_mask, image_mask):
    real = _real(text_mask, image_mask)
    return np.broadcast_to(real[:, None, :], (len(real), real.shape[1], real.shape[1])).copy()


def mask_keys_only_with_eye(text_mask, image_mask):
    real = _real(text_mask, image_mask)
    return real[:, None, :] | np.eye(real.shape[1], dtype=bool)


def mask_queries_only(text_mask, image_mask):
    real = _real(text_mask, image_mask)
    return real[:, :, None] | np.eye(real.shape[1], dtype=bool)


def mask_no_diagonal(text_mask, image_mask):
    real = _real(text_mask, image_mask)
    return real[:, :, None] & real[:, None, :]


def mask_all_true(text_mask, image_mask):
    L = text_mask.shape[1] + image_mask.shape[1]
    return np.ones((len(text_mask), L, L), dtype=bool)


def mask_image_first(text_mask, image_mask):
    return mask_notebook(image_mask, text_mask)


def mask_ignores_image_padding(text_mask, image_mask):
    return mask_notebook(text_mask, np.ones_like(image_mask))


def mask_ignores_text_padding(text_mask, image_mask):
    return mask_notebook(np.ones_like(text_mask), image_mask)


def mask_inverted(text_mask, image_mask):
    return ~mask_notebook(text_mask, image_mask)


def mask_block_diagonal(text_mask, image_mask):
    T = text_mask.shape[1]
    m = mask_notebook(text_mask, image_mask)
    m[:, :T, T:] = False
    m[:, T:, :T] = False
    return m


def mask_causal(text_mask, image_mask):
    m = mask_notebook(text_mask, image_mask)
    return m & np.tril(np.ones(m.shape[1:], dtype=bool))


def mask_from_lengths(text_mask, image_mask):
    """Counts of real tokens, then a prefix of that length (padding assumed at the end)."""
    B, T = text_mask.shape
    N = image_mask.shape[1]
    t_len, i_len = np.sum(text_mask != 0, axis=1), np.sum(image_mask != 0, axis=1)
    real = np.concatenate([np.arange(T)[None] < t_len[:, None], np.arange(N)[None] < i_len[:, None]], axis=1)
    return (real[:, :, None] & real[:, None, :]) | np.eye(T + N, dtype=bool)


def mask_head_axis(text_mask, image_mask):
    return mask_notebook(text_mask, image_mask)[:, None]


def mask_float(text_mask, image_mask):
    return mask_notebook(text_mask, image_mask).astype(np.float32)


def mask_additive(text_mask, image_mask):
    return np.where(mask_notebook(text_mask, image_mask), 0.0, -np.inf)


def mask_pad_rows_everything(text_mask, image_mask):
    real = _real(text_mask, image_mask)
    return mask_notebook(text_mask, image_mask) | ~real[:, :, None]


def mask_one_for_batch(text_mask, image_mask):
    return mask_notebook(text_mask, image_mask)[0]


def mask_concat_axis0(text_mask, image_mask):
    real = np.concatenate([text_mask, image_mask]).astype(bool)
    return real[:, :, None] & real[:, None, :]


MASK_MISTAKES = [
    ("either token real", mask_either_real, "a pair allowed when EITHER token is real"),
    ("only the keys masked (padding attends)", mask_keys_only, "a padding position attends to the real tokens"),
    ("only the keys masked, with the diagonal", mask_keys_only_with_eye,
     "a padding position attends to the real tokens"),
    ("only the queries masked (padding attended)", mask_queries_only, "the padding is attended to"),
    ("no diagonal: empty rows", mask_no_diagonal, "a padding position's row is empty"),
    ("all True", mask_all_true, "the padding is not masked at all"),
    ("[image; text] order", mask_image_first, "the image tokens first"),
    ("image padding ignored", mask_ignores_image_padding, "the image's padding ignored"),
    ("text padding ignored", mask_ignores_text_padding, "the text's padding ignored"),
    ("inverted", mask_inverted, "an inverted mask"),
    ("block-diagonal (no cross-modal attention)", mask_block_diagonal, "a block-diagonal mask"),
    ("causal", mask_causal, "a causal mask"),
    ("from the lengths (padding at the end)", mask_from_lengths, "a mask from the counts of real tokens"),
    ("(B, 1, L, L)", mask_head_axis, "a mask with a head axis"),
    ("float mask", mask_float, "expected bool"),
    ("additive mask", mask_additive, "additive float mask"),
    ("padding rows allow everything", mask_pad_rows_everything, "a padding position's row allows everything"),
    ("one mask for the batch", mask_one_for_batch, "one mask for the whole batch"),
    ("concatenated along the batch axis", mask_concat_axis0, "join them along axis 1"),
]


# ============================================================================
# clip_loss(image_emb, text_emb, temperature=0.07)


def _log_softmax(z, axis):
    z = z - z.max(axis=axis, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))


def _unit(x):
    n = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(n == 0, 1.0, n)


def clip_notebook(image_emb, text_emb, temperature=0.07):
    """The notebook's solution: normalise, cosine logits, a stable log-softmax over rows and over columns."""
    image = _unit(image_emb)
    text = _unit(text_emb)
    logits = image @ text.T / temperature                 # (B, B)
    diagonal = np.arange(len(logits))
    image_to_text = -_log_softmax(logits, axis=1)[diagonal, diagonal].mean()
    text_to_image = -_log_softmax(logits, axis=0)[diagonal, diagonal].mean()
    return float((image_to_text + text_to_image) / 2)


def clip_logsumexp(image_emb, text_emb, temperature=0.07):
    """logsumexp by hand, each direction on its own matrix, returns a NumPy scalar."""
    def one_way(z):
        top = z.max(axis=1, keepdims=True)
        lse = top[:, 0] + np.log(np.exp(z - top).sum(axis=1))
        return np.mean(lse - np.diag(z))
    norms_i = np.maximum(np.linalg.norm(image_emb, axis=-1, keepdims=True), 1e-300)
    norms_t = np.maximum(np.linalg.norm(text_emb, axis=-1, keepdims=True), 1e-300)
    z = (image_emb / norms_i) @ (text_emb / norms_t).T / temperature
    return 0.5 * one_way(z) + 0.5 * one_way(z.T)


def clip_torch(image_emb, text_emb, temperature=0.07):
    """Through torch (float64 throughout), F.cross_entropy both ways."""
    a = F.normalize(torch.from_numpy(np.asarray(image_emb, dtype=np.float64)), dim=-1)
    b = F.normalize(torch.from_numpy(np.asarray(text_emb, dtype=np.float64)), dim=-1)
    logits = a @ b.T / temperature
    targets = torch.arange(len(logits))
    return ((F.cross_entropy(logits, targets) + F.cross_entropy(logits.T, targets)) / 2).item()


def clip_loops(image_emb, text_emb, temperature=0.07):
    B = len(image_emb)
    image, text = _unit(np.asarray(image_emb, dtype=np.float64)), _unit(np.asarray(text_emb, dtype=np.float64))
    total = 0.0
    for i in range(B):
        row = np.array([image[i] @ text[j] for j in range(B)]) / temperature
        column = np.array([image[j] @ text[i] for j in range(B)]) / temperature
        total += -_log_softmax(row, 0)[i] - _log_softmax(column, 0)[i]
    return total / (2 * B)


CLIP_CORRECT = [
    ("log-softmax over rows and columns", clip_notebook),
    ("logsumexp by hand", clip_logsumexp),
    ("torch F.cross_entropy", clip_torch),
    ("loops", clip_loops),
]


def _clip(image_emb, text_emb, temperature, *, normalise=True, axis=1, scale=None, directions="both",
          combine="mean", reduce="mean", targets=None, sign=1.0):
    image, text = (_unit(image_emb), _unit(text_emb)) if normalise else (image_emb, text_emb)
    if axis == 0:
        image = image_emb / np.linalg.norm(image_emb, axis=0, keepdims=True)
        text = text_emb / np.linalg.norm(text_emb, axis=0, keepdims=True)
    logits = image @ text.T * (1 / temperature if scale is None else scale)
    B = len(logits)
    rows, cols = np.arange(B), (np.arange(B) if targets is None else targets)
    i2t = -_log_softmax(logits, 1)[rows, cols]
    t2i = -_log_softmax(logits.T, 1)[rows, cols]
    red = np.sum if reduce == "sum" else np.mean
    terms = {"both": [red(i2t), red(t2i)], "image": [red(i2t)], "text": [red(t2i)]}[directions]
    return float(sign * sum(terms) / (len(terms) if combine == "mean" else 1))


def clip_image_to_text_only(image_emb, text_emb, temperature=0.07):
    return _clip(image_emb, text_emb, temperature, directions="image")


def clip_text_to_image_only(image_emb, text_emb, temperature=0.07):
    return _clip(image_emb, text_emb, temperature, directions="text")


def clip_same_direction_twice(image_emb, text_emb, temperature=0.07):
    """The second term's softmax along the same axis: the logits not transposed."""
    image, text = _unit(image_emb), _unit(text_emb)
    logits = image @ text.T / temperature
    d = np.arange(len(logits))
    return float((-_log_softmax(logits, 1)[d, d].mean() - _log_softmax(logits, 1)[d, d].mean()) / 2)


def clip_added(image_emb, text_emb, temperature=0.07):
    return _clip(image_emb, text_emb, temperature, combine="sum")


def clip_summed_over_batch(image_emb, text_emb, temperature=0.07):
    return _clip(image_emb, text_emb, temperature, reduce="sum")


def clip_unnormalised(image_emb, text_emb, temperature=0.07):
    return _clip(image_emb, text_emb, temperature, normalise=False)


def clip_multiplied(image_emb, text_emb, temperature=0.07):
    return _clip(image_emb, text_emb, temperature, scale=temperature)


def clip_no_temperature(image_emb, text_emb, temperature=0.07):
    return _clip(image_emb, text_emb, temperature, scale=1.0)


def clip_default_01(image_emb, text_emb, temperature=0.1):
    return _clip(image_emb, text_emb, temperature)


def clip_constant_temperature(image_emb, text_emb, temperature=0.07):
    return _clip(image_emb, text_emb, 0.07)


def clip_normalised_axis0(image_emb, text_emb, temperature=0.07):
    return _clip(image_emb, text_emb, temperature, axis=0)


def clip_zero_targets(image_emb, text_emb, temperature=0.07):
    return _clip(image_emb, text_emb, temperature, targets=np.zeros(len(image_emb), dtype=int))


def clip_no_minus(image_emb, text_emb, temperature=0.07):
    return _clip(image_emb, text_emb, temperature, sign=-1.0)


def clip_positive_left_out(image_emb, text_emb, temperature=0.07):
    image, text = _unit(image_emb), _unit(text_emb)
    z = image @ text.T / temperature
    B = len(z)
    eye = np.eye(B, dtype=bool)

    def one_way(m):
        others = np.where(eye, -np.inf, m)
        top = others.max(axis=1)
        return np.mean(-np.diag(m) + top + np.log(np.exp(others - top[:, None]).sum(axis=1)))
    return float((one_way(z) + one_way(z.T)) / 2) if B > 1 else 0.0


def clip_unstable(image_emb, text_emb, temperature=0.07):
    """softmax without subtracting the max: exp(1000) is inf."""
    image, text = _unit(image_emb), _unit(text_emb)
    z = image @ text.T / temperature
    d = np.arange(len(z))
    p_rows = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    p_cols = np.exp(z) / np.exp(z).sum(axis=0, keepdims=True)
    return float((-np.log(p_rows[d, d]).mean() - np.log(p_cols[d, d]).mean()) / 2)


def clip_nan_on_zero_rows(image_emb, text_emb, temperature=0.07):
    image = image_emb / np.linalg.norm(image_emb, axis=1, keepdims=True)
    text = text_emb / np.linalg.norm(text_emb, axis=1, keepdims=True)
    z = image @ text.T / temperature
    d = np.arange(len(z))
    return float((-_log_softmax(z, 1)[d, d].mean() - _log_softmax(z, 0)[d, d].mean()) / 2)


def clip_per_pair(image_emb, text_emb, temperature=0.07):
    image, text = _unit(image_emb), _unit(text_emb)
    z = image @ text.T / temperature
    d = np.arange(len(z))
    return (-_log_softmax(z, 1)[d, d] - _log_softmax(z, 0)[d, d]) / 2


def clip_returns_logits(image_emb, text_emb, temperature=0.07):
    return _unit(image_emb) @ _unit(text_emb).T / temperature


def clip_returns_pair(image_emb, text_emb, temperature=0.07):
    return (_clip(image_emb, text_emb, temperature, directions="image"),
            _clip(image_emb, text_emb, temperature, directions="text"))


def clip_squared_temperature(image_emb, text_emb, temperature=0.07):
    return _clip(image_emb, text_emb, temperature, scale=1.0 / temperature ** 2)


def clip_global_shift(image_emb, text_emb, temperature=0.07):
    """A log-softmax shifted by the largest logit of the whole matrix, not each row's."""
    logits = _unit(image_emb) @ _unit(text_emb).T / temperature
    z = logits - logits.max()
    diagonal = np.arange(len(z))
    with np.errstate(divide="ignore"):
        i2t = -(z[diagonal, diagonal] - np.log(np.exp(z).sum(axis=1))).mean()
        t2i = -(z[diagonal, diagonal] - np.log(np.exp(z).sum(axis=0))).mean()
    return float((i2t + t2i) / 2)


CLIP_MISTAKES = [
    ("temperature squared", clip_squared_temperature, "divided by the temperature squared"),
    ("one global max shift", clip_global_shift, "shift each row (and each column"),
    ("only image to text", clip_image_to_text_only, "only one direction, image to text"),
    ("only text to image", clip_text_to_image_only, "only one direction, text to image"),
    ("the same direction twice (softmax over the wrong axis)", clip_same_direction_twice, "only one direction"),
    ("directions added", clip_added, "the two directions added, not averaged"),
    ("sum over the batch", clip_summed_over_batch, "the sum over the batch instead of the mean"),
    ("no normalisation", clip_unnormalised, "dot products instead of cosines"),
    ("temperature multiplied", clip_multiplied, "multiplied by the temperature instead of divided"),
    ("no temperature", clip_no_temperature, "not divided by the temperature"),
    ("default temperature 0.1", clip_default_01, "the default must be temperature=0.07"),
    ("temperature 0.07 always", clip_constant_temperature, "a temperature of 0.07 whatever the argument says"),
    ("normalised along axis 0", clip_normalised_axis0, "normalised along axis 0"),
    ("targets of 0", clip_zero_targets, "targets of 0 for every row"),
    ("minus sign missing", clip_no_minus, "the minus sign is missing"),
    ("positive left out of the denominator", clip_positive_left_out, "the positive left out of the denominator"),
    ("unstable softmax", clip_unstable, "subtract each row's max"),
    ("NaN on a zero row", clip_nan_on_zero_rows, "a zero row has cosine 0"),
    ("one loss per pair", clip_per_pair, "the mean over the B pairs"),
    ("the logits returned", clip_returns_logits, "the logits or the log-probabilities"),
    ("the two directions returned as a pair", clip_returns_pair, "not the pair"),
]


CATALOGUE = {
    "check_patchify": (PATCHIFY_CORRECT, PATCHIFY_MISTAKES),
    "check_joint_attention_mask": (MASK_CORRECT, MASK_MISTAKES),
    "check_clip_loss": (CLIP_CORRECT, CLIP_MISTAKES),
}
