"""plmcourse.nn.multimodal (notebook 14): the PyTorch versions against plmcourse.ref, the models' shapes,
masks and parameter counts, the pre-training pieces (masked words, matching, masked regions), and short training
runs that must learn."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import math

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


# ----------------------------------------------------------------------------
# Masked-region classification


def _picture(colour, shape, paint):
    """A WorldExample whose picture is black but for `paint`: [(first row, last row, first column, last column,
    colour name)], the rectangle's rows and columns included."""
    image = np.zeros((3, 16, 16), dtype=np.float32)
    for top, bottom, left, right, name in paint:
        rgb = np.array(data.multimodal.COLOURS[name], dtype=np.float32)[:, None, None]
        image[:, top:bottom + 1, left:right + 1] = rgb
    return data.multimodal.WorldExample(image, ["a", colour, shape], colour, shape, 1, "left")


def test_mask_patches_hides_each_patch_with_probability_p():
    hidden = mm.mask_patches(3, 16, 0.15, torch.Generator().manual_seed(0))
    assert hidden.dtype == torch.bool and hidden.shape == (3, 16)
    # torch's own uniform draw from the same generator decides: a patch is hidden where its number is below p
    assert torch.equal(hidden, torch.rand((3, 16), generator=torch.Generator().manual_seed(0)) < 0.15)
    assert torch.equal(hidden, mm.mask_patches(3, 16, 0.15, torch.Generator().manual_seed(0)))   # same seed, same
    other = mm.mask_patches(3, 16, 0.15, torch.Generator().manual_seed(1))
    assert not torch.equal(hidden, other)
    # the rate: 64,000 draws at p = 0.15 have a standard deviation of 0.0014 around it
    rate = mm.mask_patches(4000, 16, 0.15, torch.Generator().manual_seed(2)).float().mean().item()
    assert abs(rate - 0.15) < 0.006, rate
    assert not mm.mask_patches(8, 16, 0.0, torch.Generator()).any()
    assert mm.mask_patches(8, 16, 1.0, torch.Generator()).all()


def test_patch_classes_by_hand():
    assert mm.REGION_CLASSES[:3] == ("background", "red circle", "red square") and len(mm.REGION_CLASSES) == 17
    # a red square over rows 1-6 and columns 1-6: patches 0, 1 (top row of the 4 x 4 grid), 4 and 5 (second row);
    # one red pixel more at row 0, column 8 (patch 2); a stray blue pixel in patch 15 is not the shape's colour
    example = _picture("red", "square", [(1, 6, 1, 6, "red"), (0, 0, 8, 8, "red"), (15, 15, 15, 15, "blue")])
    expected = torch.zeros(1, 16, dtype=torch.long)
    expected[0, [0, 1, 2, 4, 5]] = 2   # REGION_CLASSES.index("red square")
    assert torch.equal(mm.patch_classes([example], "cpu"), expected)
    # the world's own noise (sd 0.05) changes no label
    noisy = np.clip(example.image + np.random.default_rng(0).normal(0, 0.05, example.image.shape), 0, 1)
    example.image = noisy.astype(np.float32)
    assert torch.equal(mm.patch_classes([example], "cpu"), expected)


def test_patch_classes_of_the_world_follow_its_pictures():
    """On 300 pictures of the world: the label is the picture's own colour-shape class, and only patches of the side
    the shapes are on carry it, 3 or 4 patches per shape (a triangle's apex can miss a patch)."""
    world = data.caption_world(seed=4, n_train=300, n_test=1)["train"]
    classes = mm.patch_classes(world, "cpu").reshape(-1, 4, 4)           # (B, grid row, grid column)
    for example, grid in zip(world, classes):
        label = mm.REGION_CLASSES.index(f"{example.colour} {example.shape}")
        assert set(grid.unique().tolist()) == {0, label}
        far = slice(2, 4) if example.side == "left" else slice(0, 2)
        assert (grid[:, far] == 0).all()
        assert 3 * example.count <= (grid > 0).sum() <= 4 * example.count


def test_masked_region_loss_by_hand():
    logits = torch.tensor([[[2.0, 0.0, 0.0], [5.0, -3.0, 1.0], [0.0, 1.0, 0.0]]])   # (B=1, N=3, C=3)
    targets = torch.tensor([[0, -100, 2]])                                       # patch 1 not hidden
    # -log softmax: patch 0, class 0: log(e^2 + 2) - 2 = log(1 + 2 e^-2); patch 2, class 2: log(2 + e)
    by_hand = (math.log(1 + 2 * math.exp(-2)) + math.log(2 + math.e)) / 2
    got = mm.masked_region_loss(logits, targets)
    assert got.item() == pytest.approx(by_hand, rel=1e-6)
    assert got.item() == pytest.approx(F.cross_entropy(logits[0, [0, 2]], torch.tensor([0, 2])).item(), rel=1e-6)
    nothing = mm.masked_region_loss(logits, torch.full((1, 3), -100))
    assert nothing.item() == 0.0   # not NaN


def test_masked_region_loss_ignores_the_visible_patches():
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(4, 16, 17, generator=generator, requires_grad=True)
    hidden = mm.mask_patches(4, 16, 0.3, generator)
    targets = torch.randint(0, 17, (4, 16), generator=generator).masked_fill(~hidden, -100)
    loss = mm.masked_region_loss(logits, targets)
    loss.backward()
    assert (logits.grad[~hidden] == 0).all() and (logits.grad[hidden].abs().sum(-1) > 0).all()
    changed = logits.detach().clone()
    changed[~hidden] = torch.randn(int((~hidden).sum()), 17) * 10        # other scores where nothing is hidden
    assert mm.masked_region_loss(changed, targets).item() == pytest.approx(loss.item(), rel=1e-6)


def test_the_mask_vector_replaces_a_patch_and_keeps_its_place():
    torch.manual_seed(0)
    embed = mm.PatchEmbedding(8, patch=4, maskable=True)
    with torch.no_grad():
        embed.mask.copy_(torch.arange(8.0))
    images = torch.rand(2, 3, 16, 16)
    hidden = torch.zeros(2, 16, dtype=torch.bool)
    hidden[0, 5] = hidden[1, 0] = True
    got = embed(images, hidden)
    expected = embed.proj(mm.patchify(images, 4)) + embed.pos                   # (2, 16, 8)
    assert torch.allclose(got[~hidden], expected[~hidden])
    assert torch.allclose(got[0, 5], torch.arange(8.0) + embed.pos[5])   # the mask vector at its own place
    assert torch.allclose(got[1, 0], torch.arange(8.0) + embed.pos[0])
    assert torch.equal(embed(images), expected)


def _region_batch(n=12, seed=0):
    examples, vocab, (ids, text_mask, images) = _batch(n, seed)
    masked, targets = mm.mask_words(ids, text_mask, vocab.mask, 0.3, torch.Generator().manual_seed(0))
    hidden = mm.mask_patches(n, 16, 0.3, torch.Generator().manual_seed(1))
    region = mm.patch_classes(examples, "cpu").masked_fill(~hidden, -100)
    matched = torch.tensor([1, 0] * (n // 2))
    return vocab, (masked, text_mask, images, targets, matched, region), hidden


@pytest.mark.parametrize("kind", ["single", "dual"])
def test_hidden_patches_are_invisible_to_the_model(kind):
    vocab, (ids, text_mask, images, *_), hidden = _region_batch()
    torch.manual_seed(0)
    model = (mm.SingleStream(len(vocab), d_model=32, n_layers=2, masked_regions=True) if kind == "single" else
             mm.DualStream(len(vocab), d_model=32, n_layers=1, masked_regions=True)).eval()
    noise = torch.rand(images.shape, generator=torch.Generator().manual_seed(3))
    pixel_hidden = hidden.reshape(-1, 1, 4, 1, 4, 1).expand(-1, 3, 4, 4, 4, 4).reshape(images.shape)   # (B, 3, 16, 16)
    assert torch.equal(mm.patchify(pixel_hidden.float(), 4).amax(dim=2) > 0, hidden)
    with torch.no_grad():
        before = model(ids, text_mask, images, hidden_patches=hidden)
        after = model(ids, text_mask, torch.where(pixel_hidden, noise, images), hidden_patches=hidden)
        seen = model(ids, text_mask, torch.where(pixel_hidden, images, noise), hidden_patches=hidden)
    assert all(torch.equal(a, b) for a, b in zip(before, after))   # what is hidden changes nothing
    assert not torch.allclose(before[1], seen[1])                  # what is visible does


@pytest.mark.parametrize("kind", ["single", "dual"])
def test_the_region_term_reaches_the_model_and_adds_to_the_loss(kind):
    vocab, batch, hidden = _region_batch()
    torch.manual_seed(0)
    build = mm.SingleStream if kind == "single" else mm.DualStream
    layers = {"n_layers": 2} if kind == "single" else {"n_layers": 1}
    model = build(len(vocab), d_model=32, masked_regions=True, **layers)
    total, mlm, itm, region = mm.pretraining_loss(model, *batch)
    assert total.item() == pytest.approx((mlm + itm + region).item(), rel=1e-6)
    logits = model.heads.region(model(*batch[:3], hidden_patches=hidden)[1])
    assert region.item() == pytest.approx(F.cross_entropy(logits[hidden], batch[5][hidden]).item(), rel=1e-6)
    assert region.item() == pytest.approx(math.log(17), abs=0.5)   # an untrained head is close to a uniform guess
    region.backward()
    inner = model.blocks[0] if kind == "single" else model.layers[0].image
    for name, p in (("region head", model.heads.region.weight), ("mask vector", model.image.mask),
                    ("patch projection", model.image.proj.weight), ("first layer", next(inner.parameters())),
                    ("word embeddings", model.text.tok.weight)):
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    assert model.heads.mlm.weight.grad is None or (model.heads.mlm.weight.grad == 0).all()


def test_without_the_flag_nothing_changes():
    """The comparison with and without the region term starts from the same weights and, without region targets,
    computes what it always did."""
    vocab, batch, _ = _region_batch()
    torch.manual_seed(0)
    plain = mm.SingleStream(len(vocab), d_model=32, n_layers=2)
    torch.manual_seed(0)
    with_regions = mm.SingleStream(len(vocab), d_model=32, n_layers=2, masked_regions=True)
    shared = plain.state_dict()
    extra = {k: v for k, v in with_regions.state_dict().items() if k not in shared}
    assert set(extra) == {"image.mask", "heads.region.weight", "heads.region.bias"}
    assert all(torch.equal(v, with_regions.state_dict()[k]) for k, v in shared.items())
    assert plain.heads.region is None and plain.image.mask is None
    old = mm.pretraining_loss(plain, *batch[:5])
    new = mm.pretraining_loss(with_regions, *batch[:5])
    assert old[3].item() == 0.0 and all(torch.equal(a, b) for a, b in zip(old, new))
    assert old[0].item() == pytest.approx((old[1] + old[2]).item())
    with pytest.raises(ValueError, match="masked_regions=True"):
        mm.pretraining_loss(plain, *batch)                  # region targets for a model with no region head


def test_a_short_pre_training_with_regions_learns_what_the_picture_shows():
    """200 steps: the hidden patches of shapes are named (colour and shape) far above chance (1 in 12 seen)."""
    torch.manual_seed(0)
    world = data.caption_world(seed=0, n_train=1000, n_test=200)
    vocab = data.MultimodalVocab()
    model = mm.SingleStream(len(vocab), d_model=32, n_layers=2, masked_regions=True)
    rng, words, patches = np.random.default_rng(0), torch.Generator().manual_seed(0), torch.Generator().manual_seed(1)

    def batch(step):
        examples = [world["train"][i] for i in rng.integers(0, 1000, 32)]
        captions, matched = mm.itm_batch(examples, rng)
        ids, text_mask, images = mm.world_batch(examples, vocab, "cpu", captions)
        masked, targets = mm.mask_words(ids, text_mask, vocab.mask, 0.3, words)
        hidden = mm.mask_patches(32, 16, 0.15, patches)
        region = mm.patch_classes(examples, "cpu").masked_fill(~hidden, -100)
        return masked, text_mask, images, targets, torch.as_tensor(matched), region

    train(model, batch, lambda m, b: mm.pretraining_loss(m, *b)[0], steps=200, lr=1e-2, progress=False)
    test = world["test_seen"]
    ids, text_mask, images = mm.world_batch(test, vocab, "cpu")
    classes = mm.patch_classes(test, "cpu")
    hidden = mm.mask_patches(len(test), 16, 0.15, torch.Generator().manual_seed(2)) & (classes > 0)
    logits = mm.region_logits(model, ids, text_mask, images, hidden)[hidden]          # (hidden shape patches, 17)
    named = (logits[:, 1:].argmax(dim=1) + 1 == classes[hidden]).float().mean().item()
    assert named > 0.5, named


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_masked_regions_on_cuda_agree_with_the_cpu():
    vocab, batch, _ = _region_batch()
    examples = data.caption_world(seed=0, n_train=12, n_test=1)["train"]   # _region_batch's pictures
    assert torch.equal(mm.patch_classes(examples, "cuda").cpu(), mm.patch_classes(examples, "cpu"))
    hidden = mm.mask_patches(4, 16, 0.5, torch.Generator("cuda").manual_seed(0))
    assert hidden.is_cuda and hidden.shape == (4, 16)
    torch.manual_seed(0)
    model = mm.SingleStream(len(vocab), d_model=32, n_layers=2, masked_regions=True)
    on_cpu = mm.pretraining_loss(model, *batch)
    on_gpu = mm.pretraining_loss(model.cuda(), *(b.cuda() for b in batch))
    for a, b in zip(on_cpu, on_gpu):
        assert b.is_cuda and b.item() == pytest.approx(a.item(), rel=1e-4, abs=1e-6)
