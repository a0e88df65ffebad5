"""plmcourse.nn.multimodal (notebook 14): the PyTorch versions against plmcourse.ref, the models' shapes,
masks and parameter counts, the pre-training pieces, and a short training run that must learn."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from plmcourse import data, ref
from plmcourse.nn import multimodal as mm
from plmcourse.train import train


def test_patchify_matches_ref_and_unfold():
    images = torch.randn(3, 3, 8, 12, dtype=torch.float64)
    got = mm.patchify(images, 4)
    assert torch.equal(got, torch.from_numpy(ref.patchify(images.numpy(), 4)))
    assert torch.equal(got, F.unfold(images, 4, stride=4).transpose(1, 2))
    with pytest.raises(ValueError):
        mm.patchify(torch.zeros(1, 3, 10, 8), 4)


def test_joint_mask_and_clip_loss_match_ref():
    rng = np.random.default_rng(0)
    text, image = rng.random((3, 5)) < 0.7, rng.random((3, 4)) < 0.6
    assert np.array_equal(mm.joint_attention_mask(torch.from_numpy(text), torch.from_numpy(image)).numpy(),
                          ref.joint_attention_mask(text, image))
    a, b = rng.standard_normal((6, 8)), rng.standard_normal((6, 8))
    for tau in (0.07, 0.3, 1.0):
        got = mm.clip_loss(torch.from_numpy(a), torch.from_numpy(b), tau).item()
        assert got == pytest.approx(ref.clip_loss(a, b, tau), rel=1e-12)


def test_clip_loss_gradient_against_finite_differences():
    a = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
    b = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, y: mm.clip_loss(x, y, 0.2), (a, b))


def _batch(n=20, seed=0):
    world = data.caption_world(seed=seed, n_train=n, n_test=1)
    vocab = data.MultimodalVocab()
    return world["train"], vocab, mm.world_batch(world["train"], vocab, "cpu")


def test_models_shapes_and_equal_parameters():
    examples, vocab, (ids, text_mask, images) = _batch()
    single = mm.SingleStream(len(vocab), d_model=32, n_layers=2)
    dual = mm.DualStream(len(vocab), d_model=32, n_layers=1)
    for model in (single, dual):
        t, v = model(ids, text_mask, images)
        assert t.shape == (20, 8, 32) and v.shape == (20, 16, 32)
    sizes = [sum(p.numel() for p in m.parameters()) for m in (single, dual)]
    assert abs(sizes[0] - sizes[1]) / sizes[0] < 0.03
    (_, _), weights = single(ids, text_mask, images, return_weights=True)
    assert len(weights) == 2 and weights[0].shape == (20, 4, 24, 24)
    # no weight on a padding key (but a padding query's own), and the rows sum to 1
    assert (~text_mask).any()
    allowed = mm.joint_attention_mask(text_mask, torch.ones(20, 16, dtype=torch.bool))[:, None]  # (20, 1, 24, 24)
    assert torch.all(weights[-1].masked_select(~allowed.expand(-1, 4, -1, -1)) == 0)
    assert torch.allclose(weights[-1].sum(-1), torch.ones(20, 4, 24))
    clip = mm.DualEncoder(len(vocab), d_model=32, n_layers=1, d_embed=16)
    assert clip.encode_images(images).shape == (20, 16) and clip.encode_texts(ids, text_mask).shape == (20, 16)


def test_padding_changes_nothing_for_real_tokens():
    """The single-stream output at real positions is the same whatever the padding tokens hold."""
    examples, vocab, (ids, text_mask, images) = _batch()
    model = mm.SingleStream(len(vocab), d_model=32, n_layers=2).eval()
    other = ids.masked_fill(~text_mask, vocab.mask)  # different ids in the padding
    with torch.no_grad():
        a, _ = model(ids, text_mask, images)
        b, _ = model(other, text_mask, images)
    assert torch.allclose(a[text_mask], b[text_mask], atol=1e-6)
    assert not torch.allclose(a[~text_mask], b[~text_mask])


def test_mask_words():
    examples, vocab, (ids, text_mask, images) = _batch(n=50)
    masked, targets = mm.mask_words(ids, text_mask, vocab.mask, 0.3, torch.Generator().manual_seed(0))
    chosen = masked == vocab.mask
    assert chosen.any(dim=1).all()                               # at least one per caption
    assert not chosen[:, 0].any() and not (chosen & ~text_mask).any()  # never [CLS] or padding
    assert not (ids[chosen] == vocab.sep).any()
    assert torch.equal(targets[chosen], ids[chosen]) and (targets[~chosen] == -100).all()


def test_itm_labels_follow_the_captions():
    world = data.caption_world(seed=1, n_train=200, n_test=1)["train"]
    captions, labels = mm.itm_batch(world, np.random.default_rng(0))
    assert 0.3 < 1 - labels.mean() < 0.6   # about half mismatched (a borrowed caption can be true)
    for example, words, label in zip(world, captions, labels):
        said = " ".join(words)
        true = (example.colour in words and (example.shape in said) and
                (("two" in words) == (example.count == 2)) and not ({"left", "right"} - {example.side}) & set(words))
        assert bool(label) == true


def test_a_short_pre_training_learns_the_colour():
    """200 steps are enough for the masked colour word to be read off the picture well above chance."""
    torch.manual_seed(0)
    world = data.caption_world(seed=0, n_train=1000, n_test=100)
    vocab = data.MultimodalVocab()
    model = mm.SingleStream(len(vocab), d_model=32, n_layers=2)
    rng, generator = np.random.default_rng(0), torch.Generator().manual_seed(0)

    def batch(step):
        examples = [world["train"][i] for i in rng.integers(0, 1000, 32)]
        captions, matched = mm.itm_batch(examples, rng)
        ids, text_mask, images = mm.world_batch(examples, vocab, "cpu", captions)
        masked, targets = mm.mask_words(ids, text_mask, vocab.mask, 0.3, generator)
        return masked, text_mask, images, targets, torch.as_tensor(matched)

    history = train(model, batch, lambda m, b: mm.pretraining_loss(m, *b)[0], steps=200, lr=1e-2, progress=False)
    assert np.mean(history.loss[-10:]) < np.mean(history.loss[:10]) - 0.5
    ids, text_mask, images = mm.world_batch(world["test_seen"], vocab, "cpu")
    accuracy = mm.fill_accuracy(model, ids, text_mask, images, 2, ids[:, 2], vocab.colour_ids, vocab.mask)
    assert accuracy > 0.6, accuracy


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_models_on_cuda_agree_with_the_cpu():
    examples, vocab, (ids, text_mask, images) = _batch()
    torch.manual_seed(0)
    model = mm.SingleStream(len(vocab), d_model=32, n_layers=2).eval()
    with torch.no_grad():
        t_cpu, _ = model(ids, text_mask, images)
        t_gpu, _ = model.cuda()(ids.cuda(), text_mask.cuda(), images.cuda())
    assert torch.allclose(t_cpu, t_gpu.cpu(), atol=1e-4)
    masked, targets = mm.mask_words(ids.cuda(), text_mask.cuda(), vocab.mask, 0.3,
                                    torch.Generator("cuda").manual_seed(0))
    assert masked.is_cuda and (masked == vocab.mask).any(dim=1).all()
    a, b = torch.randn(5, 8), torch.randn(5, 8)
    assert mm.clip_loss(a.cuda(), b.cuda(), 0.1).item() == pytest.approx(mm.clip_loss(a, b, 0.1).item(), rel=1e-5)
