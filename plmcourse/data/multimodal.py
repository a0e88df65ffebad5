"""A world of pictures and captions small enough for a CPU to learn (notebook 14).

Each picture is 16 x 16 RGB pixels (float32 in [0, 1], shape (3, 16, 16)), split into four 8 x 8
quadrants. It shows one or two shapes of one colour and one kind: one shape in any quadrant, or two
stacked in the left or the right half. Shapes wobble by a pixel, and every pixel gets a little noise,
so that no two pictures are alike.

Captions come from a small grammar:

    a red circle on the left          two blue squares on the right
    a green cross                     two yellow triangles

("on the left/right" is left out of about a third of the captions, so captions have two lengths
and a batch of them needs padding).

Held-out combinations: four colour-shape pairs (HELD_OUT) never occur in the training split; every
colour and every shape is seen in training, only not together. The test split of
`caption_world` holds seen and held-out pairs apart, to measure composition.

A development split (`dev_pairs`) of seen pairs, drawn from a random stream of its own, is for choosing
hyperparameters (notebook 14's learning rates, bench/multimodal.py): no test number and no training batch uses it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["COLOURS", "SHAPES", "HELD_OUT", "SIDES", "COUNTS", "IMAGE_SIZE", "WorldExample", "draw_shape",
           "draw_image", "caption_for", "caption_world", "MultimodalVocab", "blank_image",
           "SEEN", "dev_pairs"]

IMAGE_SIZE = 16
COLOURS = {"red": (0.9, 0.15, 0.1), "green": (0.15, 0.8, 0.2), "blue": (0.15, 0.3, 0.95), "yellow": (0.95, 0.85, 0.1)}
SHAPES = ("circle", "square", "triangle", "cross")
PLURAL = {"circle": "circles", "square": "squares", "triangle": "triangles", "cross": "crosses"}
SIDES = ("left", "right")
COUNTS = (1, 2)
# A Latin-square diagonal: each colour and each shape is held out with exactly one partner.
HELD_OUT = (("red", "triangle"), ("green", "cross"), ("blue", "circle"), ("yellow", "square"))
# The 12 colour-shape pairs that training shows, in caption_world's order.
SEEN = tuple((c, s) for c in COLOURS for s in SHAPES if (c, s) not in HELD_OUT)


def draw_shape(shape: str, size: int = 6) -> np.ndarray:
    """A (size, size) boolean stencil of the shape."""
    r, c = np.mgrid[0:size, 0:size] + 0.5
    centre = size / 2
    if shape == "circle":
        return (r - centre) ** 2 + (c - centre) ** 2 <= (size / 2) ** 2 * 0.85
    if shape == "square":
        return np.ones((size, size), dtype=bool)
    if shape == "triangle":  # apex at the top, base at the bottom
        return np.abs(c - centre) <= r / 2
    if shape == "cross":  # a diagonal cross, an X
        return (np.abs(r - c) < 0.5) | (np.abs(r + c - size) < 0.5)
    raise ValueError(f"unknown shape {shape!r}; choose from {SHAPES}")


def _quadrants(count: int, side: str, rng: np.random.Generator) -> list[tuple[int, int]]:
    """(row, column) quadrants, each 0 or 1: one shape in either row of `side`, or two stacked there."""
    column = SIDES.index(side)
    if count == 1:
        return [(int(rng.integers(0, 2)), column)]
    return [(0, column), (1, column)]


def draw_image(colour: str, shape: str, count: int, side: str, rng: np.random.Generator,
               noise: float = 0.05) -> np.ndarray:
    """A (3, 16, 16) float32 picture of `count` shapes of `colour` on `side`, on a dark background."""
    image = np.zeros((3, IMAGE_SIZE, IMAGE_SIZE), dtype=np.float32)
    stencil = draw_shape(shape)
    rgb = np.array(COLOURS[colour], dtype=np.float32)[:, None]  # (3, 1)
    for qr, qc in _quadrants(count, side, rng):
        top = 8 * qr + 1 + int(rng.integers(0, 2))   # a 6-pixel shape wobbles by a pixel in its 8 x 8 quadrant
        left = 8 * qc + 1 + int(rng.integers(0, 2))
        window = image[:, top:top + 6, left:left + 6]  # a view: (3, 6, 6)
        window[:, stencil] = rgb
    image += rng.normal(0.0, noise, image.shape).astype(np.float32)
    return np.clip(image, 0.0, 1.0)


def blank_image(rng: np.random.Generator | None = None, noise: float = 0.05) -> np.ndarray:
    """The background alone (with its noise): a picture with nothing in it."""
    rng = np.random.default_rng(0) if rng is None else rng
    image = rng.normal(0.0, noise, (3, IMAGE_SIZE, IMAGE_SIZE)).astype(np.float32)
    return np.clip(image, 0.0, 1.0)


def caption_for(colour: str, shape: str, count: int, side: str | None) -> list[str]:
    """The caption's words: ["a", "red", "circle", "on", "the", "left"]; side None leaves the place out."""
    words = ["a", colour, shape] if count == 1 else ["two", colour, PLURAL[shape]]
    return words + (["on", "the", side] if side is not None else [])


@dataclass
class WorldExample:
    image: np.ndarray         # (3, 16, 16) float32
    words: list[str]          # the caption
    colour: str
    shape: str
    count: int
    side: str

    @property
    def caption(self) -> str:
        return " ".join(self.words)

    @property
    def held_out(self) -> bool:
        return (self.colour, self.shape) in HELD_OUT


def _examples(n: int, rng: np.random.Generator, pairs: list[tuple[str, str]]) -> list[WorldExample]:
    out = []
    for _ in range(n):
        colour, shape = pairs[int(rng.integers(0, len(pairs)))]
        count, side = COUNTS[int(rng.integers(0, 2))], SIDES[int(rng.integers(0, 2))]
        said = side if rng.random() < 2 / 3 else None
        out.append(WorldExample(draw_image(colour, shape, count, side, rng), caption_for(colour, shape, count, said),
                                colour, shape, count, side))
    return out


def caption_world(seed: int = 0, n_train: int = 4000, n_test: int = 400) -> dict[str, list[WorldExample]]:
    """{"train": n_train examples of the 12 seen colour-shape pairs, "test_seen": n_test more of them,
    "test_held_out": n_test of the 4 held-out pairs}, all drawn from `seed`."""
    rng = np.random.default_rng(seed)
    seen = [(c, s) for c in COLOURS for s in SHAPES if (c, s) not in HELD_OUT]
    return {"train": _examples(n_train, rng, seen), "test_seen": _examples(n_test, rng, seen),
            "test_held_out": _examples(n_test, rng, list(HELD_OUT))}


def dev_pairs(seed: int = 0, n: int = 400) -> list[WorldExample]:
    """A development split: `n` examples of the 12 seen colour-shape pairs, drawn as caption_world's
    "test_seen" is, but from the first child of `seed`'s numpy SeedSequence, a stream of its own: caption_world
    at any seed draws from a different one, so its training split never holds these pictures and no test number
    uses them. Held-out pairs are left out: a choice made on them would leak the test of composition into
    the training recipe."""
    rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(1)[0])
    return _examples(n, rng, list(SEEN))


class MultimodalVocab:
    """Word <-> id for the captions, with [PAD] = 0, [CLS], [SEP], [MASK] first."""

    SPECIALS = ("[PAD]", "[CLS]", "[SEP]", "[MASK]")

    def __init__(self):
        words = ["a", "two", *COLOURS, *SHAPES, *PLURAL.values(), "on", "the", *SIDES]
        self.itos = list(self.SPECIALS) + words
        self.stoi = {w: i for i, w in enumerate(self.itos)}
        self.pad, self.cls, self.sep, self.mask = (self.stoi[s] for s in self.SPECIALS)
        self.colour_ids = [self.stoi[c] for c in COLOURS]

    def __len__(self):
        return len(self.itos)

    def encode(self, captions: list[list[str]], length: int = 8) -> tuple[np.ndarray, np.ndarray]:
        """ids (B, length) int64 as [CLS] words [SEP] [PAD]..., and the mask (B, length) bool, True = a real token."""
        ids = np.full((len(captions), length), self.pad, dtype=np.int64)
        for b, words in enumerate(captions):
            row = [self.cls, *(self.stoi[w] for w in words), self.sep]
            if len(row) > length:
                raise ValueError(f"caption {' '.join(words)!r} needs {len(row)} tokens, more than length={length}")
            ids[b, :len(row)] = row
        return ids, ids != self.pad

    def decode(self, ids) -> list[str]:
        return [self.itos[int(i)] for i in ids]
