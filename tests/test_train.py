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
