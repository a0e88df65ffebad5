"""plmcourse.train: the loop really trains, evaluates on schedule, and checkpoints round-trip."""

import plmcourse  # noqa: F401

import math

import pytest
import torch

from plmcourse.train import History, load_checkpoint, save_checkpoint, train, warmup_cosine


def regression_problem(seed=0):
    g = torch.Generator().manual_seed(seed)
    w_true = torch.randn(8, 1, generator=g)
    x = torch.randn(256, 8, generator=g)
    y = x @ w_true
    return x, y


def mse(model, batch):
    x, y = batch
    return torch.nn.functional.mse_loss(model(x), y)


def test_train_fits_a_linear_map_and_evaluates_on_schedule():
    torch.manual_seed(0)
    x, y = regression_problem()
    model = torch.nn.Linear(8, 1, bias=False)
    history = train(model, lambda step: (x, y), mse, steps=300, lr=0.05, weight_decay=0.0,
                    eval_fn=lambda m: {"val_mse": mse(m, (x, y))}, eval_every=100, progress=False)
    assert len(history.loss) == 300 and history.steps == list(range(300))
    assert history.eval_steps == [99, 199, 299]
    assert history.loss[0] > 0.5 and history.last("val_mse") < 1e-3
    assert not model.training


def test_history_continues_when_passed_back():
    x, y = regression_problem()
    model = torch.nn.Linear(8, 1)
    history = train(model, lambda s: (x, y), mse, steps=5, progress=False)
    history = train(model, lambda s: (x, y), mse, steps=5, history=history, progress=False)
    assert history.steps == list(range(10))


def test_checkpoint_round_trip(tmp_path):
    x, y = regression_problem()
    model = torch.nn.Linear(8, 1)
    history = train(model, lambda s: (x, y), mse, steps=20, progress=False, eval_fn=lambda m: {"l": mse(m, (x, y))})
    save_checkpoint(tmp_path / "ck.pt", model, history=history, note="hello")
    fresh = torch.nn.Linear(8, 1)
    loaded_history, extra = load_checkpoint(tmp_path / "ck.pt", fresh)
    assert torch.equal(fresh(x), model(x))
    assert isinstance(loaded_history, History) and loaded_history.loss == history.loss
    assert extra == {"note": "hello"}


@pytest.mark.parametrize("step, expected", [(0, 0.1), (9, 1.0), (10, 1.0), (100, 0.1)])
def test_warmup_cosine(step, expected):
    assert math.isclose(warmup_cosine(step, steps=100, warmup=10), expected, rel_tol=1e-9)


def tiny_gpt_problem(seed=0):
    from plmcourse.nn import GPT, GPTConfig

    torch.manual_seed(seed)
    model = GPT(GPTConfig(vocab_size=16, d_model=32, n_layers=2, n_heads=4, max_len=16, dropout=0.0))
    g = torch.Generator().manual_seed(seed)
    data = torch.randint(0, 16, (64, 17), generator=g)
    data[:, 1::2] = data[:, 0::2][:, :8]  # every other token copies one before: learnable

    def get_batch(step):
        rows = data[(step * 8) % 64:(step * 8) % 64 + 8]
        return rows[:, :-1], rows[:, 1:]

    return model, get_batch


def lm_loss(model, batch, seen=None):
    x, y = batch
    logits = model(x)
    if seen is not None:
        seen.add(logits.dtype)
    return torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), y.flatten())


def test_losses_read_back_in_stretches_are_the_losses_of_each_step():
    """log_every only changes when the numbers are read, never which numbers."""
    runs = []
    for log_every in (1, 7, 1000):
        model, get_batch = tiny_gpt_problem()
        runs.append(train(model, get_batch, lm_loss, steps=30, lr=3e-3, progress=False, log_every=log_every,
                          eval_fn=lambda m: {}, eval_every=10))
    assert runs[0].loss == runs[1].loss == runs[2].loss and len(runs[0].loss) == 30
    assert all(len(h.seconds) == 30 and h.seconds == sorted(h.seconds) for h in runs)


@pytest.mark.parametrize("precision, dtype", [("bf16", torch.bfloat16), ("fp16", torch.float16)])
def test_mixed_precision_runs_the_forward_in_16_bits_and_keeps_float32_weights(precision, dtype):
    model, get_batch = tiny_gpt_problem()
    seen = set()
    history = train(model, get_batch, lambda m, b: lm_loss(m, b, seen), steps=60, lr=3e-3, progress=False,
                    precision=precision)
    assert seen == {dtype}  # autocast really was on: the logits came out in 16 bits
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert sum(history.loss[-10:]) / 10 < 0.8 * sum(history.loss[:10]) / 10  # and it still learns
    reference, get_batch = tiny_gpt_problem()
    plain = train(reference, get_batch, lm_loss, steps=60, lr=3e-3, progress=False)
    assert history.loss != plain.loss  # 16-bit products round differently ...
    assert abs(history.loss[-1] - plain.loss[-1]) < 0.1  # ... but train the same


def test_unknown_precision_is_refused():
    model, get_batch = tiny_gpt_problem()
    with pytest.raises(ValueError, match="precision"):
        train(model, get_batch, lm_loss, steps=1, progress=False, precision="int8")


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.gpu
@needs_cuda
def test_compiled_bf16_training_on_cuda_matches_eager():
    """compile=True fuses kernels but computes the same losses (to bf16 rounding)."""
    runs = []
    for compile in (False, True):
        model, get_batch = tiny_gpt_problem()
        model.cuda()
        runs.append(train(model, lambda s: tuple(t.cuda() for t in get_batch(s)), lm_loss, steps=40, lr=3e-3,
                          progress=False, precision="bf16", compile=compile))
    eager, compiled = runs
    assert max(abs(a - b) for a, b in zip(eager.loss, compiled.loss)) < 0.05
    assert compiled.loss[-1] < 0.8 * compiled.loss[0]


@pytest.mark.gpu
@needs_cuda
def test_a_training_step_never_makes_the_cpu_wait_for_the_gpu():
    """GPT (is_causal) and Bert (a padding mask), forward, backward, clipping and fused AdamW:
    no host synchronisation, which would stall every layer on a GPU."""
    from plmcourse.nn import Bert, BertConfig, GPT, GPTConfig
    from plmcourse.train import make_optimizer

    torch.manual_seed(0)
    gpt = GPT(GPTConfig(vocab_size=16, d_model=32, n_layers=2, n_heads=4, max_len=16)).cuda()
    bert = Bert(BertConfig(vocab_size=16, d_model=32, n_layers=2, n_heads=4, max_len=16)).cuda()
    ids = torch.randint(0, 16, (4, 16), device="cuda")
    mask = torch.arange(16, device="cuda")[None, :] < torch.tensor([16, 9, 3, 12], device="cuda")[:, None]
    for model, forward in ((gpt, lambda: gpt(ids)), (bert, lambda: bert(ids, attention_mask=mask)[0])):
        optimizer = make_optimizer(model, 1e-3)
        forward().sum().backward()  # first step outside: lazy initialisations may synchronise once
        optimizer.step()
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = forward().float().sum()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
