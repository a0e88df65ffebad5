"""Fresh student-style implementations for notebook 00 (welcome): normalize(v)."""
import numpy as np


# ---- normalize -------------------------------------------------------------
def normalize_l1(v):
    """WRONG: divides by the L1 norm (sum of absolute values) instead of the Euclidean norm."""
    v = np.asarray(v, dtype=np.float64)
    total = np.abs(v).sum()
    if total == 0:
        return np.zeros_like(v)
    return v / total


def normalize_in_place(v):
    """WRONG: divides v in place (v /= norm), so the caller's array is changed."""
    norm = np.linalg.norm(v)
    if norm == 0:
        return np.zeros(v.shape)
    v /= norm
    return v


def normalize_eps(v):
    """WRONG: adds an epsilon to the norm; tiny vectors do not come out with length 1."""
    v = np.asarray(v, dtype=np.float64)
    return v / (np.sqrt(np.sum(v ** 2)) + 1e-8)


def normalize_big_threshold(v):
    """WRONG: treats every vector with norm below 1e-3 as the zero vector and returns zeros."""
    v = np.asarray(v, dtype=np.float64)
    norm = np.linalg.norm(v)
    if norm < 1e-3:
        return np.zeros_like(v)
    return v / norm


def normalize_scalar_zero(v):
    """WRONG: for the zero vector returns the scalar 0.0 instead of an array of zeros of v's shape."""
    v = np.asarray(v, dtype=np.float64)
    norm = np.linalg.norm(v)
    if norm == 0:
        return 0.0
    return v / norm


def normalize_int_buffer(v):
    """WRONG: writes the result into np.zeros_like(v); an integer input gives an integer (truncated) result."""
    v = np.asarray(v)
    out = np.zeros_like(v)
    norm = np.sqrt((v * v).sum())
    if norm > 0:
        out[...] = v / norm
    return out


def normalize_max_scaled(v):
    """CORRECT: rescales by the largest |entry| first (no overflow), then divides by the Euclidean norm."""
    v = np.asarray(v, dtype=np.float64)
    scale = np.max(np.abs(v)) if v.size else 0.0
    if scale == 0:
        return np.zeros_like(v)
    w = v / scale
    return w / np.sqrt(np.dot(w, w))


def normalize_divide_where(v):
    """CORRECT: np.divide with where= on a fresh zeros array; zero vectors keep the zeros."""
    v = np.asarray(v, dtype=np.float64)
    norm = np.sqrt(np.sum(v * v))
    out = np.zeros(v.shape, dtype=np.float64)
    np.divide(v, norm, out=out, where=np.full(v.shape, norm > 0))
    return out


FRESH = {
    "check_normalize": {
        "wrong": [
            ("L1 norm", normalize_l1, "Divides by the sum of absolute values, not the Euclidean length."),
            ("in-place division", normalize_in_place, "Divides v in place, changing the caller's array."),
            ("epsilon in the denominator", normalize_eps,
             "Adds 1e-8 to the norm, so a tiny non-zero vector does not get length 1."),
            ("too large zero threshold", normalize_big_threshold,
             "Returns zeros for any vector shorter than 1e-3 instead of normalising it."),
            ("scalar for zero vector", normalize_scalar_zero,
             "Returns the scalar 0.0 for a zero vector instead of zeros of v's shape."),
            ("integer output buffer", normalize_int_buffer,
             "Stores the result in zeros_like(v), so an integer vector gives truncated integer zeros."),
        ],
        "correct": [
            ("rescale by max first", normalize_max_scaled),
            ("np.divide with where", normalize_divide_where),
        ],
    },
}
