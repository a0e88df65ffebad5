"""plmcourse.nn.instruct (notebook 15) against plmcourse.ref.instruct and PyTorch's own functions."""

import plmcourse  # noqa: F401  (first: sets OMP_WAIT_POLICY before numpy/torch load)

import copy
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from plmcourse.data import instruct as data
from plmcourse.nn import instruct as nn_instruct
from plmcourse.ref import instruct as ref_instruct

CPU = torch.device("cpu")


def _batch(seed, B=4, T=9, V=7):
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((B, T, V)) * 2
    tokens = rng.integers(0, V, (B, T))
    mask = rng.random((B, T)) < 0.5
    return logits, tokens, mask


@pytest.mark.parametrize("seed", range(3))
def test_sft_loss_matches_the_reference_and_torch_cross_entropy(seed):
    logits, tokens, mask = _batch(seed)
    got = nn_instruct.sft_loss(torch.tensor(logits), torch.tensor(tokens), torch.tensor(mask))
    assert math.isclose(got.item(), ref_instruct.sft_loss(logits, tokens, mask), rel_tol=1e-12)
    labels = torch.tensor(np.where(mask, tokens, -100))[:, 1:]
    torch_ce = F.cross_entropy(torch.tensor(logits)[:, :-1].reshape(-1, logits.shape[-1]), labels.reshape(-1))
    assert math.isclose(got.item(), torch_ce.item(), rel_tol=1e-12)


def test_sft_loss_is_zero_without_answer_and_its_gradient_skips_the_prompt():
    logits, tokens, mask = _batch(3)
    x = torch.tensor(logits, requires_grad=True)
    assert nn_instruct.sft_loss(x, torch.tensor(tokens), torch.zeros(mask.shape, dtype=torch.bool)).item() == 0.0
    nn_instruct.sft_loss(x, torch.tensor(tokens), torch.tensor(mask)).backward()
    counted = np.zeros(mask.shape, dtype=bool)
    counted[:, :-1] = mask[:, 1:]  # position t has a gradient only if token t + 1 is an answer token
    assert torch.all(x.grad.abs().sum(-1)[torch.tensor(~counted)] == 0)
    assert torch.all(x.grad.abs().sum(-1)[torch.tensor(counted)] > 0)


def test_bradley_terry_and_dpo_match_the_reference_and_torch():
    rng = np.random.default_rng(4)
    r_c, r_r = rng.standard_normal(6) * 3, rng.standard_normal(6) * 3
    got = nn_instruct.bradley_terry_loss(torch.tensor(r_c), torch.tensor(r_r)).item()
    assert math.isclose(got, ref_instruct.bradley_terry_loss(r_c, r_r), rel_tol=1e-12)
    bce = F.binary_cross_entropy_with_logits(torch.tensor(r_c - r_r), torch.ones(6, dtype=torch.float64)).item()
    assert math.isclose(got, bce, rel_tol=1e-12)
    pc, pr, rc, rr = (rng.uniform(-30, -2, 6) for _ in range(4))
    for beta in (0.1, 1.0):
        got = nn_instruct.dpo_loss(*(torch.tensor(a) for a in (pc, pr, rc, rr)), beta).item()
        assert math.isclose(got, ref_instruct.dpo_loss(pc, pr, rc, rr, beta), rel_tol=1e-12)
    big = nn_instruct.bradley_terry_loss(torch.tensor([-1000.0, 1000.0]), torch.tensor([0.0, 0.0]))
    assert math.isclose(big.item(), 500.0)


def test_answer_logps_sum_the_answer_tokens():
    model = nn_instruct.instruction_gpt(0, CPU)
    pairs = data.instruction_examples(data.TASKS, 5, np.random.default_rng(0))
    tokens, mask = nn_instruct.as_tensors(*data.encode_pairs(*zip(*pairs)), CPU)
    with torch.no_grad():
        logps = nn_instruct.answer_logps(model, tokens, mask)
        mean = nn_instruct.sft_loss(model(tokens), tokens, mask)
    assert logps.shape == (5,) and torch.all(logps < 0)
    assert math.isclose(-logps.sum().item() / mask[:, 1:].sum().item(), mean.item(), rel_tol=1e-5)


def test_greedy_answers_stop_at_the_end_mark():
    model = nn_instruct.instruction_gpt(0, CPU)
    prompts = ["drop a: abca=", "sort: dcba=", "item 2: abcd=", "drop b: abcb="]
    answers = nn_instruct.greedy_answers(model, prompts, CPU, max_new=5)
    assert len(answers) == 4 and all(len(a) <= 5 for a in answers)
    one_by_one = [nn_instruct.greedy_answers(model, [p], CPU, max_new=5)[0] for p in prompts]
    assert answers == one_by_one  # prompts of one length run together, each as if alone


class _Recites(torch.nn.Module):
    """A stand-in GPT that answers every prompt with `text`, one character a step (greedy: a one-hot logit)."""

    def __init__(self, text, prompt_length):
        super().__init__()
        self.text, self.prompt_length = data.encode(text), prompt_length
        self.config = type("Config", (), {"max_len": 64})()

    def forward(self, ids):  # (b, L) -> (b, L, V)
        logits = torch.zeros(*ids.shape, len(data.VOCAB))
        logits[:, -1, self.text[ids.shape[1] - self.prompt_length]] = 1.0
        return logits


def test_the_longest_right_answer_written_long_is_not_cut_before_its_end():
    prompt, target = "drop a: bcdefba=", "bcdefb."
    longest = data.verbose(target)  # "bcdefb ok ok.": 13 characters
    model = _Recites(longest, len(prompt))
    [answer] = nn_instruct.greedy_answers(model, [prompt], CPU)
    assert answer == longest and data.answer_score(answer, target) == 1
    assert nn_instruct.rule_scores(model, [(prompt, target)], CPU).tolist() == [1]


def test_reward_features_and_the_bradley_terry_fit():
    model = nn_instruct.instruction_gpt(0, CPU)
    triples = [("drop a: abca=", "bc.", "bc ok ok."), ("item 2: abcd=", "b.", "c.")]
    chosen, rejected = nn_instruct.reward_features(model, triples, CPU)
    assert chosen.shape == rejected.shape == (2, 2)
    assert chosen[:, 1].tolist() == [3.0, 2.0] and rejected[:, 1].tolist() == [9.0, 2.0]  # lengths, the "." included
    tokens, mask = nn_instruct.as_tensors(*data.encode_pairs(["drop a: abca="], ["bc."]), CPU)
    assert math.isclose(chosen[0, 0].item(), nn_instruct.answer_logps(model, tokens, mask).item(), rel_tol=1e-5)
    # Pairs where the shorter answer is always chosen: the fit gives length a negative weight.
    features = torch.tensor([[0.0, 2.0], [0.0, 3.0], [0.0, 1.0]]), torch.tensor([[0.0, 5.0], [0.0, 4.0], [0.0, 6.0]])
    w = nn_instruct.fit_reward_model(*features)
    assert w[1] < 0 and nn_instruct.bradley_terry_loss(features[0] @ w, features[1] @ w) < 0.1


def test_a_few_steps_of_each_loop_lower_their_loss():
    tasks = data.task_split(0)[0][:3]
    model = nn_instruct.instruction_gpt(0, CPU, d_model=32, n_layers=1)
    history = nn_instruct.train_sft(model, tasks, CPU, steps=40, batch_size=16, progress=False)
    assert np.mean(history.loss[-5:]) < np.mean(history.loss[:5])
    triples = data.preference_pairs(tasks, 32, np.random.default_rng(0))
    before = [p.detach().clone() for p in model.parameters()]
    history = nn_instruct.train_dpo(model, triples, CPU, beta=0.5, steps=10, batch_size=16, progress=False)
    assert math.isclose(history.loss[0], math.log(2.0), rel_tol=1e-4)  # the policy starts as its reference
    assert history.loss[-1] < history.loss[0]
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))


# ----------------------------------------------------------------------------
# RLHF with PPO


def _answer_mask(rows):
    """answer_mask (B, T) from rows of 0/1 over token positions (token 0 is never an answer token)."""
    return torch.tensor(rows, dtype=torch.bool)


def test_gae_matches_hand_worked_advantages_and_ignores_what_is_not_answer():
    # One answer on shifted positions 1..3 (position 0 is the prompt), a second on 0..1 with padding after it
    # whose values must not leak into the last answer token's estimate.
    mask = _answer_mask([[0, 0, 1, 1, 1], [0, 1, 1, 0, 0]])  # (2, 5): positions = mask[:, 1:]
    rewards = torch.tensor([[0.0, 1.0, 0.0, 2.0], [1.0, 3.0, 0.0, 0.0]])
    values = torch.tensor([[9.0, 0.5, 1.0, 0.5], [0.5, 1.0, 7.0, 7.0]])
    half = nn_instruct.gae_advantages(rewards, values, mask, gamma=1.0, lam=0.5)
    # row 0: delta_3 = 2 - 0.5 = 1.5; delta_2 = 0 + 0.5 - 1 = -0.5 -> -0.5 + 0.5 * 1.5 = 0.25;
    #        delta_1 = 1 + 1 - 0.5 = 1.5 -> 1.5 + 0.5 * 0.25 = 1.625; position 0 is the prompt: 0.
    # row 1: delta_1 = 3 - 1 = 2; delta_0 = 1 + 1 - 0.5 = 1.5 -> 1.5 + 0.5 * 2 = 2.5; padding: 0.
    assert torch.allclose(half, torch.tensor([[0.0, 1.625, 0.25, 1.5], [2.5, 2.0, 0.0, 0.0]]))
    # lam = 1: the reward still to come minus the value (Monte Carlo).
    full = nn_instruct.gae_advantages(rewards, values, mask, gamma=1.0, lam=1.0)
    assert torch.allclose(full, torch.tensor([[0.0, 2.5, 1.0, 1.5], [3.5, 2.0, 0.0, 0.0]]))
    # lam = 0: one-step temporal differences.
    one = nn_instruct.gae_advantages(rewards, values, mask, gamma=0.5, lam=0.0)
    assert torch.allclose(one, torch.tensor([[0.0, 1.0, -0.75, 1.5], [1.0, 2.0, 0.0, 0.0]]))


def test_ppo_rewards_put_the_kl_on_every_answer_token_and_the_score_on_the_last():
    mask = _answer_mask([[0, 1, 1, 1, 0], [0, 0, 1, 0, 0]])
    logps = torch.tensor([[-1.0, -2.0, -0.5, 0.0], [0.0, -1.0, 0.0, 0.0]])
    ref = torch.tensor([[-1.5, -1.0, -0.5, 0.0], [0.0, -3.0, 0.0, 0.0]])
    rewards = nn_instruct.ppo_rewards(torch.tensor([4.0, -2.0]), logps * mask[:, 1:], ref * mask[:, 1:], mask, 0.1)
    assert torch.allclose(rewards, torch.tensor([[-0.05, 0.1, 4.0, 0.0], [0.0, -0.2 - 2.0, 0.0, 0.0]]))


def test_ppo_policy_loss_clips_the_ratio_on_the_side_that_would_gain():
    mask = _answer_mask([[0, 1, 1, 1]])
    old = torch.zeros(1, 3)
    logps = torch.tensor([[math.log(1.5), math.log(0.5), math.log(1.1)]], requires_grad=True)
    advantages = torch.tensor([[1.0, -1.0, 2.0]])
    loss = nn_instruct.ppo_policy_loss(logps, old, advantages, mask, clip=0.2)
    # min(1.5 * 1, 1.2 * 1) = 1.2; min(0.5 * -1, 0.8 * -1) = -0.8; min(1.1 * 2, 1.1 * 2) = 2.2
    assert math.isclose(loss.item(), -(1.2 - 0.8 + 2.2) / 3, rel_tol=1e-6)
    loss.backward()
    # Clipped tokens get no gradient; the unclipped one gets -ratio * A / 3.
    assert torch.allclose(logps.grad, torch.tensor([[0.0, 0.0, -1.1 * 2 / 3]]), atol=1e-6)
    # At ratio 1 (the first epoch) the loss is -mean A, and masked positions do not count.
    same = nn_instruct.ppo_policy_loss(old, old, torch.tensor([[5.0, 1.0, 3.0]]), _answer_mask([[0, 0, 1, 1]]))
    assert math.isclose(same.item(), -2.0)


def test_sampled_answers_end_at_the_mark_follow_the_generator_and_score_as_logps():
    tasks = data.task_split(0)[0][:3]
    model = nn_instruct.instruction_gpt(0, CPU, d_model=32, n_layers=1)
    nn_instruct.train_sft(model, tasks, CPU, steps=30, batch_size=16, progress=False)
    prompts = [p for p, _ in data.instruction_examples(tasks, 12, np.random.default_rng(2))]
    first = nn_instruct.sample_answers(model, prompts, CPU, torch.Generator().manual_seed(3), max_new=10)
    again = nn_instruct.sample_answers(model, prompts, CPU, torch.Generator().manual_seed(3), max_new=10)
    other = nn_instruct.sample_answers(model, prompts, CPU, torch.Generator().manual_seed(4), max_new=10)
    assert first[0] == again[0] and first[0] != other[0]
    answers, tokens, mask = first
    room = [min(10, model.config.max_len - len(p)) for p in prompts]  # an answer never runs past max_len
    assert all(a.count(".") <= 1 and (a.endswith(".") or len(a) == r) for a, r in zip(answers, room))
    assert tokens.shape[1] <= model.config.max_len
    expected = nn_instruct.as_tensors(*data.encode_pairs(prompts, answers), CPU)
    assert torch.equal(tokens, expected[0]) and torch.equal(mask, expected[1])
    with torch.no_grad():
        assert torch.allclose(nn_instruct.token_logps(model, tokens, mask).sum(-1),
                              nn_instruct.answer_logps(model, tokens, mask), atol=1e-5)
        w = torch.tensor([1.0, -0.5])
        by_hand = nn_instruct.answer_logps(model, tokens, mask) - 0.5 * mask[:, 1:].sum(-1)
        assert torch.allclose(nn_instruct.reward_of(model, w, tokens, mask), by_hand, atol=1e-5)


def test_ppo_raises_the_reward_it_is_given_and_the_kl_penalty_holds_it_back():
    """A toy reward (the share of an answer's characters that are "a") that the policy can earn: PPO earns more of
    it at a small KL coefficient than at a large one, and the large one keeps the policy closer."""
    tasks = data.task_split(0)[0][:3]
    reference = nn_instruct.instruction_gpt(0, CPU, d_model=32, n_layers=1).eval().requires_grad_(False)
    a = data.encode("a")[0]

    def share_of_a(tokens, mask):
        return ((tokens == a) & mask).sum(-1) / mask.sum(-1)

    def prompts(rng, n):
        return [p for p, _ in data.instruction_examples(tasks, n, rng)]

    runs = {}
    for kl in (0.0, 5.0):
        policy = copy.deepcopy(reference).requires_grad_(True)
        _, records = nn_instruct.train_ppo(policy, reference, share_of_a, prompts, CPU, kl_coef=kl, steps=12,
                                           batch_size=16, lr=3e-3, seed=0, progress=False)
        runs[kl] = records
    free, held = runs[0.0], runs[5.0]
    assert free[0]["score"] < 0.1 and np.mean([r["score"] for r in free[-3:]]) > 3 * free[0]["score"] + 0.1
    assert np.mean([r["score"] for r in held[-3:]]) < np.mean([r["score"] for r in free[-3:]])
    assert held[-1]["kl"] < free[-1]["kl"]
    assert all(0.0 <= r["clipped"] <= 1.0 for r in free)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_losses_and_loops_run_on_cuda_and_agree_with_the_cpu():
    cuda = torch.device("cuda")
    logits, tokens, mask = _batch(5)
    on_cpu = nn_instruct.sft_loss(torch.tensor(logits), torch.tensor(tokens), torch.tensor(mask)).item()
    on_cuda = nn_instruct.sft_loss(*(torch.tensor(a, device=cuda) for a in (logits, tokens, mask)))
    assert on_cuda.is_cuda and math.isclose(on_cuda.item(), on_cpu, rel_tol=1e-9)
    rng = np.random.default_rng(6)
    pc, pr, rc, rr = (rng.uniform(-30, -2, 6) for _ in range(4))
    assert math.isclose(nn_instruct.dpo_loss(*(torch.tensor(a, device=cuda) for a in (pc, pr, rc, rr)), 0.5).item(),
                        ref_instruct.dpo_loss(pc, pr, rc, rr, 0.5), rel_tol=1e-9)
    assert math.isclose(nn_instruct.bradley_terry_loss(torch.tensor(pc, device=cuda), torch.tensor(pr, device=cuda))
                        .item(), ref_instruct.bradley_terry_loss(pc, pr), rel_tol=1e-9)
    tasks = data.task_split(0)[0][:3]
    model = nn_instruct.instruction_gpt(0, cuda, d_model=32, n_layers=1)
    history = nn_instruct.train_sft(model, tasks, cuda, steps=40, batch_size=16, progress=False)
    assert np.mean(history.loss[-5:]) < np.mean(history.loss[:5])
    pairs = data.instruction_examples(tasks, 6, np.random.default_rng(1))
    tokens, mask = nn_instruct.as_tensors(*data.encode_pairs(*zip(*pairs)), cuda)
    with torch.no_grad():
        logps = nn_instruct.answer_logps(model, tokens, mask)
        logps_cpu = nn_instruct.answer_logps(model.cpu(), tokens.cpu(), mask.cpu())
    assert logps.is_cuda and torch.allclose(logps.cpu(), logps_cpu, atol=1e-3)
    model.to(cuda)
    triples = data.preference_pairs(tasks, 32, np.random.default_rng(0))
    history = nn_instruct.train_dpo(model, triples, cuda, beta=0.5, steps=10, batch_size=16, progress=False)
    assert math.isclose(history.loss[0], math.log(2.0), rel_tol=1e-4) and history.loss[-1] < history.loss[0]
    reference = copy.deepcopy(model).eval().requires_grad_(False)  # PPO: sampling, scoring and updates on the GPU
    _, records = nn_instruct.train_ppo(
        copy.deepcopy(model), reference, lambda t, m: nn_instruct.reward_of(reference, torch.tensor([1.0, -0.5]), t, m),
        lambda rng, n: [q for q, _ in data.instruction_examples(tasks, n, rng)], cuda, steps=3, batch_size=8,
        progress=False)
    assert len(records) == 3 and all(math.isfinite(r["score"]) and math.isfinite(r["kl"]) for r in records)
