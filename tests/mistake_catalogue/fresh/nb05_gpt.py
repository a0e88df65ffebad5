"""Fresh student-style implementations for notebook 05 (GPT):
causal_lm_loss, top_k_filter, top_p_filter (PyTorch)."""
import torch


def _masked_mean_nll(logits, targets, ignore_index):
    keep = targets != ignore_index
    logp = torch.log_softmax(logits, dim=-1)
    picked = logp.gather(-1, torch.where(keep, targets, torch.zeros_like(targets)).unsqueeze(-1)).squeeze(-1)
    return -(picked * keep).sum() / keep.sum()


# ---- causal_lm_loss --------------------------------------------------------
def causal_lm_no_shift(logits, tokens, ignore_index=-100):
    """WRONG: scores the logits at t against the token at t (no shift): the model predicts what it reads."""
    return _masked_mean_nll(logits, tokens, ignore_index)


def causal_lm_shift_backwards(logits, tokens, ignore_index=-100):
    """WRONG: shifts the wrong way: logits[..., 1:, :] against tokens[..., :-1]."""
    return _masked_mean_nll(logits[..., 1:, :], tokens[..., :-1], ignore_index)


def causal_lm_hardcoded_ignore(logits, tokens, ignore_index=-100):
    """WRONG: always treats -100 as the ignored value, whatever ignore_index is."""
    return _masked_mean_nll(logits[..., :-1, :], tokens[..., 1:], -100)


def causal_lm_log_of_softmax(logits, tokens, ignore_index=-100):
    """WRONG: torch.log(torch.softmax(...)); large logit gaps give log(0) = -inf and an inf loss."""
    logits, targets = logits[..., :-1, :], tokens[..., 1:]
    keep = targets != ignore_index
    probs = torch.softmax(logits, dim=-1)
    picked = torch.log(probs.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1))
    return -picked[keep].mean()


def causal_lm_divide_by_positions(logits, tokens, ignore_index=-100):
    """WRONG: divides by the number of predictions (T - 1 per row), counting the ignored ones."""
    logits, targets = logits[..., :-1, :], tokens[..., 1:]
    keep = targets != ignore_index
    logp = torch.log_softmax(logits, dim=-1)
    picked = logp.gather(-1, torch.where(keep, targets, 0).unsqueeze(-1)).squeeze(-1)
    return -(picked * keep).sum() / targets.numel()


def causal_lm_shift_first_axis(logits, tokens, ignore_index=-100):
    """WRONG: shifts with logits[:-1] and tokens[1:], which is the batch axis for batched input."""
    return _masked_mean_nll(logits[:-1], tokens[1:], ignore_index)


def causal_lm_logsumexp(logits, tokens, ignore_index=-100):
    """CORRECT: logsumexp minus the target logit over the shifted pairs, masked sum over the count."""
    pred = logits[..., :-1, :]
    target = tokens[..., 1:]
    keep = target != ignore_index
    target_logit = pred.gather(-1, torch.where(keep, target, torch.zeros_like(target)).unsqueeze(-1)).squeeze(-1)
    nll = torch.logsumexp(pred, dim=-1) - target_logit
    return torch.where(keep, nll, torch.zeros_like(nll)).sum() / keep.sum()


def causal_lm_flatten_index(logits, tokens, ignore_index=-100):
    """CORRECT: flattens the shifted pairs to (N, V) and selects the counted rows by boolean indexing."""
    V = logits.shape[-1]
    pred = logits[..., :-1, :].reshape(-1, V)
    target = tokens[..., 1:].reshape(-1)
    keep = target != ignore_index
    logp = torch.log_softmax(pred[keep], dim=-1)
    return -logp[torch.arange(logp.shape[0], device=logp.device), target[keep]].mean()


# ---- top_k_filter ----------------------------------------------------------
def top_k_no_special_values(logits, k):
    """WRONG: calls torch.topk(logits, k) directly: k=None or k >= V fails, k=0 keeps nothing."""
    values, indices = torch.topk(logits, k, dim=-1)
    out = torch.full_like(logits, float("-inf"))
    return out.scatter(-1, indices, values)


def top_k_in_place(logits, k):
    """WRONG: writes -inf into the caller's logits (masked_fill_) and returns them."""
    if not k or k >= logits.shape[-1]:
        return logits.clone()
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]
    logits.masked_fill_(logits < kth, float("-inf"))
    return logits


def top_k_threshold_no_keepdim(logits, k):
    """WRONG: the k-th value is taken without keepdim, so it broadcasts against the vocabulary axis."""
    if not k or k >= logits.shape[-1]:
        return logits.clone()
    kth = torch.topk(logits, k, dim=-1).values[..., -1]
    return logits.masked_fill(logits < kth, float("-inf"))


def top_k_keeps_k_plus_one(logits, k):
    """WRONG: off by one: thresholds at the (k+1)-th largest value with '<', so k + 1 logits survive."""
    if not k or k >= logits.shape[-1]:
        return logits.clone()
    ranked = torch.sort(logits, dim=-1, descending=True).values
    threshold = ranked[..., k:k + 1]
    return logits.masked_fill(logits < threshold, float("-inf"))


def top_k_zeros_elsewhere(logits, k):
    """WRONG: scatters the kept values into torch.zeros_like(logits): the others become 0, not -inf."""
    if not k or k >= logits.shape[-1]:
        return logits.clone()
    values, indices = torch.topk(logits, k, dim=-1)
    return torch.zeros_like(logits).scatter(-1, indices, values)


def top_k_scatter(logits, k):
    """CORRECT: scatter the top-k values into a tensor full of -inf."""
    if k is None or k == 0 or k >= logits.shape[-1]:
        return logits.clone()
    values, indices = torch.topk(logits, k, dim=-1)
    return torch.full_like(logits, float("-inf")).scatter(-1, indices, values)


def top_k_rank_mask(logits, k):
    """CORRECT: the rank of every logit (argsort of the descending argsort); ranks >= k become -inf."""
    V = logits.shape[-1]
    if not k or k >= V:
        return logits.clone()
    order = torch.argsort(logits, dim=-1, descending=True, stable=True)
    rank = torch.empty_like(order).scatter_(-1, order, torch.arange(V, device=logits.device).expand_as(order))
    return torch.where(rank < k, logits, torch.full_like(logits, float("-inf")))


# ---- top_p_filter ----------------------------------------------------------
def top_p_excludes_crossing_token(logits, p):
    """WRONG: keeps a token only while the mass *including* it is below p; the token that crosses p is dropped."""
    if p >= 1:
        return logits.clone()
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
    keep_sorted = torch.cumsum(sorted_probs, dim=-1) < p
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    return logits.masked_fill(~keep, float("-inf"))


def top_p_not_mapped_back(logits, p):
    """WRONG: applies the decision made in sorted order directly to the unsorted logits."""
    if p >= 1:
        return logits.clone()
    sorted_probs, _ = torch.sort(torch.softmax(logits, dim=-1), dim=-1, descending=True)
    before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs
    keep = before < p
    return logits.masked_fill(~keep, float("-inf"))


def top_p_no_p_one_case(logits, p):
    """WRONG: no special case for p >= 1; when the cumulative sum rounds to 1.0 early, tiny tokens are dropped."""
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
    before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs
    keep = torch.zeros_like(before, dtype=torch.bool).scatter(-1, order, before < p)
    return logits.masked_fill(~keep, float("-inf"))


def top_p_unsorted_cumsum(logits, p):
    """WRONG: forgets to sort: accumulates the probabilities in vocabulary order."""
    if p >= 1:
        return logits.clone()
    probs = torch.softmax(logits, dim=-1)
    before = torch.cumsum(probs, dim=-1) - probs
    return logits.masked_fill(before >= p, float("-inf"))


def top_p_in_place(logits, p):
    """WRONG: masks the caller's logits in place (masked_fill_) and returns them."""
    if p >= 1:
        return logits.clone()
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
    before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs
    keep = torch.zeros_like(before, dtype=torch.bool).scatter(-1, order, before < p)
    logits.masked_fill_(~keep, float("-inf"))
    return logits


def top_p_less_equal(logits, p):
    """WRONG: keeps a token while the mass before it is <= p (not < p), one token too many at the boundary."""
    if p >= 1:
        return logits.clone()
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
    before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs
    keep = torch.zeros_like(before, dtype=torch.bool).scatter(-1, order, before <= p)
    return logits.masked_fill(~keep, float("-inf"))


def top_p_scatter(logits, p):
    """CORRECT: sort, exclusive cumulative sum (a leading zero), scatter the decision back."""
    if p >= 1:
        return logits.clone()
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
    cumulative = torch.cumsum(sorted_probs, dim=-1)
    mass_before = torch.cat([torch.zeros_like(cumulative[..., :1]), cumulative[..., :-1]], dim=-1)
    keep_sorted = mass_before < p
    keep_sorted[..., 0] = True
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    return torch.where(keep, logits, torch.full_like(logits, float("-inf")))


def top_p_row_loop(logits, p):
    """CORRECT: a Python loop per row that walks the tokens from most to least likely."""
    if p >= 1:
        return logits.clone()
    out = torch.full(logits.shape, float("-inf"), dtype=logits.dtype, device=logits.device)
    flat_in = logits.reshape(-1, logits.shape[-1])
    flat_out = out.view(-1, logits.shape[-1])
    for r in range(flat_in.shape[0]):
        probs = torch.softmax(flat_in[r], dim=-1)
        order = torch.argsort(probs, descending=True).tolist()
        mass = torch.zeros((), dtype=probs.dtype)
        for position, j in enumerate(order):
            if position > 0 and not bool(mass < p):
                break
            flat_out[r, j] = flat_in[r, j]
            mass = mass + probs[j]
    return out


FRESH = {
    "check_causal_lm_loss": {
        "wrong": [
            ("no shift", causal_lm_no_shift, "Logits at t are scored against the token at t."),
            ("shift backwards", causal_lm_shift_backwards, "Logits at t are scored against the token at t - 1."),
            ("hard-coded -100", causal_lm_hardcoded_ignore, "Ignores the ignore_index argument."),
            ("log of softmax", causal_lm_log_of_softmax, "Not stable: log(softmax) is -inf for large gaps."),
            ("divides by all predictions", causal_lm_divide_by_positions,
             "Divides by all T - 1 predictions, counting the ignored targets."),
            ("shift on the first axis", causal_lm_shift_first_axis,
             "Shifts along the batch axis instead of the time axis for batched input."),
        ],
        "correct": [
            ("logsumexp minus target logit", causal_lm_logsumexp),
            ("flatten and boolean index", causal_lm_flatten_index),
        ],
    },
    "check_top_k_filter": {
        "wrong": [
            ("no k=None/0/>=V handling", top_k_no_special_values,
             "k=None or k >= V raises and k=0 removes everything instead of keeping all."),
            ("in place", top_k_in_place, "Changes the caller's logits."),
            ("threshold without keepdim", top_k_threshold_no_keepdim,
             "The k-th largest value is broadcast along the vocabulary axis (wrong rows)."),
            ("keeps k + 1", top_k_keeps_k_plus_one, "Off by one: keeps the k + 1 largest."),
            ("zeros instead of -inf", top_k_zeros_elsewhere, "The removed logits become 0, not -inf."),
        ],
        "correct": [
            ("scatter into -inf", top_k_scatter),
            ("rank mask", top_k_rank_mask),
        ],
    },
    "check_top_p_filter": {
        "wrong": [
            ("crossing token dropped", top_p_excludes_crossing_token,
             "Keeps tokens whose cumulative mass including themselves is < p; the token crossing p (even the top one) is dropped."),
            ("not mapped back", top_p_not_mapped_back, "The sorted-order decision is applied to unsorted positions."),
            ("no p >= 1 case", top_p_no_p_one_case,
             "With p = 1, tokens after the cumulative sum rounds to 1.0 are removed."),
            ("cumsum without sorting", top_p_unsorted_cumsum, "Accumulates the mass in vocabulary order."),
            ("in place", top_p_in_place, "Changes the caller's logits."),
            ("<= instead of <", top_p_less_equal, "Keeps one extra token when the mass before it equals p."),
        ],
        "correct": [
            ("sort, exclusive cumsum, scatter", top_p_scatter),
            ("row loop", top_p_row_loop),
        ],
    },
}
