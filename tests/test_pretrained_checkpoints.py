"""The course's own checkpoints (plmcourse.pretrained.checkpoints): the shipped tiny BERT and tiny GPT
load, score on their held-out data what their files say, beat word and character frequencies by
far, and really model their corpora. Rebuilding them takes minutes: that is bench/checkpoints.py.
"""

import plmcourse  # noqa: F401  (must come before numpy/torch)

import dataclasses
import json

import numpy as np
import pytest
import torch

from plmcourse import data
from plmcourse.data import reviews
from plmcourse.pretrained.checkpoints import (
    BUILD_COMMAND,
    CHECKPOINTS,
    WEIGHTS_DIR,
    heldout_batch,
    heldout_loss,
    load_checkpoint,
    main,
)

NAMES = list(CHECKPOINTS)
cuda = pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(),
                                                                        reason="needs a CUDA device")])


@pytest.fixture(scope="module", params=NAMES)
def checkpoint(request):
    return load_checkpoint(request.param, device="cpu")


@pytest.fixture(scope="module")
def bert():
    return load_checkpoint("tiny-bert", device="cpu")


def heldout_targets(checkpoint):
    """The ids the held-out loss scores: BERT's masked words, or every held-out character but the first."""
    batch = heldout_batch(checkpoint)
    if checkpoint.metadata["model"] == "BertForPreTraining":
        labels = batch[3]
        return labels[labels != -100].numpy()
    return batch[:, 1:].reshape(-1).numpy()


def entropy(ids):
    """In-sample entropy of the ids' own frequencies: no unigram model scores them lower."""
    p = np.bincount(ids) / len(ids)
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def one_sentence(message):
    return message.endswith(".") and ". " not in message and "\n" not in message


# ----------------------------------------------------------------------------
# The files


def test_the_shipped_file_is_the_one_its_spec_describes(checkpoint):
    name = checkpoint.name
    path = WEIGHTS_DIR / f"{name}.safetensors"
    assert path.stat().st_size <= 5e6
    meta = checkpoint.metadata
    assert json.loads(meta["spec"]) == dataclasses.asdict(CHECKPOINTS[name]), \
        f"CHECKPOINTS[{name!r}] changed since the file was built: run `{BUILD_COMMAND} {name}`"
    assert int(meta["seed"]) == CHECKPOINTS[name].seed and int(meta["steps"]) == CHECKPOINTS[name].steps
    assert meta["model"] == CHECKPOINTS[name].model == type(checkpoint.model).__name__
    stored, loaded = json.loads(meta["config"]), dataclasses.asdict(checkpoint.config)
    assert {k: loaded[k] for k in stored} == stored   # a field added to the config class later keeps its default
    for key in ("torch_version", "heldout_loss_description", "python_version"):
        assert meta[key]
    history = json.loads(meta["history"])
    assert len(history["train_loss"]) == CHECKPOINTS[name].steps
    assert history["heldout_loss"][-1] == pytest.approx(float(meta["heldout_loss"]), abs=1e-4)


def test_recomputed_heldout_loss_equals_the_saved_one(checkpoint):
    assert heldout_loss(checkpoint) == pytest.approx(float(checkpoint.metadata["heldout_loss"]), rel=1e-4)


def test_heldout_loss_beats_the_unigram_baseline_by_far(checkpoint):
    loss = float(checkpoint.metadata["heldout_loss"])
    floor = entropy(heldout_targets(checkpoint))  # the best any frequency-only model can do on these targets
    saved_unigram = float(checkpoint.metadata["baseline_unigram_loss"])
    assert saved_unigram >= floor - 1e-9   # the saved baseline is a real unigram cross-entropy
    if checkpoint.metadata["model"] == "BertForPreTraining":  # tiny-bert 0.76, tiny-bert-reviews 0.65 of 3.8
        assert loss < 0.3 * floor          # notebook 04's 400-step model asserts < 0.5
    else:
        assert loss < floor - 1.2          # about 3.3 nats per character for frequencies alone
        assert loss < float(checkpoint.metadata["baseline_bigram_loss"]) - 0.6


def test_heldout_loss_sees_a_changed_model(checkpoint):
    # The check above could not fail if heldout_loss ignored the weights.
    scrambled = dataclasses.replace(checkpoint, model=type(checkpoint.model)(checkpoint.config).eval())
    assert heldout_loss(scrambled) > float(checkpoint.metadata["heldout_loss"]) + 1.0


def test_heldout_data_that_no_longer_matches_the_file_is_refused(checkpoint):
    changed = dataclasses.replace(checkpoint, metadata={**checkpoint.metadata, "heldout_sha256": "0" * 64})
    with pytest.raises(ValueError, match="rebuild it with") as error:
        heldout_loss(changed)
    assert one_sentence(str(error.value))


# ----------------------------------------------------------------------------
# Tokenizers, devices, errors


def test_bert_tokenizer_is_notebook_04s_and_round_trips(bert):
    fresh = data.WordTokenizer(data.review_vocabulary(), specials=("[PAD]", "[CLS]", "[SEP]", "[MASK]"))
    assert bert.tokenizer.itos == fresh.itos == json.loads(bert.metadata["vocabulary"])
    assert len(bert.tokenizer) == bert.config.vocab_size
    for document in data.review_documents(20, seed=123):
        for sentence in document:
            ids = bert.tokenizer.encode(sentence)
            assert 0 not in ids                       # no <unk>: every word of the corpus has an id
            assert bert.tokenizer.decode(ids) == sentence


def test_gpt_tokenizer_round_trips():
    gpt = load_checkpoint("tiny-gpt", device="cpu")
    text = gpt.metadata["heldout_text"]
    assert gpt.tokenizer.decode(gpt.tokenizer.encode(text)) == text
    assert gpt.tokenizer.chars == json.loads(gpt.metadata["vocabulary"])
    assert len(gpt.tokenizer) == gpt.config.vocab_size
    sample = "The return statement leaves the current function call."
    assert gpt.tokenizer.decode(gpt.tokenizer.encode(sample)) == sample


@pytest.mark.parametrize("device", ["cpu", torch.device("cpu"), cuda])
@pytest.mark.parametrize("name", NAMES)
def test_loaded_model_is_in_eval_mode_on_the_requested_device(name, device):
    checkpoint = load_checkpoint(name, device=device)
    assert not checkpoint.model.training
    assert not any(m.training for m in checkpoint.model.modules())
    assert {p.device.type for p in checkpoint.model.parameters()} == {torch.device(device).type}
    if torch.device(device).type == "cuda":   # the same loss there, up to float32 rounding
        assert heldout_loss(checkpoint) == pytest.approx(float(checkpoint.metadata["heldout_loss"]), rel=1e-3)


def test_default_device_is_the_course_default():
    from plmcourse.nn import default_device

    checkpoint = load_checkpoint("tiny-bert")
    assert next(checkpoint.model.parameters()).device.type == default_device().type


def test_unknown_name_is_one_sentence_naming_the_build_command():
    with pytest.raises(ValueError) as error:
        load_checkpoint("tiny-t5")
    message = str(error.value)
    assert "'tiny-t5'" in message and BUILD_COMMAND in message and "tiny-bert" in message
    assert one_sentence(message)


@pytest.mark.parametrize("name", NAMES)
def test_missing_file_is_one_sentence_naming_the_build_command(name, tmp_path):
    with pytest.raises(FileNotFoundError) as error:
        load_checkpoint(name, directory=tmp_path)
    message = str(error.value)
    assert f"{BUILD_COMMAND} {name}" in message and str(tmp_path) in message
    assert one_sentence(message)


def test_command_line_refuses_bad_arguments_before_training(capsys):
    assert main([]) == 2 and BUILD_COMMAND in capsys.readouterr().err
    with pytest.raises(ValueError, match="tiny-t5"):
        main(["build", "tiny-bert", "tiny-t5"])   # fails at once, without building tiny-bert first


# ----------------------------------------------------------------------------
# What the models learned


def cloze(bert, sentence_a, sentence_b):
    """p(word) at the [MASK] of the pair [CLS] a [SEP] b [SEP] (one mask), as {word: probability}."""
    tok = bert.tokenizer
    a, b = sentence_a.split(), sentence_b.split()
    ids = [tok.stoi["[CLS]"], *tok.encode(a), tok.stoi["[SEP]"], *tok.encode(b), tok.stoi["[SEP]"]]
    segments = [0] * (len(a) + 2) + [1] * (len(b) + 1)
    with torch.no_grad():
        logits, _ = bert.model(torch.tensor([ids]), torch.tensor([segments]))
    probs = torch.softmax(logits[0, ids.index(tok.stoi["[MASK]"])], dim=-1)
    return dict(zip(tok.itos, probs.tolist()))


def mass(probs, words):
    return sum(probs[w] for w in words)


def test_bert_knows_what_kind_of_word_fits_and_which_sentiment(bert):
    nouns = [n for group in reviews.TOPICS.values() for n in group]
    adjectives = reviews.POSITIVE + reviews.NEGATIVE
    assert mass(cloze(bert, "the [MASK] was stale .", "i hated the menu ."), nouns) > 0.9
    assert mass(cloze(bert, "the soup was [MASK] .", "never again ."), adjectives) > 0.9
    # The sentiment the notebook's 400-step model cannot pick up: the verb decides the adjective.
    for verb, closing, same, other in (("loved", "highly recommended .", reviews.POSITIVE, reviews.NEGATIVE),
                                       ("hated", "a waste of money .", reviews.NEGATIVE, reviews.POSITIVE)):
        probs = cloze(bert, f"the soup was [MASK] , i {verb} it .", closing)
        assert mass(probs, same) > 5 * mass(probs, other), verb
    # And the verb from the adjective.
    probs = cloze(bert, "the room was superb , i [MASK] it .", "i would come back .")
    assert mass(probs, ("loved", "enjoyed", "adored")) > 5 * mass(probs, ("hated", "disliked", "regretted"))


def test_bert_knows_which_city_follows_new(bert):
    probs = cloze(bert, "we went to new [MASK] .", "the pool was lovely .")
    assert probs["york"] + probs["delhi"] > 0.8


def test_gpt_writes_python_docs_better_than_on_shuffled_text():
    gpt = load_checkpoint("tiny-gpt", device="cpu")
    text = "The return statement leaves the current function call."  # within the 64-character window
    ids = torch.as_tensor(gpt.tokenizer.encode(text))[None]
    shuffled = ids[:, torch.randperm(ids.shape[1], generator=torch.Generator().manual_seed(0))]
    from plmcourse.nn import causal_lm_loss

    with torch.no_grad():
        real, scrambled = causal_lm_loss(gpt.model(ids), ids), causal_lm_loss(gpt.model(shuffled), shuffled)
    assert real < 1.5 < scrambled - 1.0


def test_packing_cuts_long_pairs_around_the_middle_and_packs_single_texts():
    """BERT's truncation: the longer side loses words (a from its start, b from its end); an empty b
    gives [CLS] a [SEP] in one segment (tiny-bert-reviews' whole reviews)."""
    from plmcourse.pretrained.checkpoints import _bert_tokenizer, _pack_pairs
    tok = _bert_tokenizer()
    a, b = "the soup was dull and stale .".split(), "i hated it .".split()
    ids, segments, is_next = _pack_pairs(tok, [(a, b, 1), (a, [], 0)], max_len=10)
    # 6 + 4 words and 3 specials in 10 places: a loses "the", "soup", "was"; then b (as long) loses "."
    assert tok.decode(ids[0].tolist()) == ["[CLS]", "dull", "and", "stale", ".", "[SEP]", "i", "hated", "it", "[SEP]"]
    assert segments[0].tolist() == [0] * 6 + [1] * 4
    assert tok.decode(ids[1].tolist()) == ["[CLS]", *a, "[SEP]", "[PAD]"]
    assert is_next.tolist() == [1, 0] and segments[1].sum() == 0
