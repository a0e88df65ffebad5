"""plmcourse.ref.multimodal and plmcourse.data.multimodal (notebook 14): the references against cases worked by
hand and against PyTorch's own functions (F.unfold for the patches, F.cross_entropy for CLIP's loss)."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from plmcourse import data, ref
from plmcourse.data import multimodal as world


@pytest.mark.parametrize("B, C, H, W, p", [(2, 3, 8, 8, 4), (1, 1, 4, 6, 2), (3, 2, 9, 6, 3), (2, 3, 16, 16, 4),
                                           (1, 3, 4, 4, 1), (2, 4, 8, 8, 8)])
def test_patchify_is_torch_unfold_transposed(B, C, H, W, p):
    images = np.random.default_rng(0).standard_normal((B, C, H, W))
    unfolded = F.unfold(torch.from_numpy(images), kernel_size=p, stride=p)   # (B, C p p, N)
    assert np.array_equal(ref.patchify(images, p), unfolded.transpose(1, 2).numpy())


def test_patchify_is_a_vit_conv_patch_embedding():
    """A Conv2d with kernel = stride = patch is ViT's patch embedding: the same as patchify, then a linear map
    whose weight is the conv's kernel flattened (C, p, p) -> C p p."""
    rng = np.random.default_rng(1)
    images = rng.standard_normal((2, 3, 8, 12))
    conv = torch.nn.Conv2d(3, 5, kernel_size=4, stride=4).double()
    with torch.no_grad():
        by_conv = conv(torch.from_numpy(images)).flatten(2).transpose(1, 2).numpy()   # (B, N, 5)
    weight = conv.weight.detach().numpy().reshape(5, -1)
    by_patches = ref.patchify(images, 4) @ weight.T + conv.bias.detach().numpy()
    assert np.allclose(by_conv, by_patches, atol=1e-12)


def test_patchify_round_trip_and_errors():
    images = np.random.default_rng(2).integers(0, 255, (2, 3, 12, 8)).astype(np.uint8)
    patches = ref.patchify(images, 4)
    assert patches.dtype == np.uint8 and patches.shape == (2, 6, 48)
    assert np.array_equal(ref.unpatchify(patches, 4, 12, 8), images)
    for H, W in ((10, 8), (8, 10), (6, 6)):
        with pytest.raises(ValueError, match="multiple of patch"):
            ref.patchify(np.zeros((1, 3, H, W)), 4)


def test_joint_mask_rows_and_columns():
    text = np.array([[True, True, False], [True, False, False]])
    image = np.array([[True, False], [False, False]])
    mask = ref.joint_attention_mask(text, image)
    assert mask.shape == (2, 5, 5)
    for b in range(2):
        real = np.concatenate([text[b], image[b]])
        for i in range(5):
            assert mask[b, i].tolist() == [(real[i] and real[j]) or i == j for j in range(5)]
    assert mask.any(axis=-1).all()   # no empty row: a softmax never sees only -inf
    assert np.array_equal(ref.joint_attention_mask(text.astype(int), image.astype(int)), mask)


def test_clip_loss_against_torch_cross_entropy():
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((6, 5)), rng.standard_normal((6, 5))
    for tau in (0.07, 0.5, 1.0, 0.001):
        logits = F.normalize(torch.from_numpy(a), dim=1) @ F.normalize(torch.from_numpy(b), dim=1).T / tau
        y = torch.arange(6)
        want = ((F.cross_entropy(logits, y) + F.cross_entropy(logits.T, y)) / 2).item()
        assert ref.clip_loss(a, b, tau) == pytest.approx(want, rel=1e-10)


def test_clip_loss_properties():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((4, 3))
    # symmetric in its two arguments; invariant to each row's length; zero rows give cosine 0
    assert ref.clip_loss(a, a * 2.0) == pytest.approx(ref.clip_loss(a * 5.0, a))
    b = rng.standard_normal((4, 3))
    assert ref.clip_loss(a, b) == pytest.approx(ref.clip_loss(b, a))
    z = b.copy()
    z[1] = 0
    assert np.isfinite(ref.clip_loss(a, z))
    # all cosines equal (every row the same): each softmax is uniform, the loss is log B
    assert ref.clip_loss(np.ones((4, 3)), np.ones((4, 3))) == pytest.approx(np.log(4))


def test_recall_at_k_by_hand():
    similarity = np.array([[0.9, 0.1, 0.0], [0.8, 0.7, 0.1], [0.3, 0.2, 0.1]])
    assert ref.recall_at_k(similarity, 1) == pytest.approx(1 / 3)
    assert ref.recall_at_k(similarity, 2) == pytest.approx(2 / 3)
    assert ref.recall_at_k(similarity, 3) == 1.0
    relevant = np.eye(3, dtype=bool)
    relevant[2, 0] = True
    assert ref.recall_at_k(similarity, 1, relevant) == pytest.approx(2 / 3)


def test_the_world():
    w = data.caption_world(seed=0, n_train=300, n_test=50)
    assert {len(v) for v in w.values()} == {300, 50} and len(w["test_held_out"]) == 50
    assert not any(e.held_out for e in w["train"] + w["test_seen"])
    assert all(e.held_out for e in w["test_held_out"])
    colours = {e.colour for e in w["train"]}
    shapes = {e.shape for e in w["train"]}
    assert colours == set(world.COLOURS) and shapes == set(world.SHAPES)  # each seen, only not together
    e = w["train"][0]
    assert e.image.shape == (3, 16, 16) and e.image.dtype == np.float32 and 0 <= e.image.min() <= e.image.max() <= 1
    lengths = {len(x.words) for x in w["train"]}
    assert lengths == {3, 6}  # "a red circle" and "a red circle on the left": captions need padding
    # the drawn shape has the colour its caption says, on its side
    rgb = np.array(world.COLOURS[e.colour])
    half = e.image[:, :, :8] if e.side == "left" else e.image[:, :, 8:]
    other = e.image[:, :, 8:] if e.side == "left" else e.image[:, :, :8]
    near = lambda x: (np.abs(x - rgb[:, None, None]).max(axis=0) < 0.25).sum()  # noqa: E731
    assert near(half) >= 16 and near(other) == 0
    # the same seed, the same world
    again = data.caption_world(seed=0, n_train=300, n_test=50)
    assert np.array_equal(again["train"][5].image, w["train"][5].image)


def test_the_vocabulary():
    vocab = data.MultimodalVocab()
    ids, mask = vocab.encode([["a", "red", "circle"], ["two", "blue", "squares", "on", "the", "left"]])
    assert ids.shape == (2, 8) and mask.sum(1).tolist() == [5, 8]
    assert vocab.decode(ids[0][:5]) == ["[CLS]", "a", "red", "circle", "[SEP]"] and ids[0, 5] == vocab.pad
    with pytest.raises(ValueError):
        vocab.encode([["a"] * 8])


def test_shapes_differ():
    stencils = {s: world.draw_shape(s) for s in world.SHAPES}
    for a in world.SHAPES:
        for b in world.SHAPES:
            if a != b:
                assert (stencils[a] != stencils[b]).sum() >= 6


def test_the_dev_split():
    dev = world.dev_pairs(seed=0, n=50)
    assert len(dev) == 50 and not any(e.held_out for e in dev)   # seen pairs only: held-out ones stay a test
    assert {(e.colour, e.shape) for e in world.dev_pairs(seed=0, n=400)} == set(world.SEEN)
    assert len(world.SEEN) == 12 and not set(world.SEEN) & set(world.HELD_OUT)
    # its own stream: no picture of the training or test splits, at this seed or the next
    w = data.caption_world(seed=0, n_train=4000, n_test=400)
    drawn = {e.image.tobytes() for split in (w, data.caption_world(seed=1, n_train=400, n_test=50))
             for examples in split.values() for e in examples}
    assert not any(e.image.tobytes() in drawn for e in dev)
    # the same seed, the same split; drawing it leaves caption_world as it was
    assert np.array_equal(world.dev_pairs(seed=0, n=50)[7].image, dev[7].image)
    assert not np.array_equal(world.dev_pairs(seed=1, n=50)[7].image, dev[7].image)
    assert np.array_equal(data.caption_world(seed=0, n_train=4000, n_test=400)["train"][5].image, w["train"][5].image)
