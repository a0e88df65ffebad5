"""Text and images (notebook 14), PyTorch: patch tokens, single-stream and dual-stream encoders, CLIP.

    patchify, joint_attention_mask, clip_loss   the conventions of plmcourse.ref.multimodal, in torch
    PatchEmbedding                  pixels -> patch tokens (ViT): patchify, a linear map, a position per patch
    SingleStream                    VisualBERT / VL-BERT: one transformer over [text; image]
    DualStream                      ViLBERT / LXMERT: two streams that exchange by co-attention
    DualEncoder                     CLIP: an image encoder and a text encoder meeting only in the loss
    mask_words, itm_batch, pretraining_loss, fill_accuracy   masked modelling and image-text matching
    mask_patches, patch_classes, masked_region_loss, region_logits
                                    masked-region classification (VL-BERT, ViLBERT, LXMERT), a flag of the models
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from plmcourse.data.multimodal import COLOURS, SHAPES
from plmcourse.nn.transformer import TransformerBlock

__all__ = ["patchify", "joint_attention_mask", "clip_loss", "PatchEmbedding", "SingleStream", "DualStream",
           "DualEncoder", "mask_words", "itm_batch", "pretraining_loss", "fill_accuracy", "caption_holds",
           "similarity_matrix", "world_batch", "itm_accuracy", "REGION_CLASSES", "mask_patches", "patch_classes",
           "masked_region_loss", "region_logits"]


# ----------------------------------------------------------------------------
# The three exercises' operations, in torch


def patchify(images, patch):
    """(B, C, H, W) -> (B, N, C * patch * patch), in plmcourse.ref.patchify's order (row-major patches,
    each flattened channel, row, column). Raises ValueError when H or W is not a multiple of patch."""
    B, C, H, W = images.shape
    if H % patch or W % patch:
        raise ValueError(f"the image size {H} x {W} is not a multiple of patch={patch}")
    gh, gw = H // patch, W // patch
    x = images.reshape(B, C, gh, patch, gw, patch)          # (B, C, gh, p, gw, p)
    x = x.permute(0, 2, 4, 1, 3, 5)                          # (B, gh, gw, C, p, p)
    return x.reshape(B, gh * gw, C * patch * patch)          # (B, N, C p p)


def joint_attention_mask(text_mask, image_mask):
    """(B, T), (B, N) True = real token -> (B, T + N, T + N) bool: (query i real and key j real) or i = j
    (plmcourse.ref.joint_attention_mask)."""
    real = torch.cat([text_mask.bool(), image_mask.bool()], dim=1)    # (B, L)
    eye = torch.eye(real.shape[1], dtype=torch.bool, device=real.device)
    return (real[:, :, None] & real[:, None, :]) | eye                  # (B, L, L)


def clip_loss(image_emb, text_emb, temperature=0.07):
    """CLIP's symmetric loss (plmcourse.ref.clip_loss): cosine logits / temperature, the mean of the
    image-to-text and text-to-image cross-entropies with the diagonal as targets. A 0-d tensor."""
    logits = similarity_matrix(image_emb, text_emb) / temperature    # (B, B)
    targets = torch.arange(len(logits), device=logits.device)
    return (F.cross_entropy(logits, targets) + F.cross_entropy(logits.T, targets)) / 2


def similarity_matrix(image_emb, text_emb):
    """Cosine similarities (B_img, B_txt) of the L2-normalised rows."""
    return F.normalize(image_emb, dim=-1) @ F.normalize(text_emb, dim=-1).T


# ----------------------------------------------------------------------------
# Images as tokens


class PatchEmbedding(nn.Module):
    """ViT's first step: cut the image into patches, map each to d_model, add a learned position per patch.

    maskable: also learn a mask vector, put in place of a hidden patch's content (masked-region modelling: the
    picture's [MASK]). It starts at zero, so creating it draws no random number: a model built with it starts
    from the same weights as one built without."""

    def __init__(self, d_model, patch=4, channels=3, image_size=16, maskable=False):
        super().__init__()
        self.patch = patch
        self.n_patches = (image_size // patch) ** 2
        self.proj = nn.Linear(channels * patch * patch, d_model)
        self.pos = nn.Parameter(torch.randn(self.n_patches, d_model) * 0.02)
        self.mask = nn.Parameter(torch.zeros(d_model)) if maskable else None

    def forward(self, images, hidden_patches=None):
        """images (B, C, H, W) -> (B, N, d_model); hidden_patches (B, N) bool or None: True = that patch's content is
        replaced by the mask vector (its position is kept, so the model knows where the hidden patch is)."""
        content = self.proj(patchify(images, self.patch))                # (B, N, d)
        if hidden_patches is not None:
            content = torch.where(hidden_patches[..., None], self.mask, content)   # (B, N, d)
        return content + self.pos


class TextEmbedding(nn.Module):
    """Token embeddings plus a learned position per place."""

    def __init__(self, vocab_size, d_model, max_len=8):
        super().__init__()
        self.tok = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Parameter(torch.randn(max_len, d_model) * 0.02)

    def forward(self, ids):
        """ids (B, T) -> (B, T, d_model)."""
        return self.tok(ids) + self.pos[: ids.shape[1]]


class _Heads(nn.Module):
    """The pre-training heads: a word at every text position (MLM), match or not from [CLS] (ITM), and, when
    region_classes > 0, what each patch shows (masked-region classification). The region head is made last, so
    the other weights start the same with it or without it."""

    def __init__(self, d_model, vocab_size, region_classes=0):
        super().__init__()
        self.mlm = nn.Linear(d_model, vocab_size)
        self.itm = nn.Linear(d_model, 2)
        self.region = nn.Linear(d_model, region_classes) if region_classes else None


class SingleStream(nn.Module):
    """VisualBERT / VL-BERT: one transformer reads the caption's tokens and the image's patches together.

    Each token's embedding is its content (a word, or a patch's pixels through a linear map), plus its
    position within its modality, plus a type embedding saying which modality it belongs to (BERT's
    segment embedding, reused). Every layer's self-attention mixes text and image freely.

    masked_regions: add a mask vector for hidden patches and a head that classifies them (REGION_CLASSES).
    """

    def __init__(self, vocab_size, d_model=64, n_layers=4, n_heads=4, d_ff=None, patch=4, image_size=16,
                 max_len=8, masked_regions=False):
        super().__init__()
        self.text = TextEmbedding(vocab_size, d_model, max_len)
        self.image = PatchEmbedding(d_model, patch, image_size=image_size, maskable=masked_regions)
        self.types = nn.Embedding(2, d_model)   # 0: text, 1: image
        self.blocks = nn.ModuleList(TransformerBlock(d_model, n_heads, d_ff) for _ in range(n_layers))
        self.norm = nn.LayerNorm(d_model)
        self.heads = _Heads(d_model, vocab_size, len(REGION_CLASSES) if masked_regions else 0)

    def forward(self, ids, text_mask, images, image_mask=None, return_weights=False, hidden_patches=None):
        """ids, text_mask (B, T); images (B, 3, H, W); image_mask (B, N) or None (every patch real); hidden_patches
        (B, N) bool or None: the patches whose content the model does not see (masked-region modelling).
        Returns (text_hidden (B, T, d), image_hidden (B, N, d)), and each layer's attention weights
        (B, n_heads, T + N, T + N) when return_weights."""
        t = self.text(ids) + self.types.weight[0]          # (B, T, d)
        v = self.image(images, hidden_patches) + self.types.weight[1]   # (B, N, d)
        if image_mask is None:
            image_mask = torch.ones(v.shape[:2], dtype=torch.bool, device=v.device)
        x = torch.cat([t, v], dim=1)                       # (B, T + N, d)
        mask = joint_attention_mask(text_mask, image_mask)[:, None]   # (B, 1, L, L): the same for every head
        weights = []
        for block in self.blocks:
            if return_weights:
                x, w = block(x, mask=mask, return_weights=True)
                weights.append(w)
            else:
                x = block(x, mask=mask)
        x = self.norm(x)
        T = ids.shape[1]
        out = (x[:, :T], x[:, T:])
        return (out, weights) if return_weights else out


class CoAttentionLayer(nn.Module):
    """ViLBERT's co-attention layer: each stream attends to itself and then, by cross-attention, to the
    other stream (queries from one modality, keys and values from the other); both read the other's
    previous state, so the exchange is simultaneous."""

    def __init__(self, d_model, n_heads, d_ff):
        super().__init__()
        self.text = TransformerBlock(d_model, n_heads, d_ff, cross_attention=True)
        self.image = TransformerBlock(d_model, n_heads, d_ff, cross_attention=True)

    def forward(self, t, v, text_mask, image_mask):
        """t (B, T, d), v (B, N, d) -> the same shapes."""
        text_keys = _keys(text_mask)    # (B, 1, 1, T): which text tokens may be attended to
        image_keys = _keys(image_mask)  # (B, 1, 1, N)
        t_new = self.text(t, mask=text_keys, context=v, context_mask=image_keys)
        v_new = self.image(v, mask=image_keys, context=t, context_mask=text_keys)
        return t_new, v_new


def _keys(mask):
    """A padding mask over keys, (B, 1, 1, L); a row of padding alone keeps its first key (never empty)."""
    mask = mask.bool().clone()
    mask[:, 0] |= ~mask.any(dim=1)
    return mask[:, None, None, :]


class DualStream(nn.Module):
    """ViLBERT / LXMERT: a text stream and an image stream, joined only by co-attention layers.

    With d_ff = 2 d_model, two co-attention layers hold as many weights as a four-layer single stream with
    d_ff = 4 d_model: each co-attention layer has two blocks of self-attention (4 d^2), cross-attention
    (4 d^2) and a feed-forward network (4 d^2), 24 d^2, against 12 d^2 per single-stream layer.
    """

    def __init__(self, vocab_size, d_model=64, n_layers=2, n_heads=4, d_ff=None, patch=4, image_size=16,
                 max_len=8, masked_regions=False):
        super().__init__()
        d_ff = 2 * d_model if d_ff is None else d_ff
        self.text = TextEmbedding(vocab_size, d_model, max_len)
        self.image = PatchEmbedding(d_model, patch, image_size=image_size, maskable=masked_regions)
        self.layers = nn.ModuleList(CoAttentionLayer(d_model, n_heads, d_ff) for _ in range(n_layers))
        self.text_norm = nn.LayerNorm(d_model)
        self.image_norm = nn.LayerNorm(d_model)
        self.heads = _Heads(d_model, vocab_size, len(REGION_CLASSES) if masked_regions else 0)

    def forward(self, ids, text_mask, images, image_mask=None, hidden_patches=None):
        """As SingleStream.forward: (text_hidden (B, T, d), image_hidden (B, N, d))."""
        t, v = self.text(ids), self.image(images, hidden_patches)   # (B, T, d), (B, N, d)
        if image_mask is None:
            image_mask = torch.ones(v.shape[:2], dtype=torch.bool, device=v.device)
        for layer in self.layers:
            t, v = layer(t, v, text_mask, image_mask)
        return self.text_norm(t), self.image_norm(v)


class DualEncoder(nn.Module):
    """CLIP: an image encoder and a text encoder, each ending in a projection to a shared space.

    The image's vector is the mean of its patch states, the caption's the state of its [CLS] token.
    The two never see each other: they meet only in the contrastive loss."""

    def __init__(self, vocab_size, d_model=64, n_layers=2, n_heads=4, d_embed=32, patch=4, image_size=16,
                 max_len=8):
        super().__init__()
        self.text = TextEmbedding(vocab_size, d_model, max_len)
        self.image = PatchEmbedding(d_model, patch, image_size=image_size)
        self.text_blocks = nn.ModuleList(TransformerBlock(d_model, n_heads) for _ in range(n_layers))
        self.image_blocks = nn.ModuleList(TransformerBlock(d_model, n_heads) for _ in range(n_layers))
        self.text_proj = nn.Sequential(nn.LayerNorm(d_model), nn.Linear(d_model, d_embed))
        self.image_proj = nn.Sequential(nn.LayerNorm(d_model), nn.Linear(d_model, d_embed))

    def encode_images(self, images):
        """(B, 3, H, W) -> (B, d_embed)."""
        v = self.image(images)                     # (B, N, d)
        for block in self.image_blocks:
            v = block(v)
        return self.image_proj(v.mean(dim=1))      # (B, d_embed)

    def encode_texts(self, ids, text_mask):
        """(B, T) -> (B, d_embed)."""
        t = self.text(ids)                         # (B, T, d)
        keys = _keys(text_mask)                    # (B, 1, 1, T)
        for block in self.text_blocks:
            t = block(t, mask=keys)
        return self.text_proj(t[:, 0])             # [CLS]: (B, d_embed)


# ----------------------------------------------------------------------------
# Pre-training: masked words conditioned on the image, and image-text matching


def mask_words(ids, text_mask, mask_id, p, generator):
    """Replace each word (not [CLS], [SEP] or padding) by [MASK] with probability p, at least one per caption.
    Returns (masked ids, targets (B, T) with -100 where nothing is predicted). BERT's 80/10/10 split is left
    out: every chosen word becomes [MASK]."""
    words = text_mask.clone()
    words[:, 0] = False                                    # [CLS]
    lengths = text_mask.sum(dim=1)
    words[torch.arange(len(ids)), lengths - 1] = False     # [SEP]
    chosen = (torch.rand(ids.shape, generator=generator, device=ids.device) < p) & words
    # at least one word per caption: otherwise pick one at random
    none = ~chosen.any(dim=1)
    scores = torch.rand(ids.shape, generator=generator, device=ids.device).masked_fill(~words, -1.0)
    chosen[none, scores[none].argmax(dim=1)] = True
    masked = ids.masked_fill(chosen, mask_id)
    targets = ids.masked_fill(~chosen, -100)
    return masked, targets


def caption_holds(example, other):
    """Whether `other`'s caption is true of `example`'s picture (same colour, shape and count; its side, if
    it names one, is the picture's)."""
    side_said = other.words[-1] if other.words[-1] in ("left", "right") else None
    return (example.colour == other.colour and example.shape == other.shape and example.count == other.count
            and side_said in (None, example.side))


def itm_batch(examples, rng, p_negative=0.5):
    """The caption each picture is shown with for image-text matching: its own, or (with probability
    p_negative) another example's from the batch. Returns (captions, labels), label 1 where the shown
    caption is true of the picture (a borrowed caption can happen to be true)."""
    B = len(examples)
    shown, labels = [], []
    for i, example in enumerate(examples):
        other = examples[(i + int(rng.integers(1, B))) % B] if rng.random() < p_negative and B > 1 else example
        shown.append(other.words)
        labels.append(int(caption_holds(example, other)))
    return shown, np.array(labels)


def pretraining_loss(model, ids, text_mask, images, targets, itm_labels, region_targets=None):
    """Masked language modelling on the pairs that match, plus image-text matching on all of them, plus, when
    region_targets (B, N) is given, masked-region classification: the patches with a target (not -100) are
    hidden from the model, and their class is predicted from the other patches and the caption.
    Returns (total, mlm, itm, region) as 0-d tensors (region is 0 without region_targets)."""
    if region_targets is not None and model.heads.region is None:
        raise ValueError("region_targets need a model built with masked_regions=True (a mask vector and a region head)")
    hidden = None if region_targets is None else region_targets != -100      # (B, N)
    t, v = model(ids, text_mask, images, hidden_patches=hidden)    # (B, T, d), (B, N, d)
    itm = F.cross_entropy(model.heads.itm(t[:, 0]), itm_labels)    # from [CLS]
    region = itm.new_zeros(()) if hidden is None else masked_region_loss(model.heads.region(v), region_targets)
    matched = itm_labels == 1
    if not matched.any():   # a batch with no matching pair has no word to predict
        return itm + region, itm.new_zeros(()), itm, region
    logits = model.heads.mlm(t[matched])                           # (B', T, V)
    mlm = F.cross_entropy(logits.flatten(0, 1), targets[matched].flatten(), ignore_index=-100)
    return mlm + itm + region, mlm, itm, region


@torch.no_grad()
def fill_accuracy(model, ids, text_mask, images, position, answers, choices, mask_id):
    """Put [MASK] at `position` of every caption and return the fraction of captions where, among the
    word ids `choices`, the model's most likely word is the answer (answers: (B,) word ids)."""
    masked = ids.clone()
    masked[:, position] = mask_id
    t, _ = model(masked, text_mask, images)
    scores = model.heads.mlm(t[:, position])[:, choices]          # (B, len(choices))
    picked = torch.as_tensor(choices, device=ids.device)[scores.argmax(dim=1)]
    return (picked == answers).float().mean().item()


def world_batch(examples, vocab, device, captions=None):
    """(ids (B, 8), text_mask (B, 8), images (B, 3, 16, 16)) on `device` for plmcourse.data.caption_world's
    examples; captions: the words to show instead of each example's own (image-text matching)."""
    ids, mask = vocab.encode(captions if captions is not None else [e.words for e in examples])
    images = np.stack([e.image for e in examples])
    return (torch.as_tensor(ids, device=device), torch.as_tensor(mask, device=device),
            torch.as_tensor(images, device=device))


@torch.no_grad()
def itm_accuracy(model, ids, text_mask, images, labels):
    """The fraction of pairs whose match / no-match the [CLS] head gets right."""
    t, _ = model(ids, text_mask, images)
    return (model.heads.itm(t[:, 0]).argmax(dim=1) == labels).float().mean().item()


# ----------------------------------------------------------------------------
# Masked-region modelling: hide some patches, predict what they show
#
# LXMERT pre-trains two masked-region objectives: regress the hidden region's detector features, and classify it
# with the label the detector gave it. VL-BERT only classifies, and so does ViLBERT (against the detector's whole
# distribution over classes). We classify, because our world supports it best: it knows exactly what every patch
# shows (the background, or a part of a red circle...), a label no detector gives as cleanly, and a class has an
# accuracy and a chance level to compare with. Regression would spend its effort elsewhere: most of a patch's 48
# numbers are background noise that no model can predict (a floor under the squared error), and a shape's
# one-pixel wobble makes its exact pixels a guess even where its class is certain.

# What a patch can show: 0 is the background, 1 + i the i-th colour-shape pair (4 of the 16 never in training).
REGION_CLASSES = ("background", *(f"{colour} {shape}" for colour in COLOURS for shape in SHAPES))


def mask_patches(batch_size, n_patches, p, generator):
    """(B, N) bool, True = a patch hidden from the model, each independently with probability p (ViLBERT, LXMERT
    and VL-BERT hide about 15% of the regions). Drawn on the generator's device."""
    return torch.rand((batch_size, n_patches), generator=generator, device=generator.device) < p


def patch_classes(examples, device, patch=4):
    """(B, N) int64: what each patch of each example's picture shows, an index into REGION_CLASSES: the picture's
    colour-shape class where the patch holds a pixel of the shape's colour (within 0.25 in every channel; the
    noise is 0.05), 0 (background) elsewhere."""
    images = torch.as_tensor(np.stack([e.image for e in examples]), device=device)         # (B, 3, H, W)
    rgb = torch.tensor([COLOURS[e.colour] for e in examples], device=device)[:, :, None, None]   # (B, 3, 1, 1)
    on_shape = (images - rgb).abs().amax(dim=1, keepdim=True) < 0.25                     # (B, 1, H, W)
    shows_shape = patchify(on_shape.float(), patch).amax(dim=2) > 0                        # (B, N)
    label = torch.tensor([REGION_CLASSES.index(f"{e.colour} {e.shape}") for e in examples], device=device)
    return torch.where(shows_shape, label[:, None], 0)                                    # (B, N)


def masked_region_loss(logits, region_targets):
    """The mean cross-entropy of logits (B, N, C) over the hidden patches, those whose target is not -100;
    0 when no patch is hidden (a mean over nothing would be NaN)."""
    if not (region_targets != -100).any():
        return logits.new_zeros(())
    return F.cross_entropy(logits.flatten(0, 1), region_targets.flatten(), ignore_index=-100)


@torch.no_grad()
def region_logits(model, ids, text_mask, images, hidden):
    """(B, N, len(REGION_CLASSES)): the region head's scores at every patch, with the patches of `hidden` (B, N)
    hidden from the model (only those are a test: a visible patch's class can be read off its own pixels)."""
    _, v = model(ids, text_mask, images, hidden_patches=hidden)
    return model.heads.region(v)
