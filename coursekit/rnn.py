"""The RNN encoder-decoder of notebook 05 as trainable modules (helpers, not exercises).

``Seq2Seq`` takes the two functions it runs as arguments, so the notebook hands
it the learner's ``rnn_encode`` and ``teacher_forced_logits`` and nothing of the
reference is copied into the notebook. ``GatedSeq2Seq`` swaps the tanh cell for
PyTorch's GRU or LSTM.
"""
import math

import torch
from torch import nn


def init_params(V_src, V_tgt, D, H, seed=0, dtype=torch.float32):
    """A fresh dict of encoder-decoder weights (the keys of ``solutions/rnn.py``'s docstring).

    Embeddings are N(0, 1). The recurrent matrices W_h are random orthogonal
    matrices: multiplying by one neither grows nor shrinks a vector, which helps a
    signal (and its gradient) survive many steps of the recurrence. Every other
    weight is uniform in (-1/sqrt(H), 1/sqrt(H)), as in ``torch.nn.RNN``.
    Deterministic in ``seed``.
    """
    g = torch.Generator().manual_seed(seed)
    k = 1 / math.sqrt(H)

    def uniform(*shape):
        return ((torch.rand(*shape, generator=g, dtype=torch.float64) * 2 - 1) * k).to(dtype)

    def orthogonal(n):
        q, r = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=torch.float64))
        return (q * torch.sign(torch.diagonal(r))).to(dtype)  # (n, n), q^T q = I

    def normal(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)

    return {
        "E_src": normal(V_src, D), "W_x_enc": uniform(H, D), "W_h_enc": orthogonal(H), "b_enc": uniform(H),
        "E_tgt": normal(V_tgt, D), "W_x_dec": uniform(H, D), "W_h_dec": orthogonal(H), "b_dec": uniform(H),
        "W_out": uniform(V_tgt, H), "b_out": uniform(V_tgt),
    }


class Seq2Seq(nn.Module):
    """The RNN encoder-decoder as a trainable module, built from the functions it is given.

    Its weights are the ``params`` dict (``init_params``) held as parameters, so an
    optimiser can train them; ``forward`` is ``rnn_encode`` followed by
    ``teacher_forced_logits``, the two functions passed in (notebook 05 passes the
    learner's, the tests the reference's).
    """

    def __init__(self, V_src, V_tgt, D=32, H=128, seed=0, *, rnn_encode, teacher_forced_logits):
        super().__init__()
        self.rnn_encode, self.teacher_forced_logits = rnn_encode, teacher_forced_logits
        self.weights = nn.ParameterDict({k: nn.Parameter(v) for k, v in init_params(V_src, V_tgt, D, H, seed).items()})

    @property
    def params(self):
        return dict(self.weights)

    def encode(self, src, src_mask):
        p = self.params
        return self.rnn_encode(src, src_mask, p["E_src"], p["W_x_enc"], p["W_h_enc"], p["b_enc"])

    def forward(self, src, src_mask, tgt_in):
        _, context = self.encode(src, src_mask)  # (B, H)
        return self.teacher_forced_logits(context, tgt_in, self.params)  # (B, T_y, V)


class GatedSeq2Seq(nn.Module):
    """The same encoder-decoder with a gated cell, ``nn.GRU`` or ``nn.LSTM``, in place of tanh.

    Only the function f of h_t = f(x_t, h_{t-1}) changes; the context vector is
    still the encoder's last real state (for an LSTM, the pair (h, cell)), and the
    decoder is still one step per output token. Padding is skipped with
    ``pack_padded_sequence`` (which needs at least one token: a sentence that is
    all padding is read as a single <pad>).
    """

    def __init__(self, V_src, V_tgt, D=32, H=128, cell="gru"):
        super().__init__()
        if cell not in ("gru", "lstm"):
            raise ValueError(f"cell must be 'gru' or 'lstm', got {cell!r}")
        make_rnn = nn.GRU if cell == "gru" else nn.LSTM
        self.emb_src, self.emb_tgt = nn.Embedding(V_src, D), nn.Embedding(V_tgt, D)
        self.encoder = make_rnn(D, H, batch_first=True)
        self.decoder = make_rnn(D, H, batch_first=True)
        self.out = nn.Linear(H, V_tgt)

    def encode(self, src, src_mask):
        lengths = src_mask.sum(dim=1).clamp_min(1).cpu()  # pack_padded_sequence needs lengths >= 1 on the CPU
        packed = nn.utils.rnn.pack_padded_sequence(self.emb_src(src), lengths, batch_first=True,
                                                   enforce_sorted=False)
        _, context = self.encoder(packed)  # (1, B, H), or a pair of them for an LSTM
        return context

    def step(self, prev_ids, state):
        """One decoder step: (B,) previous tokens -> (B, V) logits and the new state."""
        y, state = self.decoder(self.emb_tgt(prev_ids)[:, None], state)  # (B, 1, H)
        return self.out(y[:, 0]), state

    def forward(self, src, src_mask, tgt_in):
        y, _ = self.decoder(self.emb_tgt(tgt_in), self.encode(src, src_mask))  # (B, T_y, H)
        return self.out(y)  # (B, T_y, V)
