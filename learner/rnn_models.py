"""The RNN encoder-decoder of notebook 05 as trainable modules (helpers, not exercises).

``Seq2Seq`` takes the two functions it runs as arguments, so the notebook hands
it the learner's ``rnn_encode`` and ``teacher_forced_logits`` and nothing of the
reference is copied into the notebook. ``GatedSeq2Seq`` swaps the tanh cell for
PyTorch's GRU or LSTM.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn


def init_params(V_src, V_tgt, D, d_h, seed=0, dtype=torch.float32):
    """A fresh dict of the RNN encoder-decoder's weights, the ``params`` of notebook 05's exercises.

    Keys and shapes: "E_src" (V_src, D) and "E_tgt" (V_tgt, D), the embeddings; the encoder's "W_x_enc" (d_h, D),
    "W_h_enc" (d_h, d_h), "b_enc" (d_h,); the decoder's "W_x_dec" (d_h, D), "W_h_dec" (d_h, d_h), "b_dec" (d_h,);
    the output layer's "W_out" (V_tgt, d_h), "b_out" (V_tgt,). A W is applied as x @ W.T.

    Embeddings are N(0, 1). The recurrent matrices W_h are random orthogonal
    matrices: multiplying by one neither grows nor shrinks a vector, which helps a
    signal (and its gradient) survive many steps of the recurrence. Every other
    weight is uniform in (-1/sqrt(d_h), 1/sqrt(d_h)), as in ``torch.nn.RNN``.
    Deterministic in ``seed``.
    """
    draw, k = _Draws(seed, dtype), 1 / math.sqrt(d_h)
    return {
        "E_src": draw.normal(V_src, D), "W_x_enc": draw.uniform(d_h, D, k=k), "W_h_enc": draw.orthogonal(d_h),
        "b_enc": draw.uniform(d_h, k=k),
        "E_tgt": draw.normal(V_tgt, D), "W_x_dec": draw.uniform(d_h, D, k=k), "W_h_dec": draw.orthogonal(d_h),
        "b_dec": draw.uniform(d_h, k=k),
        "W_out": draw.uniform(V_tgt, d_h, k=k), "b_out": draw.uniform(V_tgt, k=k),
    }


class _Draws:
    """Seeded draws, made in float64 then cast to ``dtype``, in the order asked for: the initialisers' shared parts
    (so that a model is the same in float32 and float64)."""

    def __init__(self, seed, dtype):
        self.g, self.dtype = torch.Generator().manual_seed(seed), dtype

    def uniform(self, *shape, k):
        """Uniform in (-k, k)."""
        return ((torch.rand(*shape, generator=self.g, dtype=torch.float64) * 2 - 1) * k).to(self.dtype)

    def orthogonal(self, n):
        """A random (n, n) orthogonal matrix: q^T q = I."""
        q, r = torch.linalg.qr(torch.randn(n, n, generator=self.g, dtype=torch.float64))
        return (q * torch.sign(torch.diagonal(r))).to(self.dtype)

    def normal(self, *shape):
        return torch.randn(*shape, generator=self.g, dtype=torch.float64).to(self.dtype)


class Seq2Seq(nn.Module):
    """The RNN encoder-decoder as a trainable module, built from the functions it is given.

    Its weights are the ``params`` dict (``init_params``) held as parameters, so an
    optimiser can train them; ``forward`` is ``rnn_encode`` followed by
    ``teacher_forced_logits``, the two functions passed in (notebook 05 passes the
    learner's, the tests the reference's).
    """

    def __init__(self, V_src, V_tgt, D=32, d_h=128, seed=0, *, rnn_encode, teacher_forced_logits):
        super().__init__()
        self.rnn_encode, self.teacher_forced_logits = rnn_encode, teacher_forced_logits
        self.weights = nn.ParameterDict({k: nn.Parameter(v) for k, v in init_params(V_src, V_tgt, D, d_h, seed).items()})

    @property
    def params(self):
        return dict(self.weights)

    def encode(self, src, src_mask):
        p = self.params
        return self.rnn_encode(src, src_mask, p["E_src"], p["W_x_enc"], p["W_h_enc"], p["b_enc"])

    def forward(self, src, src_mask, tgt_in):
        _, context = self.encode(src, src_mask)  # (B, d_h)
        return self.teacher_forced_logits(context, tgt_in, self.params)  # (B, T_y, V)


class GatedSeq2Seq(nn.Module):
    """The same encoder-decoder with a gated cell, ``nn.GRU`` or ``nn.LSTM``, in place of tanh.

    Only the function f of h_t = f(x_t, h_{t-1}) changes; the context vector is
    still the encoder's last real state (for an LSTM, the pair (h, cell)), and the
    decoder is still one step per output token. Padding is skipped with
    ``pack_padded_sequence`` (which needs at least one token: a sentence that is
    all padding is read as a single <pad>).
    """

    def __init__(self, V_src, V_tgt, D=32, d_h=128, cell="gru"):
        super().__init__()
        if cell not in ("gru", "lstm"):
            raise ValueError(f"cell must be 'gru' or 'lstm', got {cell!r}")
        make_rnn = nn.GRU if cell == "gru" else nn.LSTM
        self.emb_src, self.emb_tgt = nn.Embedding(V_src, D), nn.Embedding(V_tgt, D)
        self.encoder = make_rnn(D, d_h, batch_first=True)
        self.decoder = make_rnn(D, d_h, batch_first=True)
        self.out = nn.Linear(d_h, V_tgt)

    def encode(self, src, src_mask):
        lengths = src_mask.sum(dim=1).clamp_min(1).cpu()  # pack_padded_sequence needs lengths >= 1 on the CPU
        packed = nn.utils.rnn.pack_padded_sequence(self.emb_src(src), lengths, batch_first=True,
                                                   enforce_sorted=False)
        _, context = self.encoder(packed)  # (1, B, d_h), or a pair of them for an LSTM
        return context

    def step(self, prev_ids, state):
        """One decoder step: (B,) previous tokens -> (B, V) logits and the new state."""
        y, state = self.decoder(self.emb_tgt(prev_ids)[:, None], state)  # (B, 1, d_h)
        return self.out(y[:, 0]), state

    def forward(self, src, src_mask, tgt_in):
        y, _ = self.decoder(self.emb_tgt(tgt_in), self.encode(src, src_mask))  # (B, T_y, d_h)
        return self.out(y)  # (B, T_y, V)


# ---------------------------------------------------------------- notebook 05b: attention over the encoder states
def init_attention_params(V_tgt, D, d_dec, d_enc, d_a, seed=0, dtype=torch.float32):
    """A fresh dict of the attention decoder's weights, the ``params`` of notebook 05b's exercises.

    Keys and shapes: "E_tgt" (V_tgt, D); the additive score's "W_q" (d_a, d_dec), "W_k" (d_a, d_enc), "u" (d_a,);
    the state update's "W_x" (d_dec, D), "W_c" (d_dec, d_enc), "W_h" (d_dec, d_dec), "b" (d_dec,); the output
    layer's "W_out" (V_tgt, d_dec + d_enc), "b_out" (V_tgt,). Initialised as ``init_params`` does (N(0, 1)
    embeddings, an orthogonal recurrent matrix, uniform (-1/sqrt(fan-in), 1/sqrt(fan-in)) elsewhere).
    Deterministic in ``seed``."""
    draw = _Draws(seed, dtype)

    def uniform(rows, *cols):  # (-1/sqrt(fan-in), 1/sqrt(fan-in))
        return draw.uniform(rows, *cols, k=1 / math.sqrt(cols[0] if cols else rows))

    W_h = draw.orthogonal(d_dec)  # drawn first: the order of the draws fixes every weight (and 05b's figures)
    return {"E_tgt": draw.normal(V_tgt, D), "W_q": uniform(d_a, d_dec), "W_k": uniform(d_a, d_enc), "u": uniform(d_a),
            "W_x": uniform(d_dec, D), "W_c": uniform(d_dec, d_enc), "W_h": W_h,
            "b": uniform(d_dec), "W_out": uniform(V_tgt, d_dec + d_enc), "b_out": uniform(V_tgt)}


def _rnn(D, d_h):
    """``nn.RNN`` (tanh) initialised as ``init_params`` does: a random orthogonal recurrent matrix, uniform
    (-1/sqrt(d_h), 1/sqrt(d_h)) elsewhere (the default), so that notebook 05b's models start where notebook 05's did."""
    rnn = nn.RNN(D, d_h, batch_first=True)
    with torch.no_grad():
        nn.init.orthogonal_(rnn.weight_hh_l0)
    return rnn


class RNNEncoder(nn.Module):
    """Notebook 05's encoder, ready-made with PyTorch's ``nn.RNN`` (tanh): every state h_1 .. h_{T_x} of a padded
    batch (0 on padding) and the last real state (0 for a sentence with no real token)."""

    def __init__(self, V_src, D, d_h):
        super().__init__()
        self.emb, self.rnn = nn.Embedding(V_src, D), _rnn(D, d_h)

    def forward(self, src, src_mask):
        lengths = src_mask.sum(dim=1).clamp_min(1).cpu()  # pack_padded_sequence needs lengths >= 1 on the CPU
        packed = nn.utils.rnn.pack_padded_sequence(self.emb(src), lengths, batch_first=True, enforce_sorted=False)
        out, last = self.rnn(packed)
        states, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])
        real = src_mask.any(dim=1, keepdim=True)  # a sentence of padding only was read as one <pad>: undo it
        return states * src_mask[:, :, None], last[0] * real  # (B, T_x, d_h), (B, d_h)


class AttentionSeq2Seq(nn.Module):
    """The encoder-decoder whose decoder attends over every encoder state at every step (notebook 05b).

    The encoder is ``RNNEncoder``; the decoder runs the ``step`` it is given (the learner's
    ``attention_decoder_step``) once per output token, starting from the encoder's last real state, with the
    weights of ``init_attention_params`` held as parameters.
    """

    def __init__(self, V_src, V_tgt, D=32, d_h=128, d_a=64, seed=0, *, step):
        super().__init__()
        torch.manual_seed(seed)
        self.encoder, self.step = RNNEncoder(V_src, D, d_h), step
        self.weights = nn.ParameterDict({k: nn.Parameter(v) for k, v in
                                         init_attention_params(V_tgt, D, d_h, d_h, d_a, seed).items()})

    @property
    def params(self):
        return dict(self.weights)

    def forward(self, src, src_mask, tgt_in, with_weights=False):
        """Teacher forcing: (B, T_y, V) logits (and the (B, T_y, T_x) weights when ``with_weights``)."""
        states, h = self.encoder(src, src_mask)  # h^dec_0: the encoder's last real state
        logits, weights = [], []
        for t in range(tgt_in.shape[1]):
            z, h, alpha = self.step(tgt_in[:, t], h, states, src_mask, self.params)
            logits.append(z)
            weights.append(alpha)
        out = torch.stack(logits, dim=1)
        return (out, torch.stack(weights, dim=1)) if with_weights else out

    @torch.no_grad()
    def greedy(self, src, src_mask, bos_id, eos_id, max_len):
        """Greedy decoding by the course's contract (0 after a sentence's <eos>, stop when every sentence has
        written one or after ``max_len`` tokens): (B, L) tokens and the (B, L, T_x) weights."""
        states, h = self.encoder(src, src_mask)
        prev = torch.full((src.shape[0],), bos_id, dtype=torch.long, device=src.device)
        done = torch.zeros_like(prev, dtype=torch.bool)
        tokens, weights = [], []
        for _ in range(max_len):
            z, h, alpha = self.step(prev, h, states, src_mask, self.params)
            prev = z.argmax(dim=-1).masked_fill(done, 0)
            tokens.append(prev)
            weights.append(alpha)
            done |= prev == eos_id
            if done.all():
                break
        return torch.stack(tokens, dim=1), torch.stack(weights, dim=1)


class FixedContextSeq2Seq(nn.Module):
    """Notebook 05's encoder-decoder, ready-made with ``nn.RNN``: the decoder reads the source only through the
    encoder's last real state, its first state (the baseline of notebook 05b)."""

    def __init__(self, V_src, V_tgt, D=32, d_h=128, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.encoder = RNNEncoder(V_src, D, d_h)
        self.emb, self.decoder, self.out = nn.Embedding(V_tgt, D), _rnn(D, d_h), nn.Linear(d_h, V_tgt)

    def forward(self, src, src_mask, tgt_in):
        _, context = self.encoder(src, src_mask)
        y, _ = self.decoder(self.emb(tgt_in), context[None].contiguous())
        return self.out(y)  # (B, T_y, V)

    @torch.no_grad()
    def greedy(self, src, src_mask, bos_id, eos_id, max_len):
        _, h = self.encoder(src, src_mask)
        h = h[None].contiguous()
        prev = torch.full((src.shape[0],), bos_id, dtype=torch.long, device=src.device)
        done = torch.zeros_like(prev, dtype=torch.bool)
        tokens = []
        for _ in range(max_len):
            y, h = self.decoder(self.emb(prev)[:, None], h)
            prev = self.out(y[:, 0]).argmax(dim=-1).masked_fill(done, 0)  # the course's contract: 0 after <eos>
            tokens.append(prev)
            done |= prev == eos_id
            if done.all():
                break
        return torch.stack(tokens, dim=1)


# ---------------------------------------------------------------- gradients through time (notebooks 05 and 05b)
def source_gradients(model, batch):
    """How much each source token's embedding moves a sentence's loss: ||d(-log P(y* | x)) / d e(x_j)|| for every
    source position j of every sentence, (B, T_x), 0 on padding.

    The loss of sentence b is its own summed negative log-likelihood, so a sentence's gradient does not depend on
    the batch it sits in. A ``Seq2Seq`` (notebook 05) runs the functions it was given (the learner's ``rnn_encode``
    and ``teacher_forced_logits``), each token reading an embedding row of its own; the ready-made models of
    notebook 05b (``FixedContextSeq2Seq``, ``AttentionSeq2Seq``) have their embedding's output captured. The weights
    get no gradient.
    """
    src, mask = batch["src"], batch["src_mask"]
    targets = batch["tgt_out"].masked_fill(~batch["tgt_mask"], -100)
    if isinstance(model, Seq2Seq):
        p = model.params
        B, T = src.shape
        e = p["E_src"][src].detach().requires_grad_()  # (B, T_x, D): a row per token
        rows = torch.arange(B * T, device=src.device).reshape(B, T)
        _, context = model.rnn_encode(rows, mask, e.reshape(B * T, -1), p["W_x_enc"], p["W_h_enc"], p["b_enc"])
        logits = model.teacher_forced_logits(context, batch["tgt_in"], p)
    else:
        captured = {}

        def keep(module, inputs, output):
            captured["e"] = output
        handle = model.encoder.emb.register_forward_hook(keep)
        try:
            logits = model(src, mask, batch["tgt_in"])
        finally:
            handle.remove()
        e = captured["e"]
    nll = F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=-100, reduction="sum")
    grad, = torch.autograd.grad(nll, e)
    return grad.norm(dim=-1) * mask  # (B, T_x)


def by_distance_from_the_end(values, mask):
    """{k: the mean of ``values`` (B, T_x) over the real positions that are k tokens before their sentence's last
    token} (k = 0 for the last token)."""
    lengths = mask.sum(dim=1)
    out = {}
    for b in range(values.shape[0]):
        n = int(lengths[b])
        for j in range(n):
            out.setdefault(n - 1 - j, []).append(float(values[b, j]))
    return {k: sum(v) / len(v) for k, v in sorted(out.items())}
