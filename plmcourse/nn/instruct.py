"""From a language model to an assistant, in PyTorch (notebook 15), with the names of `plmcourse.ref.instruct`.

    sft_loss(logits, tokens, answer_mask)          next-token loss on the answer's tokens only
    bradley_terry_loss(r_chosen, r_rejected)       -mean log sigmoid(r_chosen - r_rejected)
    dpo_loss(pc, pr, rc, rr, beta=0.1)             DPO: Bradley-Terry on beta-scaled log-ratio differences
    answer_logps(model, tokens, answer_mask)       (B,) log p(answer | prompt), summed over the answer's tokens
    reward_features, fit_reward_model              a small reward model: features read off the SFT model, weights by BT
    greedy_answers(model, prompts, device)         each prompt's greedy continuation up to "."
    instruction_gpt(seed, device)                  the small GPT the notebook fine-tunes
    train_sft / train_dpo                          the training loops (tqdm progress bars)

RLHF with PPO (InstructGPT's recipe, at the notebook's scale):
    sample_answers(policy, prompts, device, gen)   answers sampled at temperature 1, up to "."
    token_logps(model, tokens, answer_mask)        (B, T-1) log p of each answer token, 0 elsewhere
    ValueModel                                     a GPT's trunk with a scalar head: the value baseline
    ppo_rewards(score, logps, ref_logps, mask, kl) per-token rewards: -kl * log-ratio to the reference, score at the end
    gae_advantages(rewards, values, mask)          generalised advantage estimates over each answer's tokens
    ppo_policy_loss(logps, old, adv, mask, clip)   the clipped surrogate objective, as a loss
    train_ppo                                      sample, score, estimate advantages, a few clipped epochs
"""

from __future__ import annotations

import copy
import time

import numpy as np
import torch
import torch.nn.functional as F

from plmcourse.data import instruct as data
from plmcourse.nn.models import GPT, GPTConfig
from plmcourse.train import train

__all__ = ["sft_loss", "bradley_terry_loss", "dpo_loss", "answer_logps", "reward_features", "fit_reward_model",
           "greedy_answers", "instruction_gpt", "train_sft", "train_dpo", "as_tensors", "accuracy", "rule_scores",
           "pair_batch", "sample_answers", "token_logps", "ValueModel", "ppo_rewards", "gae_advantages",
           "ppo_policy_loss", "train_ppo", "reward_of", "answer_features"]


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
        out.append(answer_features(model, tokens, mask))
    return out[0], out[1]


def answer_features(model, tokens, answer_mask):
    """(B, 2) the reward model's features of each answer: log p_model(answer | prompt) and its length in tokens."""
    return torch.stack([answer_logps(model, tokens, answer_mask), answer_mask[:, 1:].sum(-1).to(torch.float32)], -1)


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
def _write_answers(model, prompts, device, max_new, choose, within_max_len=False):
    """Each prompt's continuation, a character at a time (choose(logits (b, V)) -> the next ids (b,)), cut after
    the first "." or max_new characters; within_max_len: also before prompt and answer outgrow the model's
    max_len (else the model reads the last max_len characters). Prompts of one length run together (right
    padding would shift the positions)."""
    model.eval()
    out = [None] * len(prompts)
    by_length = {}
    for i, p in enumerate(prompts):
        by_length.setdefault(len(p), []).append(i)
    end = data.encode(data.END)[0]
    for idx in by_length.values():
        ids = torch.tensor([data.encode(prompts[i]) for i in idx], device=device)  # (b, L)
        done = torch.zeros(len(idx), dtype=torch.bool, device=device)
        steps = min(max_new, model.config.max_len - ids.shape[1]) if within_max_len else max_new
        for _ in range(steps):
            nxt = choose(model(ids[:, -model.config.max_len:])[:, -1])  # (b,)
            nxt = torch.where(done, torch.full_like(nxt, data.PAD), nxt)
            ids = torch.cat([ids, nxt[:, None]], 1)
            done |= nxt == end
            if done.all():
                break
        for row, i in zip(ids.tolist(), idx):
            out[i] = data.decode(row[len(prompts[i]):])
    return out


def greedy_answers(model, prompts, device, max_new=24):
    """Each prompt's greedy continuation, cut after the first "." (or after max_new characters: the longest right
    answer, written long, is 13, "abcdef ok ok.", and one cut before its "." would count as wrong)."""
    return _write_answers(model, prompts, device, max_new, lambda logits: logits.argmax(-1))


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


# ----------------------------------------------------------------------------
# RLHF with PPO: the policy writes answers, the reward model scores them, PPO pushes towards higher scores while a
# per-token KL penalty holds the policy near the reference (the SFT model)


def sample_answers(policy, prompts, device, generator, max_new=24):
    """(answers, tokens, answer_mask): each prompt's answer sampled from `policy` at temperature 1 (a character at
    a time, up to and with the first "." or max_new characters, and no further than the model's max_len: the
    answer is scored with its prompt), and encode_pairs(prompts, answers).
    `generator`: a torch.Generator on `device`, so that a seed fixes the samples."""
    def sample(logits):  # (b, V) -> (b,)
        logits = logits.float()
        logits[:, data.PAD] = -torch.inf  # padding is not a character an answer can hold
        return torch.multinomial(torch.softmax(logits, -1), 1, generator=generator)[:, 0]

    answers = _write_answers(policy, prompts, device, max_new, sample, within_max_len=True)
    tokens, mask = as_tensors(*data.encode_pairs(prompts, answers), device)
    return answers, tokens, mask


def token_logps(model, tokens, answer_mask):
    """(B, T-1): at position t, log p(tokens[:, t + 1] | tokens[:, :t + 1]) where that token is part of the
    answer, 0 elsewhere. Summed over t, it is answer_logps."""
    log_p = F.log_softmax(model(tokens)[:, :-1], dim=-1)  # (B, T-1, V)
    picked = log_p.gather(-1, tokens[:, 1:, None])[..., 0]  # (B, T-1)
    return picked * answer_mask[:, 1:]


class ValueModel(torch.nn.Module):
    """The value baseline: a GPT's trunk (a copy of the SFT model's) with a scalar head. values(tokens)[:, t]
    estimates the reward still to come after position t, the prefix tokens[:, :t + 1] written."""

    def __init__(self, gpt):
        super().__init__()
        self.gpt = copy.deepcopy(gpt)
        self.gpt.lm_head = None  # the trunk only (hidden_states); the head below replaces the vocabulary's
        self.head = torch.nn.Linear(gpt.config.d_model, 1)
        torch.nn.init.zeros_(self.head.weight)
        torch.nn.init.zeros_(self.head.bias)

    def forward(self, tokens):
        return self.head(self.gpt.hidden_states(tokens))[..., 0]  # (B, T)


def reward_of(model, w, tokens, answer_mask):
    """(B,) the reward model's score of each answer: its answer_features, read off `model` (the SFT model), @ w."""
    features = answer_features(model, tokens, answer_mask)  # (B, 2)
    return features @ w.to(features.device)


def ppo_rewards(score, logps, ref_logps, answer_mask, kl_coef):
    """(B, T-1) per-token rewards, in token_logps' positions: -kl_coef * (log pi - log pi_ref) on every answer
    token (the KL penalty, estimated on the sampled token), plus the reward model's `score` (B,) on the last."""
    mask = answer_mask[:, 1:].to(logps.dtype)  # (B, T-1)
    rewards = -kl_coef * (logps - ref_logps) * mask
    last = (mask * torch.arange(mask.shape[1], device=mask.device)).argmax(-1)  # (B,) the last answer token
    return rewards.index_put((torch.arange(len(score), device=score.device), last),
                             score.to(rewards.dtype), accumulate=True)


def gae_advantages(rewards, values, answer_mask, gamma=1.0, lam=0.95):
    """(B, T-1) generalised advantage estimates (Schulman et al. 2016) over each answer's tokens, 0 elsewhere.
    rewards, values: (B, T-1) in token_logps' positions; the value after an answer's last token is 0.
    A_t = sum_k (gamma lam)^k delta_(t+k), delta_t = r_t + gamma V_(t+1) - V_t."""
    mask = answer_mask[:, 1:]  # (B, T-1)
    advantages = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[:, 0])  # (B,)
    next_value = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(rewards.shape[1])):
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        running = torch.where(mask[:, t], delta + gamma * lam * running, torch.zeros_like(running))
        next_value = torch.where(mask[:, t], values[:, t], torch.zeros_like(next_value))
        advantages[:, t] = running
    return advantages


def ppo_policy_loss(logps, old_logps, advantages, answer_mask, clip=0.2):
    """PPO's clipped surrogate objective, negated, averaged over the answer tokens (Schulman et al. 2017):
    -mean min(ratio * A, clip(ratio, 1 - clip, 1 + clip) * A), ratio = pi / pi_old. The clip stops the
    update from gaining by moving a token's probability far from where the samples were drawn."""
    mask = answer_mask[:, 1:].to(logps.dtype)  # (B, T-1)
    ratio = torch.exp(logps - old_logps)
    surrogate = torch.minimum(ratio * advantages, ratio.clamp(1 - clip, 1 + clip) * advantages)
    return -(surrogate * mask).sum() / mask.sum().clamp(min=1)


def train_ppo(policy, reference, reward_model, prompts, device, *, kl_coef=0.1, steps=40, batch_size=64,
              epochs=4, lr=3e-4, clip=0.2, seed=0, progress=True):
    """RLHF with PPO. `policy` (trained in place) starts as a copy of `reference` (the SFT model, frozen);
    reward_model(tokens, answer_mask) -> (B,) scores; prompts(rng, n) -> n prompts. Each step samples answers to
    batch_size new prompts, scores them, and takes `epochs` full-batch steps of the clipped objective and of the
    value model's squared error. Returns (value model, per-step records: score, kl, clip share, seconds)."""
    from tqdm.auto import tqdm

    value_model = ValueModel(reference).to(device)
    rng, gen = np.random.default_rng(seed), torch.Generator(device=device).manual_seed(seed)
    optimizer = torch.optim.AdamW([*policy.parameters(), *value_model.parameters()], lr=lr, weight_decay=0.0)
    records, start = [], time.perf_counter()
    for _ in tqdm(range(steps), desc=f"PPO, kl={kl_coef:g}", disable=not progress):
        # 1. sample: the policy answers new prompts
        _, tokens, mask = sample_answers(policy, prompts(rng, batch_size), device, gen)
        with torch.no_grad():
            # 2. score: the reward model's score at the end, the KL penalty on every token
            old, ref = token_logps(policy, tokens, mask), token_logps(reference, tokens, mask)  # (B, T-1)
            score = reward_model(tokens, mask)  # (B,)
            rewards = ppo_rewards(score, old, ref, mask, kl_coef)
            # 3. advantages: against the value model's expectation
            values = value_model(tokens)[:, :-1] * mask[:, 1:]  # (B, T-1)
            advantages = gae_advantages(rewards, values, mask)
            returns = advantages + values
            counted = mask[:, 1:]
            spread = advantages[counted].std().clamp(min=1e-6)
            advantages = (advantages - advantages[counted].mean()) / spread * counted  # whitened over the batch
        # 4. update: a few full-batch steps of the clipped objective, and the value model towards the returns
        policy.train()
        for _ in range(epochs):
            logps = token_logps(policy, tokens, mask)
            value_loss = (((value_model(tokens)[:, :-1] - returns) ** 2) * counted).sum() / counted.sum()
            loss = ppo_policy_loss(logps, old, advantages, mask, clip) + 0.5 * value_loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            clipped = ((logps - old).exp() - 1).abs() > clip
        # kl: the sampled answers' log-ratio to the reference, summed over an answer's tokens (an estimate of
        # KL(policy || reference) per answer), before this step's update
        records.append({"score": float(score.mean()), "kl": float((old - ref).sum(-1).mean()),
                        "clipped": float(clipped[counted].float().mean()), "seconds": time.perf_counter() - start})
    policy.eval()
    return value_model, records
