"""From a language model to an assistant, in PyTorch (notebook 15), with the names of `plmcourse.ref.instruct`.

    sft_loss(logits, tokens, answer_mask)          next-token loss on the answer's tokens only
    bradley_terry_loss(r_chosen, r_rejected)       -mean log sigmoid(r_chosen - r_rejected)
    dpo_loss(pc, pr, rc, rr, beta=0.1)             DPO: Bradley-Terry on beta-scaled log-ratio differences
    answer_logps(model, tokens, answer_mask)       (B,) log p(answer | prompt), summed over the answer's tokens
    reward_features, fit_reward_model              a small reward model: features read off the SFT model, weights by BT
    greedy_answers(model, prompts, device)         each prompt's greedy continuation up to "."
    instruction_gpt(seed, device)                  the small GPT the notebook fine-tunes
    train_sft / train_dpo                          the training loops (tqdm progress bars)
"""

from __future__ import annotations

import copy

import numpy as np
import torch
import torch.nn.functional as F

from plmcourse.data import instruct as data
from plmcourse.nn.models import GPT, GPTConfig
from plmcourse.train import train

__all__ = ["sft_loss", "bradley_terry_loss", "dpo_loss", "answer_logps", "reward_features", "fit_reward_model",
           "greedy_answers", "instruction_gpt", "train_sft", "train_dpo", "as_tensors", "accuracy", "rule_scores",
           "pair_batch"]


def sft_loss(logits, tokens, answer_mask):
    """Mean next-token loss over the answer's tokens: position t predicts tokens[:, t + 1], which counts
    when answer_mask[:, t + 1] is True. logits (B, T, V), tokens (B, T), answer_mask (B, T) bool.
    A batch without any answer token gives 0 (nothing to learn), not 0 / 0."""
    log_p = F.log_softmax(logits[:, :-1], dim=-1)  # (B, T-1, V): predictions of tokens 1..T-1
    picked = log_p.gather(-1, tokens[:, 1:, None])[..., 0]  # (B, T-1)
    counted = answer_mask[:, 1:].to(picked.dtype)  # (B, T-1)
    return -(picked * counted).sum() / counted.sum().clamp(min=1)


def bradley_terry_loss(r_chosen, r_rejected):
    """-mean log sigmoid(r_chosen - r_rejected), the reward model's loss on preference pairs; logsigmoid is
    stable at any margin."""
    return -F.logsigmoid(r_chosen - r_rejected).mean()


def dpo_loss(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta=0.1):
    """-mean log sigmoid(beta * ((pc - rc) - (pr - rr))): the policy's log-ratio to the reference on the
    chosen answer, minus that on the rejected one, as the Bradley-Terry margin."""
    chosen = policy_chosen_logps - ref_chosen_logps  # (N,) implicit reward / beta
    rejected = policy_rejected_logps - ref_rejected_logps  # (N,)
    return -F.logsigmoid(beta * (chosen - rejected)).mean()


def as_tensors(tokens, mask, device):
    return torch.as_tensor(tokens, device=device), torch.as_tensor(mask, device=device)


def answer_logps(model, tokens, answer_mask):
    """(B,) log p(answer | prompt) under `model`: the answer tokens' log-probabilities, summed."""
    log_p = F.log_softmax(model(tokens)[:, :-1], dim=-1)  # (B, T-1, V)
    picked = log_p.gather(-1, tokens[:, 1:, None])[..., 0]  # (B, T-1)
    return (picked * answer_mask[:, 1:]).sum(-1)


def instruction_gpt(seed, device, d_model=64, n_layers=2):
    """A fresh small GPT over data.VOCAB (4 heads, 40 positions, no dropout)."""
    torch.manual_seed(seed)
    config = GPTConfig(vocab_size=len(data.VOCAB), d_model=d_model, n_layers=n_layers, n_heads=4, max_len=40,
                       dropout=0.0)
    return GPT(config).to(device)


@torch.no_grad()
def reward_features(model, triples, device):
    """(chosen, rejected): (N, 2) features of each answer of (prompt, chosen, rejected) triples, read off
    `model`: its log-probability of the answer given the prompt (summed over the answer's tokens) and the
    answer's length in tokens. A reward is a weighted sum of them (fit_reward_model)."""
    model.eval()
    prompts = [p for p, _, _ in triples]
    out = []
    for side in (1, 2):
        tokens, mask = as_tensors(*data.encode_pairs(prompts, [t[side] for t in triples]), device)
        out.append(torch.stack([answer_logps(model, tokens, mask), mask[:, 1:].sum(-1).to(torch.float32)], -1))
    return out[0], out[1]


def fit_reward_model(chosen_features, rejected_features, steps=300, lr=0.05):
    """The weights w (F,) of the reward r = features @ w that minimise the Bradley-Terry loss on the pairs
    (full batch, Adam). No bias: only differences of rewards enter the loss."""
    w = torch.zeros(chosen_features.shape[-1], requires_grad=True)
    optimizer = torch.optim.Adam([w], lr=lr)
    for _ in range(steps):
        loss = bradley_terry_loss(chosen_features @ w, rejected_features @ w)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return w.detach()


@torch.no_grad()
def greedy_answers(model, prompts, device, max_new=24):
    """Each prompt's greedy continuation, cut after the first "." (or after max_new characters: the longest right
    answer, written long, is 13, "abcdef ok ok.", and one cut before its "." would count as wrong).
    Prompts of one length run together (right padding would shift the positions)."""
    model.eval()
    out = [None] * len(prompts)
    by_length = {}
    for i, p in enumerate(prompts):
        by_length.setdefault(len(p), []).append(i)
    end = data.encode(data.END)[0]
    for idx in by_length.values():
        ids = torch.tensor([data.encode(prompts[i]) for i in idx], device=device)  # (b, L)
        done = torch.zeros(len(idx), dtype=torch.bool, device=device)
        for _ in range(max_new):
            nxt = model(ids[:, -model.config.max_len:])[:, -1].argmax(-1)  # (b,)
            nxt = torch.where(done, torch.full_like(nxt, data.PAD), nxt)
            ids = torch.cat([ids, nxt[:, None]], 1)
            done |= nxt == end
            if done.all():
                break
        for row, i in zip(ids.tolist(), idx):
            out[i] = data.decode(row[len(prompts[i]):])
    return out


def rule_scores(model, pairs, device):
    """(n,) the preference rule's score of the model's greedy answer to each (prompt, answer) pair:
    2 correct and short, 1 correct and long, 0 wrong (data.answer_score)."""
    got = greedy_answers(model, [p for p, _ in pairs], device)
    return np.array([data.answer_score(g, a) for g, (_, a) in zip(got, pairs)])


def accuracy(model, pairs, device):
    """The share of (prompt, answer) pairs whose greedy answer is correct, short or long."""
    return float(np.mean(rule_scores(model, pairs, device) >= 1))


def train_sft(model, tasks, device, *, steps=400, batch_size=64, lr=3e-3, seed=0, answer_only=True, p_verbose=0.0,
              phrasings=1, desc="instruction tuning", progress=True):
    """Fine-tune `model` on fresh instruction examples of `tasks` (a new batch each step): the loss on the
    answer's tokens (answer_only) or on every token but padding."""
    rng = np.random.default_rng(seed)

    def batch(step):
        pairs = data.instruction_examples(tasks, batch_size, rng, phrasings=phrasings, p_verbose=p_verbose)
        tokens, mask = data.encode_pairs(*zip(*pairs))
        if not answer_only:
            mask = tokens != data.PAD
        return as_tensors(tokens, mask, device)

    return train(model, batch, lambda m, b: sft_loss(m(b[0]), *b), steps=steps, lr=lr, desc=desc,
                 progress=progress, weight_decay=0.0)


def pair_batch(triples, device):
    """((chosen tokens, mask), (rejected tokens, mask)) of (prompt, chosen, rejected) triples."""
    prompts = [p for p, _, _ in triples]
    chosen = as_tensors(*data.encode_pairs(prompts, [c for _, c, _ in triples]), device)
    rejected = as_tensors(*data.encode_pairs(prompts, [r for _, _, r in triples]), device)
    return chosen, rejected


def train_dpo(policy, triples, device, *, beta=0.1, steps=100, batch_size=32, lr=3e-4, seed=0, progress=True):
    """DPO: train `policy` on (prompt, chosen, rejected) triples against a frozen copy of itself."""
    reference = copy.deepcopy(policy).eval().requires_grad_(False)
    rng = np.random.default_rng(seed)

    def batch(step):
        chosen, rejected = pair_batch([triples[i] for i in rng.integers(len(triples), size=batch_size)], device)
        with torch.no_grad():
            refs = answer_logps(reference, *chosen), answer_logps(reference, *rejected)
        return chosen, rejected, refs

    def loss(m, b):
        chosen, rejected, (ref_c, ref_r) = b
        return dpo_loss(answer_logps(m, *chosen), answer_logps(m, *rejected), ref_c, ref_r, beta)

    return train(policy, batch, loss, steps=steps, lr=lr, desc=f"DPO, beta={beta:g}", progress=progress,
                 weight_decay=0.0)
