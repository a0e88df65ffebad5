"""The loss every objective is built on, in PyTorch, with the names and conventions of
`plmcourse.ref.objectives`: cross-entropy that skips ignored targets.

Each loss takes logits, skips targets equal to `ignore_index` (-100) and returns the
mean over the targets it counts, as a 0-d tensor that gradients flow through. They
are written out (minus the log-softmax at the target) rather than delegated to
torch.nn.functional.cross_entropy, which the tests hold them against. The losses of
the pre-training objectives are built on it: mlm_loss in `plmcourse.nn.bert`,
causal_lm_loss in `plmcourse.nn.gpt`.
"""

import torch

__all__ = ["IGNORE_INDEX", "cross_entropy"]

IGNORE_INDEX = -100


def cross_entropy(logits, targets, ignore_index=IGNORE_INDEX):
    """Mean of -log softmax(logits)[target] over the positions whose target is not ignore_index.

    logits: (..., V); targets: (...) integer ids. Returns a 0-d tensor; 0.0 (with a
    zero gradient) when no position is counted, where torch's own returns NaN.
    """
    if targets.shape != logits.shape[:-1]:
        raise ValueError(f"targets must have shape {tuple(logits.shape[:-1])} (logits' shape without "
                         f"the last axis), got {tuple(targets.shape)}.")
    V = logits.shape[-1]
    logits = logits.reshape(-1, V)  # (N, V)
    targets = targets.reshape(-1)  # (N,)
    counted = targets != ignore_index  # (N,)
    safe = torch.where(counted, targets, 0)  # ignored positions pick a valid index, then weigh 0
    # log_softmax subtracts the row's max itself (stable), and under autocast runs in float32.
    log_probs = torch.log_softmax(logits, dim=-1)  # (N, V)
    nll = -log_probs.gather(-1, safe[:, None])[:, 0]  # (N,): -log p(target)
    nll = torch.where(counted, nll, 0.0)
    return nll.sum() / counted.sum().clamp(min=1)
