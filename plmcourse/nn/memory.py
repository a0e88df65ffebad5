"""Transformer-XL's segment-level recurrence: a GPT that remembers the segment before (notebook 12).

A GPT reads a window of L tokens and forgets it. Cut a long text into segments of L and
the first token of every segment has no context at all; on average a token sees L / 2
tokens before it. Transformer-XL (Dai et al., 2019) keeps, for every layer, the hidden
states of the previous segment(s) as a *memory*: the next segment's queries attend to
keys and values made from [memory; segment]. The memory is detached: no gradient flows
into the past, so a step computes and backpropagates through its own L positions only,
and the memory adds M keys and values to attend to (Transformer-XL caches the hidden
states and projects them again; a K/V cache would keep the projections instead).

    model = MemoryGPT(GPTConfig(vocab_size=V, d_model=64, n_layers=2, n_heads=4), memory_len=32)
    logits, memory = model(segment_1)              # (B, L, V); a list of n_layers (B, M, d)
    logits, memory = model(segment_2, memory)      # segment_2 now sees segment_1 too

Memory. memory[l] holds the *inputs* of layer l for the last memory_len positions (layer
0's are the token embeddings). Layer l's keys for a segment come from [memory[l]; x], so
a memory position is exactly what the same position would have been in one long
sequence, as long as the memory covers everything before it. With a memory of M < all
previous positions, each layer looks M further back than the layer below did, so the
top layer's context reaches n_layers * M tokens back (Transformer-XL's "extended
context"), more than recomputing a window of M + L tokens gives.

Positions. With memory, absolute positions break: the segment's first token would be
position 0 again, the same number as a token M positions earlier in the memory.
Transformer-XL therefore scores query i against key j with relative positions:

    q_i . k_j  +  q_i . W_R r_{i-j}  +  u . k_j  +  v . W_R r_{i-j}

where r_{i-j} is the sinusoidal encoding of the distance and u, v are learned biases; a
"relative shift" trick builds the (i - j) table without a loop. We use ALiBi instead
(Press et al., 2022): no position embedding at all, and each head h subtracts a fixed
penalty proportional to distance from its scores,

    score(i, j) = q_i . k_j / sqrt(hs)  -  m_h * (i - j),     m_h = 2^(-8 (h + 1) / n_heads),

so one head looks mostly at the last few tokens (m = 1/4) and another far back (m = 1/256).
Why: it is one line, has no parameters, and depends only on the distance i - j, so a
cached key needs no re-encoding when it moves into the memory, and any memory length
works. What we give up is a learned, content-dependent use of position (Transformer-XL's
second and fourth terms). `config.positions` and `config.max_len` are therefore unused:
there is no position embedding and no maximum length.

memory_len=0 (or memory=None) is the same model without the cache: the same blocks and
the same ALiBi positions on the segment alone, an ordinary causal LM. That is the fair
comparison: "with memory" and "without" differ in nothing but the memory.

The blocks are the course's `TransformerBlock`s (norm1, self_attn's qkv and out
projections, norm2, ff); only the attention call is written here, because it needs an
additive bias and keys longer than the queries. Nothing assumes CUDA: every tensor is
made on the device of the inputs.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from plmcourse.nn.attention import merge_heads, split_heads
from plmcourse.nn.models import GPTConfig, _add_decoder_layers, _initialise
from plmcourse.nn.objectives import cross_entropy
from plmcourse.nn.transformer import TransformerBlock

__all__ = [
    "alibi_slopes",
    "alibi_bias",
    "relative_attention",
    "MemoryGPT",
    "segment_batches",
    "RecurrentLoss",
    "stream_loss",
]


# ----------------------------------------------------------------------------
# ALiBi: a linear penalty on distance, one slope per head


def alibi_slopes(n_heads):
    """The heads' slopes m_h: a geometric sequence 2^(-8/n), 2^(-16/n), ..., 2^(-8) (Press et al.).

    For a number of heads that is not a power of 2 the paper takes the slopes of the
    closest smaller power of 2 and fills up with every other slope of twice that.
    Returns a list of n_heads floats.
    """
    def geometric(n):
        return [2.0 ** (-8.0 * (h + 1) / n) for h in range(n)]

    if math.log2(n_heads).is_integer():
        return geometric(n_heads)
    closest = 2 ** math.floor(math.log2(n_heads))
    return geometric(closest) + geometric(2 * closest)[0::2][:n_heads - closest]


def alibi_bias(slopes, n_queries, n_memory=0):
    """(nh, L, M + L) additive scores: -m_h * (i - j) for key j at or before query i, -inf after it.

    slopes: (nh,) tensor. The keys are [memory (M); segment (L)], so query i (0-based in
    the segment) sits at key position M + i: it sees every memory position and the
    segment's positions 0..i. Only distances enter, so the same bias serves any segment.
    """
    L, M = n_queries, n_memory
    query_position = torch.arange(M, M + L, device=slopes.device)[:, None]  # (L, 1)
    key_position = torch.arange(M + L, device=slopes.device)[None, :]  # (1, M + L)
    distance = (query_position - key_position).to(slopes.dtype)  # (L, M + L); < 0: a future key
    bias = -slopes[:, None, None] * distance  # (nh, L, M + L)
    return bias.masked_fill(distance < 0, float("-inf"))


def relative_attention(q, k, v, bias, dropout_p=0.0):
    """softmax(q k^T / sqrt(hs) + bias) v, by PyTorch's fused kernel.

    q: (B, nh, L, hs); k, v: (B, nh, M + L, hs); bias: (nh, L, M + L), -inf where not allowed.
    The course's scaled_dot_product_attention takes bool masks only; torch's takes a
    float mask and adds it to the scaled scores, which is exactly ALiBi.
    Every query sees at least itself, so no row is entirely -inf.
    """
    return F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.dtype), dropout_p=dropout_p)


# ----------------------------------------------------------------------------
# The model


def block_with_memory(block, x, memory, bias):
    """One course TransformerBlock whose self-attention also reads the memory.

    x: (B, L, d) this layer's input for the segment; memory: (B, M, d) this layer's input
    for the positions before it. Queries come from the segment only, keys and values
    from [memory; segment]. Returns (B, L, d).
    """
    attn = block.self_attn
    L = x.shape[1]
    context = torch.cat([memory, x], dim=1)  # (B, M + L, d)
    if block.norm_first:
        # LayerNorm works on each position alone, so normalising [memory; x] together
        # gives what each position would have got in one long sequence.
        context = block.norm1(context)
    q, k, v = attn.project(context)  # (B, M + L, d) each; the memory's queries are not needed
    q = split_heads(q[:, -L:], attn.n_heads)  # (B, nh, L, hs)
    k = split_heads(k, attn.n_heads)  # (B, nh, M + L, hs)
    v = split_heads(v, attn.n_heads)  # (B, nh, M + L, hs)
    dropout_p = attn.dropout if attn.training else 0.0
    y = attn.out_proj(merge_heads(relative_attention(q, k, v, bias, dropout_p)))  # (B, L, d)

    # The residual connections exactly as TransformerBlock does them (pre- or post-LN).
    if block.norm_first:
        x = x + block.dropout(y)
    else:
        x = block.norm1(x + block.dropout(y))
    if block.ff is not None and block.norm_first:
        x = x + block.dropout(block.ff(block.norm2(x)))
    elif block.ff is not None:
        x = block.norm2(x + block.dropout(block.ff(x)))
    return x  # (B, L, d)


class MemoryGPT(nn.Module):
    """A decoder-only LM with Transformer-XL's segment-level recurrence and ALiBi positions.

    config: a GPTConfig (its positions and max_len are unused, see the module docstring).
    memory_len: how many past positions each layer keeps; 0 gives an ordinary causal LM.
    """

    def __init__(self, config: GPTConfig, memory_len: int = 0):
        super().__init__()
        if memory_len < 0:
            raise ValueError(f"memory_len must be >= 0, got {memory_len}.")
        self.config = config
        self.memory_len = memory_len
        self.token = nn.Embedding(config.vocab_size, config.d_model)
        _add_decoder_layers(self, config)  # dropout, blocks, norm, lm_head: as GPT's
        # Fixed, not learned; a buffer moves with .to(device, dtype) and is rebuilt, not saved.
        self.register_buffer("slopes", torch.tensor(alibi_slopes(config.n_heads)), persistent=False)
        _initialise(self, config.init_std)

    def forward(self, ids, memory=None):
        """ids (B, L), memory None or a list of n_layers tensors (B, M, d) from the previous call.

        Returns logits (B, L, V), row i scoring the token after ids[:, i], and the new
        memory: per layer, the last memory_len positions of [memory; this segment]'s
        inputs to that layer, detached (no gradient flows into the past).
        """
        B, L = ids.shape
        x = self.dropout(self.token(ids))  # (B, L, d); no position embedding: ALiBi does positions
        if memory is None:
            memory = [x.new_zeros(B, 0, x.shape[-1])] * len(self.blocks)  # nothing before this segment
        if len(memory) != len(self.blocks):
            raise ValueError(f"memory must hold one tensor per layer ({len(self.blocks)}), got {len(memory)}.")
        bias = alibi_bias(self.slopes, L, memory[0].shape[1])  # (nh, L, M + L), the same in every layer

        new_memory = []
        for block, past in zip(self.blocks, memory):
            new_memory.append(self._keep(past, x))
            x = block_with_memory(block, x, past, bias)  # (B, L, d)
        x = self.norm(x) if self.norm is not None else x
        logits = x @ self.token.weight.T if self.lm_head is None else self.lm_head(x)  # (B, L, V)
        return logits, new_memory

    def _keep(self, past, x):
        """The last memory_len positions of [past; x], cut off from the graph: (B, <= memory_len, d)."""
        both = torch.cat([past, x], dim=1)  # (B, M + L, d)
        return both[:, both.shape[1] - min(self.memory_len, both.shape[1]):].detach()


# ----------------------------------------------------------------------------
# Training and evaluating segment by segment


def _rows(ids, n_rows):
    """A long stream (N,) cut into n_rows equal rows (n_rows, N // n_rows), read in parallel."""
    n = len(ids) // n_rows
    if n < 2:
        raise ValueError(f"a stream of {len(ids)} tokens is too short for {n_rows} rows.")
    return ids[:n_rows * n].view(n_rows, n)


def segment_batches(ids, batch_size, segment_len):
    """get_batch(step) for plmcourse.train.train that walks a stream segment by segment.

    ids: (N,) token ids, cut into batch_size rows. Step s gives the s-th segment of every
    row, (B, L + 1) (L inputs, and the targets shifted by one), and whether it is the
    first segment of a pass over the rows (then the memory must start empty). After the
    last segment it starts again at the first. Consecutive steps are consecutive text:
    the memory of one step belongs to the segment of the next.
    """
    rows = _rows(ids, batch_size)
    n_segments = (rows.shape[1] - 1) // segment_len

    def get_batch(step):
        k = step % n_segments
        start = k * segment_len
        return rows[:, start:start + segment_len + 1], k == 0  # (B, L + 1), first?

    return get_batch


class RecurrentLoss:
    """loss_fn(model, batch) for plmcourse.train.train that carries the memory from step to step.

    batch: what segment_batches gives. The memory is detached, so each step
    backpropagates through its own segment only (truncated backpropagation through time).
    """

    def __init__(self):
        self.memory = None

    def __call__(self, model, batch):
        segment, first = batch  # (B, L + 1)
        if first:
            self.memory = None
        logits, self.memory = model(segment[:, :-1], self.memory)  # (B, L, V)
        return cross_entropy(logits, segment[:, 1:])


@torch.no_grad()
def stream_loss(model, ids, segment_len, n_rows=32, recompute=False):
    """Mean next-token loss (nats per token) over a long stream, read segment by segment.

    ids: (N,) token ids, cut into n_rows rows read in parallel; every token of a row but its
    first is predicted once. Two ways, with the same context for every token's first layer:
      recompute=False: carry the memory; each position's hidden states are computed once.
      recompute=True:  for each segment, run the model without memory on the
                       model.memory_len tokens before it and the segment, and score only
                       the segment: the context is computed again for every segment.
    With more than one layer the two differ a little: a carried memory's upper layers
    were themselves computed with a memory, so they reach further back.
    """
    was_training = model.training
    model.eval()
    rows = _rows(ids, n_rows)  # (R, N)
    L, M = segment_len, model.memory_len
    total, count, memory = 0.0, 0, None
    for start in range(0, rows.shape[1] - 1, L):
        segment = rows[:, start:start + L + 1]  # (R, <= L + 1)
        inputs, targets = segment[:, :-1], segment[:, 1:]
        if recompute:
            window = rows[:, max(0, start - M):start + inputs.shape[1]]  # (R, <= M + L)
            logits = model(window)[0][:, -inputs.shape[1]:]  # score the segment only
        else:
            logits, memory = model(inputs, memory)
        total += float(cross_entropy(logits, targets)) * targets.numel()
        count += targets.numel()
    model.train(was_training)
    return total / count
