"""Notebook 07's comparison of positional encodings: one small causal tagger with no positions, a learned table,
the sinusoidal table of notebook 06 or the learner's RoPE, trained on one task ("label each position with the
token ``offset`` places to its left") and scored position by position, on texts longer than any in training too.
"""
import math

import torch
from torch import nn

from . import blocks
from .transformer import check_sizes, seeded_linear, as_dict, as_parameters, encoder_block_weights, sinusoidal_table

KINDS = ("none", "learned", "sinusoidal", "rope")  # the positions a tagger may have


class PositionTagger(nn.Module):
    """A causal stack that labels every position of a text (notebook 07's comparison of positional encodings).

    ``positions`` is "none" (the tokens alone), "learned" (a trainable table of ``max_len`` rows added to the
    tokens), "sinusoidal" (the fixed table of notebook 06 added) or "rope" (nothing added; the blocks' attention is
    the ``rope_attention`` given, the learner's). Post-norm blocks with the causal mask, as notebook 07's
    decoder; a linear head gives (B, T, V) logits, row i the label of position i.
    """

    def __init__(self, vocab_size, positions, d_model=32, n_heads=4, d_ff=64, n_layers=2, max_len=24, seed=0,
                 rope_attention=None):
        super().__init__()
        if positions not in KINDS:
            raise ValueError(f"positions must be one of {KINDS}, got {positions!r}")
        if positions == "rope" and rope_attention is None:
            raise ValueError("positions='rope' needs the rope_attention function")
        check_sizes(d_model, n_heads, "learned")
        g = torch.Generator().manual_seed(seed)
        self.positions, self.n_heads, self.rope_attention = positions, n_heads, rope_attention
        self.E = nn.Parameter(torch.randn(vocab_size, d_model, generator=g) * d_model ** -0.5)
        if positions == "learned":
            self.P = nn.Parameter(torch.randn(max_len, d_model, generator=g) * 0.02)
        elif positions == "sinusoidal":
            self.register_buffer("P", sinusoidal_table(max_len, d_model))
        else:
            self.P = None
        self.layers = nn.ModuleList(as_parameters(encoder_block_weights(g, d_model, d_ff)) for _ in range(n_layers))
        self.head = seeded_linear(g, d_model, vocab_size)

    def forward(self, ids):
        """(B, T) ids -> (B, T, V) logits."""
        T = ids.shape[1]
        x = self.E[ids] * math.sqrt(self.E.shape[1])
        if self.P is not None:
            if T > self.P.shape[0]:
                raise ValueError(f"a text of T={T} tokens is longer than the positional table's {self.P.shape[0]} "
                                 f"rows")
            x = x + self.P[:T]
        mask = torch.ones(T, T, dtype=torch.bool, device=ids.device).tril()  # causal
        for layer in self.layers:
            p = as_dict(layer)
            if self.positions == "rope":
                a, _ = self.rope_attention(x, p["attn"], self.n_heads, mask)
            else:
                a, _ = blocks.multi_head_attention(x, x, p["attn"], self.n_heads, mask)
            h = blocks.add_norm(x, a, p["ln1"])
            x = blocks.add_norm(h, blocks.feed_forward(h, p["ffn"]), p["ln2"])
        return self.head(x)


def offset_batches(vocab_size, offset, lengths, batch_size, seed=0):
    """Endless seeded batches of the task "label each position with the token ``offset`` places to its left":
    (ids (B, T), labels (B, T)), T drawn from ``lengths`` for each batch, labels -100 where there is no such token."""
    g = torch.Generator().manual_seed(seed)
    lengths = list(lengths)
    while True:
        T = lengths[int(torch.randint(len(lengths), (1,), generator=g))]
        ids = torch.randint(vocab_size, (batch_size, T), generator=g)
        labels = torch.full_like(ids, -100)
        labels[:, offset:] = ids[:, :T - offset]
        yield ids, labels


@torch.no_grad()
def accuracy_by_position(model, vocab_size, offset, T, n=200, seed=1):
    """The share of ``n`` seeded texts of length ``T`` whose position i the model labels right, for i = offset ..
    T - 1: {i: accuracy}."""
    ids = torch.randint(vocab_size, (n, T), generator=torch.Generator().manual_seed(seed))
    right = model(ids)[:, offset:].argmax(-1) == ids[:, :T - offset]  # (n, T - offset)
    return {offset + k: float(a) for k, a in enumerate(right.double().mean(0).tolist())}
