"""Decoding: greedy, temperature, top-k and top-p (nucleus) sampling, in PyTorch.

    ids = generate(model, prompt_ids, max_new_tokens=100, temperature=0.8, top_k=20, top_p=0.9,
                   generator=torch.Generator().manual_seed(0))

`model` is anything that maps ids (B, T) to logits (B, T, V): a decoder-only model,
or for an encoder-decoder a function of the decoder's ids with the source fixed
(lambda tgt: bart(src, tgt)). The filters follow `plmcourse.ref.generate`.
"""

import torch

__all__ = ["top_k_filter", "top_p_filter", "sample_next", "generate"]


def top_k_filter(logits, k):
    """Keep the k largest logits along the last axis, set the rest to -inf (k None/<=0/>=V: keep all)."""
    V = logits.shape[-1]
    if k is None or k <= 0 or k >= V:
        return logits
    values, indices = torch.topk(logits, k, dim=-1)  # exactly k per row
    filtered = torch.full_like(logits, float("-inf"))
    return filtered.scatter(-1, indices, values)


def top_p_filter(logits, p):
    """Keep the smallest set of most likely tokens whose probability mass reaches p; rest -> -inf."""
    if p <= 0:
        raise ValueError(f"top_p must be positive, got {p}.")
    if p >= 1.0:
        return logits
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True, stable=True)
    mass_before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs
    keep_sorted = mass_before < p  # the most likely token has mass_before = 0: always kept
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    return logits.masked_fill(~keep, float("-inf"))


def sample_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """One token id per row of logits (B, V) -> (B,).

    temperature = 0 is greedy decoding (argmax); otherwise the logits are divided by
    the temperature (below 1: sharper, above 1: flatter), filtered by top-k and then
    top-p, and a token is sampled. `generator` (a torch.Generator) makes sampling
    reproducible; on another device than the logits, the sampling runs on its device.
    """
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}.")
    if temperature == 0:
        return logits.argmax(dim=-1)
    logits = top_k_filter(logits / temperature, top_k)
    if top_p is not None:
        logits = top_p_filter(logits, top_p)
    probs = torch.softmax(logits.float(), dim=-1)
    if generator is not None and generator.device != probs.device:
        return torch.multinomial(probs.to(generator.device), 1, generator=generator)[:, 0].to(logits.device)
    return torch.multinomial(probs, 1, generator=generator)[:, 0]


@torch.no_grad()
def generate(model, ids, max_new_tokens, temperature=1.0, top_k=None, top_p=None, generator=None,
             eos_id=None, max_context=None):
    """Append up to `max_new_tokens` tokens to ids (B, T), one at a time; returns (B, T + new).

    Each step feeds the last `max_context` ids and decodes from the logits of the
    last position. The default is model.config.max_len - 1, if the model has a
    config: trained with the shift inside the loss on windows of max_len tokens,
    a model never gets a target at its last position, so that position is not
    trained and must not be the one we read. Generation stops early once every
    row has produced `eos_id`. Greedy: temperature=0.
    """
    if max_context is None:
        max_len = getattr(getattr(model, "config", None), "max_len", None)
        max_context = None if max_len is None else max(1, max_len - 1)
    was_training = getattr(model, "training", False)
    if hasattr(model, "eval"):
        model.eval()
    finished = torch.zeros(ids.shape[0], dtype=torch.bool, device=ids.device)
    for _ in range(max_new_tokens):
        context = ids if max_context is None else ids[:, -max_context:]
        logits = model(context)[:, -1, :]  # (B, V): the prediction for the next position
        next_ids = sample_next(logits, temperature, top_k, top_p, generator)
        if eos_id is not None:
            next_ids = torch.where(finished, eos_id, next_ids)  # a finished row keeps padding with eos
            finished |= next_ids == eos_id
        ids = torch.cat([ids, next_ids[:, None]], dim=1)
        if eos_id is not None and bool(finished.all()):
            break
    if was_training:
        model.train()
    return ids
