"""ELMo in PyTorch: a bidirectional LSTM language model, its loss, and the scalar mix of its layers.

Same names and conventions as `plmcourse.ref.language_models`:

    tokens, targets (B, L) int64      logits (B, L, V)      layers (N, B, L, 2*dim)

The biLM has two language models that read the sentence in opposite directions
and share the token embedding and the softmax layer (Peters et al., 2018):

* the forward LM's output at position t has read tokens 0..t and predicts token t+1;
* the backward LM's output at position t has read tokens t..L-1 and predicts token t-1.

Both outputs are aligned with the positions they were computed at, so the ELMo
representation of token t at layer j is simply [forward_j(t); backward_j(t)].
Positions whose target is -100 (ignore_index) are padding.
"""

from __future__ import annotations

import torch
from torch import nn

from plmcourse.nn.objectives import cross_entropy

__all__ = ["BiLM", "ScalarMix", "scalar_mix", "bilm_loss", "reverse_padded"]

IGNORE_INDEX = -100


def reverse_padded(x, lengths=None):
    """Reverse each sequence of x (B, L, ...) along dim 1 within its length; padding stays at the end.

    lengths: (B,) number of real positions per row, or None when every row is full.
    Reversing the whole padded row instead would put the padding first, in front
    of the real tokens, for the backward LM to read.
    """
    if lengths is None:
        return x.flip(1)
    B, L = x.shape[:2]
    positions = torch.arange(L, device=x.device).expand(B, L)
    lengths = torch.as_tensor(lengths, device=x.device).view(B, 1)
    index = torch.where(positions < lengths, lengths - 1 - positions, positions)  # (B, L)
    index = index.view(B, L, *([1] * (x.dim() - 2))).expand_as(x)
    return torch.gather(x, 1, index)


class BiLM(nn.Module):
    """ELMo's bidirectional LSTM language model, at a size that trains on a CPU in seconds.

    vocab_size, dim: the token embedding and every LSTM have width `dim`.
    num_layers: LSTM layers per direction (ELMo: 2), with a residual connection
        around every layer after the first, as in ELMo.
    bidirectional: False keeps the forward LM only (a plain neural language model).

    forward(tokens) -> (forward_logits, backward_logits), each (B, L, V); the
    second is None when bidirectional=False.
    layers(tokens) -> (num_layers + 1, B, L, 2*dim): layer 0 is the token embedding
    repeated twice ([x; x], ELMo's context-independent layer), layer j >= 1 is
    [forward_j; backward_j].
    """

    def __init__(self, vocab_size, dim=64, num_layers=2, dropout=0.1, bidirectional=True):
        super().__init__()
        self.vocab_size, self.dim, self.num_layers = vocab_size, dim, num_layers
        self.bidirectional = bidirectional
        self.embedding = nn.Embedding(vocab_size, dim)
        self.forward_lstms = nn.ModuleList(nn.LSTM(dim, dim, batch_first=True) for _ in range(num_layers))
        self.backward_lstms = nn.ModuleList(
            nn.LSTM(dim, dim, batch_first=True) for _ in range(num_layers)) if bidirectional else None
        self.dropout = nn.Dropout(dropout)
        self.softmax = nn.Linear(dim, vocab_size)  # shared by both directions

    def _run(self, lstms, x):
        """Hidden states of every layer of one direction, (num_layers, B, L, dim)."""
        outputs = []
        for j, lstm in enumerate(lstms):
            h, _ = lstm(self.dropout(x))
            x = h if j == 0 else h + x  # residual connection from the layer below
            outputs.append(x)
        return outputs

    def _states(self, tokens, lengths=None):
        x = self.embedding(tokens)  # (B, L, dim)
        forward = self._run(self.forward_lstms, x)
        backward = None
        if self.bidirectional:
            # Reverse, read left to right, reverse back: position t has then read t..L-1.
            backward = [reverse_padded(h, lengths)
                        for h in self._run(self.backward_lstms, reverse_padded(x, lengths))]
        return x, forward, backward

    def forward(self, tokens, lengths=None):
        _, forward, backward = self._states(tokens, lengths)
        forward_logits = self.softmax(self.dropout(forward[-1]))
        backward_logits = self.softmax(self.dropout(backward[-1])) if backward is not None else None
        return forward_logits, backward_logits

    def layers(self, tokens, lengths=None):
        """ELMo's representations of every token at every layer, (num_layers + 1, B, L, 2*dim)."""
        if not self.bidirectional:
            raise ValueError("layers() needs both directions; this BiLM has bidirectional=False.")
        x, forward, backward = self._states(tokens, lengths)
        return torch.stack([torch.cat([x, x], dim=-1)]
                           + [torch.cat([f, b], dim=-1) for f, b in zip(forward, backward)])


def _shifted_targets(targets, shift, ignore_index):
    """Targets for predictions made at positions t, of the token at t + shift (shift = +1 or -1).

    A prediction counts only if the position it is made from and the position it
    predicts both hold real tokens; the others get ignore_index.
    """
    ahead, behind = targets[:, 1:], targets[:, :-1]  # position t + 1, and position t, for t = 0..L-2
    source, target = (behind, ahead) if shift == 1 else (ahead, behind)
    return torch.where(source == ignore_index, ignore_index, target)


def bilm_loss(forward_logits, backward_logits, targets, ignore_index=IGNORE_INDEX):
    """The biLM's negative log-likelihood: forward LM's mean cross-entropy + backward LM's.

    forward_logits, backward_logits: (B, L, V); targets: (B, L), ignore_index at padding.
    forward_logits[:, t] predicts targets[:, t + 1]; backward_logits[:, t] predicts
    targets[:, t - 1]. Each direction is averaged over the predictions it makes
    between real tokens (0 if it makes none, the course's cross_entropy convention);
    the result is their sum (ELMo maximises the sum of both log-likelihoods).
    """
    forward = cross_entropy(forward_logits[:, :-1], _shifted_targets(targets, +1, ignore_index), ignore_index)
    backward = cross_entropy(backward_logits[:, 1:], _shifted_targets(targets, -1, ignore_index), ignore_index)
    return forward + backward


def scalar_mix(layers, weights, gamma):
    """gamma * sum_j softmax(weights)_j * layers[j]: ELMo's task-specific combination of layers.

    layers: (N, ..., d) the N layers' representations stacked (or a list of N tensors);
    weights: (N,) unnormalised; gamma: a scalar (tensor) that rescales the mix.
    """
    if isinstance(layers, (list, tuple)):
        layers = torch.stack(list(layers))
    s = torch.softmax(weights, dim=0)  # (N,), positive and summing to 1
    return gamma * torch.tensordot(s, layers, dims=([0], [0]))


class ScalarMix(nn.Module):
    """Learned scalar mix: one weight per layer (softmax-normalised) and a global scale gamma.

    Starts as the plain average of the layers (weights 0, gamma 1). ELMo learns one
    ScalarMix per downstream task, with the biLM itself frozen.
    """

    def __init__(self, num_layers):
        super().__init__()
        self.weights = nn.Parameter(torch.zeros(num_layers))
        self.gamma = nn.Parameter(torch.ones(()))

    def forward(self, layers):
        return scalar_mix(layers, self.weights, self.gamma)

    def normalised_weights(self):
        return torch.softmax(self.weights.detach(), dim=0)
