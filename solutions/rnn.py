"""Notebook 05: the RNN encoder-decoder (note 002).

An encoder RNN reads the source x_1 .. x_{T_x} into hidden states h_t; its last
real state is the context vector c = h_{T_x}. A decoder RNN starts from c and
writes y_1 .. y_{T_y} one token at a time, each step a softmax over the target
vocabulary. Training uses teacher forcing and the summed token negative
log-likelihood; generation uses greedy decoding or beam search.

Shape letters: B batch, T_x source length, T_y target length, D embedding width,
d_h hidden width (the state h_t has d_h numbers), V target vocabulary size (V_src for the
source's).

The weights are passed in as tensors, or as one dict ``params`` (see
``learner.rnn_models.init_params``) with the keys

    E_src (V_src, D)   W_x_enc (d_h, D)   W_h_enc (d_h, d_h)   b_enc (d_h,)
    E_tgt (V, D)       W_x_dec (d_h, D)   W_h_dec (d_h, d_h)   b_dec (d_h,)
    W_out (V, d_h)       b_out (V,)

A weight matrix W of shape (out, in) acts on a batch of row vectors as
``x @ W.T``, as in ``torch.nn.Linear``. Token ids follow notebook 01:
<pad> = 0, <bos> = 1, <eos> = 2, <unk> = 3.
"""

import torch


def rnn_cell(x_t, h_prev, W_x, W_h, b):
    """One step of the recurrence h_t = tanh(W_h h_{t-1} + W_x x_t + b).

    Args:
        x_t: (B, D) the embedded tokens read at step t.
        h_prev: (B, d_h) the previous hidden states h_{t-1}.
        W_x: (d_h, D) input weights.
        W_h: (d_h, d_h) recurrent weights.
        b: (d_h,) bias.

    Returns:
        (B, d_h) the new hidden states h_t, every entry in (-1, 1).

    Device: make every tensor you create on the inputs' device (``device=<input>.device``);
    the checks also run this function on tensors of another device.
    """
    ### BEGIN SOLUTION
    if x_t.shape[-1] != W_x.shape[1]:
        raise ValueError(f"x_t has width D={x_t.shape[-1]} but W_x is {tuple(W_x.shape)}, it expects "
                         f"D={W_x.shape[1]}")
    if h_prev.shape[-1] != W_h.shape[1] or W_h.shape[0] != W_x.shape[0]:
        raise ValueError(f"h_prev {tuple(h_prev.shape)}, W_h {tuple(W_h.shape)} and W_x {tuple(W_x.shape)} "
                         f"disagree on the hidden width d_h")
    return torch.tanh(h_prev @ W_h.T + x_t @ W_x.T + b)  # (B, d_h)
    ### END SOLUTION


def rnn_encode(src_ids, src_mask, E, W_x, W_h, b):
    """Run the encoder RNN over a right-padded batch of source sentences.

    h_0 = 0, and for every real token h_t = tanh(W_h h_{t-1} + W_x e(x_t) + b)
    with e(x_t) = E[x_t]. A padding position leaves the state unchanged, so the
    state after the loop is each sentence's last real state.

    Args:
        src_ids: LongTensor (B, T_x), the source ids.
        src_mask: BoolTensor (B, T_x), True on real tokens, False on padding
            (None: no padding).
        E: (V_src, D) source embedding matrix.
        W_x, W_h, b: the encoder's weights (d_h, D), (d_h, d_h), (d_h,).

    Returns:
        states: (B, T_x, d_h), h_t at the real positions and 0 on padding.
        context: (B, d_h), c = h_{T_x}, the state after the last real token of
            each sentence. A sentence with no real token (T_x = 0, or all
            padding) gets the initial state h_0 = 0.

    Device: make every tensor you create on the inputs' device (``device=<input>.device``);
    the checks also run this function on tensors of another device.
    """
    ### BEGIN SOLUTION
    if src_mask is None:
        src_mask = torch.ones(src_ids.shape, dtype=torch.bool, device=src_ids.device)
    if src_ids.dim() != 2 or src_mask.shape != src_ids.shape:
        raise ValueError(f"src_ids must be (B, T_x) and src_mask the same shape; got {tuple(src_ids.shape)} "
                         f"and {tuple(src_mask.shape)}")
    B, T_x = src_ids.shape
    d_h = W_h.shape[0]
    h = torch.zeros(B, d_h, dtype=E.dtype, device=E.device)  # h_0
    x = E[src_ids.masked_fill(~src_mask, 0)] @ W_x.T + b  # (B, T_x, d_h): W_x e(x_t) + b for every t at once
    states = []
    for t in range(T_x):
        h_new = torch.tanh(h @ W_h.T + x[:, t])  # (B, d_h)
        real = src_mask[:, t, None]  # (B, 1)
        h = torch.where(real, h_new, h)  # padding: keep the last real state
        states.append(torch.where(real, h_new, torch.zeros_like(h_new)))
    if not states:  # T_x = 0: nothing to read, the context is h_0
        return torch.zeros(B, 0, d_h, dtype=E.dtype, device=E.device), h
    return torch.stack(states, dim=1), h  # (B, T_x, d_h), (B, d_h)
    ### END SOLUTION


def decoder_step(prev_ids, h, params):
    """One decoder step: read the previous token, update the state, score the next token.

    h_t = tanh(W_h_dec h_{t-1} + W_x_dec E_tgt[y_{t-1}] + b_dec)
    z_t = W_out h_t + b_out       (logits over the V target tokens)

    Args:
        prev_ids: LongTensor (B,), the previous tokens y_{t-1} (<bos> at t = 1).
        h: (B, d_h), the decoder state h_{t-1} (the context c at t = 1).
        params: the dict of weights (keys E_tgt, W_x_dec, W_h_dec, b_dec, W_out, b_out are used).

    Returns:
        logits: (B, V), z_t; softmax(z_t) is P(y_t | y_<t, x).
        h: (B, d_h), the new state h_t.

    Device: make every tensor you create on the inputs' device (``device=<input>.device``);
    the checks also run this function on tensors of another device.
    """
    ### BEGIN SOLUTION
    e = params["E_tgt"][prev_ids]  # (B, D)
    h = torch.tanh(h @ params["W_h_dec"].T + e @ params["W_x_dec"].T + params["b_dec"])  # (B, d_h)
    logits = h @ params["W_out"].T + params["b_out"]  # (B, V)
    return logits, h
    ### END SOLUTION


def teacher_forced_logits(context, tgt_in, params):
    """Run the decoder over a whole target at once, reading the true previous tokens.

    Teacher forcing: at step t the decoder reads tgt_in[:, t] (the true y_{t-1},
    with <bos> first), never its own prediction, so all T_y steps are known in
    advance. The first state is the context vector: h_0 = c.

    Args:
        context: (B, d_h), the encoder's context vectors c.
        tgt_in: LongTensor (B, T_y), <bos> y_1 ... y_{T_y - 1} (padding allowed: it is
            read like any token, and its logits are ignored by the loss).
        params: the dict of weights (decoder keys).

    Returns:
        (B, T_y, V) logits; row t scores the token that should follow tgt_in[:, :t + 1].

    Device: make every tensor you create on the inputs' device (``device=<input>.device``);
    the checks also run this function on tensors of another device.
    """
    ### BEGIN SOLUTION
    B, T_y = tgt_in.shape
    x = params["E_tgt"][tgt_in] @ params["W_x_dec"].T + params["b_dec"]  # (B, T_y, d_h), every step at once
    h = context  # h_0 = c
    hs = []
    for t in range(T_y):
        h = torch.tanh(h @ params["W_h_dec"].T + x[:, t])  # (B, d_h), reads the true y_{t-1}
        hs.append(h)
    if not hs:
        return torch.zeros(B, 0, params["W_out"].shape[0], dtype=context.dtype, device=context.device)
    states = torch.stack(hs, dim=1)  # (B, T_y, d_h)
    return states @ params["W_out"].T + params["b_out"]  # (B, T_y, V)
    ### END SOLUTION


def seq2seq_loss(logits, targets, mask=None):
    """The notes' loss: L = -(1/N) sum_i sum_t log P(y_t^(i) | y_<t^(i), x^(i)).

    Each example's token negative log-likelihoods are summed over its real
    target tokens, and the sums are averaged over the N = B examples. Padding
    positions add nothing, whatever id they hold.

    Args:
        logits: (B, T_y, V) decoder scores.
        targets: LongTensor (B, T_y), the true tokens y_1 ... y_{T_y - 1} <eos>.
        mask: optional BoolTensor (B, T_y), True on real target tokens.

    Returns:
        0-d tensor in logits' dtype; equals
        ``F.cross_entropy(logits.reshape(-1, V), targets_with_pad.reshape(-1),
        ignore_index=pad, reduction="sum") / B``.

    Device: make every tensor you create on the inputs' device (``device=<input>.device``);
    the checks also run this function on tensors of another device.
    """
    ### BEGIN SOLUTION
    if logits.dim() != 3 or targets.shape != logits.shape[:2]:
        raise ValueError(f"logits must be (B, T_y, V) and targets (B, T_y); got {tuple(logits.shape)} and "
                         f"{tuple(targets.shape)}")
    if mask is not None and mask.shape != targets.shape:
        raise ValueError(f"mask must have the shape of targets {tuple(targets.shape)}, got {tuple(mask.shape)}")
    B = logits.shape[0]
    if mask is not None:
        targets = targets.masked_fill(~mask, 0)
    log_p = torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (B, T_y)
    if mask is not None:
        log_p = log_p.masked_fill(~mask, 0.0)
    return -log_p.sum() / B
    ### END SOLUTION


def greedy_decode(context, params, bos_id, eos_id, max_len):
    """Greedy decoding: at every step emit the single most probable token.

    Starts from h_0 = c and the token <bos>; feeds each emitted token back in.
    The course's one contract of greedy decoding (the same in notebooks 05, 08
    and 09): at most ``max_len`` tokens are written after <bos>, a row's <eos>
    included; a row that has written <eos> holds 0 (<pad>) from then on; the
    loop stops as soon as every row has written <eos>, or after ``max_len``
    tokens (a decoder that never emits <eos> stops there). ``max_len = 0``
    writes nothing: a (B, 0) result.

    Args:
        context: (B, d_h) context vectors c.
        params: the dict of weights (decoder keys).
        bos_id, eos_id: ids of <bos> and <eos>.
        max_len: the most tokens to write, >= 0.

    Returns:
        tokens: LongTensor (B, L), L <= max_len the number of steps run; row b holds
            the emitted tokens up to and including its first <eos>, then 0 (<pad>).
        log_prob: (B,) in context's dtype, sum of log P(y_t | y_<t, x) over the
            emitted tokens (its <eos> included, nothing after it); 0 for max_len = 0.
    Raises:
        ValueError if max_len < 0.

    Device: make every tensor you create on the inputs' device (``device=<input>.device``);
    the checks also run this function on tensors of another device.
    """
    ### BEGIN SOLUTION
    if max_len < 0:
        raise ValueError(f"max_len must be >= 0, got {max_len}")
    B = context.shape[0]
    h = context
    prev = torch.full((B,), bos_id, dtype=torch.long, device=context.device)
    done = torch.zeros(B, dtype=torch.bool, device=context.device)
    log_prob = torch.zeros(B, dtype=context.dtype, device=context.device)
    out = torch.zeros(B, 0, dtype=torch.long, device=context.device)  # (B, 0): nothing written yet
    for _ in range(max_len):
        e = params["E_tgt"][prev]  # (B, D)
        h = torch.tanh(h @ params["W_h_dec"].T + e @ params["W_x_dec"].T + params["b_dec"])  # (B, d_h)
        log_p = torch.log_softmax(h @ params["W_out"].T + params["b_out"], dim=-1)  # (B, V)
        best_lp, best = log_p.max(dim=-1)  # (B,), (B,)
        best = best.masked_fill(done, 0)  # finished sentences only get padding
        log_prob = log_prob + best_lp.masked_fill(done, 0.0)
        out = torch.cat([out, best[:, None]], dim=1)  # (B, t)
        done = done | (best == eos_id)
        prev = best
        if bool(done.all()):
            break
    return out, log_prob
    ### END SOLUTION


def beam_search(context, params, bos_id, eos_id, beam_width, max_len, length_norm=False):
    """Beam search for one sentence: keep the ``beam_width`` best partial translations.

    A hypothesis is (tokens, score, state) with score = sum_t log P(y_t | y_<t, x).
    Start from one empty hypothesis (state c, last token <bos>). At every step,
    extend every live hypothesis by every token of the vocabulary, adding that
    token's log-probability to the score, and keep the ``beam_width`` best
    extensions overall. The kept ones that end in <eos> are finished: they leave
    the beam and are never extended. Stop when no hypothesis is live or after
    ``max_len`` steps: as in greedy decoding, a hypothesis holds at most
    ``max_len`` tokens, its <eos> included, and ``max_len = 0`` writes nothing
    (one empty hypothesis, of score 0). The result ranks the finished and the
    still-live hypotheses together by score, or by score / number of tokens
    when ``length_norm`` is True, and returns the best ``beam_width`` of them.

    Args:
        context: (d_h,) the context vector c of one source sentence.
        params: the dict of weights (decoder keys).
        bos_id, eos_id: ids of <bos> and <eos>.
        beam_width: how many hypotheses to keep (>= 1); 1 is greedy decoding.
        max_len: the most tokens in a hypothesis, >= 0.
        length_norm: rank the final hypotheses by average log-probability per token.

    Returns:
        sequences: list of K <= beam_width lists of Python ints (tokens after <bos>,
            ending in <eos> if finished), best first.
        scores: (K,) tensor in context's dtype, each sequence's total log-probability
            (not length-normalised).
    Raises:
        ValueError if beam_width < 1, max_len < 0, or context is not 1-D.

    Device: make every tensor you create on the inputs' device (``device=<input>.device``);
    the checks also run this function on tensors of another device.
    """
    ### BEGIN SOLUTION
    if beam_width < 1:
        raise ValueError(f"beam_width must be >= 1, got {beam_width}")
    if max_len < 0:
        raise ValueError(f"max_len must be >= 0, got {max_len}")
    if context.dim() != 1:
        raise ValueError(f"context must be the (d_h,) vector of one sentence, got shape {tuple(context.shape)}")
    V = params["W_out"].shape[0]
    live = [([], torch.zeros((), dtype=context.dtype, device=context.device), context)]
    finished = []
    for _ in range(max_len):
        prev = torch.tensor([toks[-1] if toks else bos_id for toks, _, _ in live], device=context.device)
        h = torch.stack([state for _, _, state in live])  # (K, d_h)
        e = params["E_tgt"][prev]  # (K, D)
        h = torch.tanh(h @ params["W_h_dec"].T + e @ params["W_x_dec"].T + params["b_dec"])  # (K, d_h)
        log_p = torch.log_softmax(h @ params["W_out"].T + params["b_out"], dim=-1)  # (K, V)
        scores = torch.stack([score for _, score, _ in live])[:, None] + log_p  # (K, V)
        top = scores.flatten().topk(min(beam_width, scores.numel()))
        new_live = []
        for score, index in zip(top.values, top.indices.tolist()):
            k, v = divmod(index, V)
            hyp = (live[k][0] + [v], score, h[k])
            (finished if v == eos_id else new_live).append(hyp)
        live = new_live
        if not live:
            break
    pool = finished + live
    rank = (lambda hyp: float(hyp[1]) / max(len(hyp[0]), 1)) if length_norm else (lambda hyp: float(hyp[1]))
    best = sorted(pool, key=rank, reverse=True)[:beam_width]
    return [toks for toks, _, _ in best], torch.stack([score for _, score, _ in best])
    ### END SOLUTION


# ---------------------------------------------------------------- self-check questions (answers are literals)
def answer_context_shape():
    """Your answer to the question above: a tuple of ints."""
    ### BEGIN SOLUTION
    return (4, 32)
    ### END SOLUTION


def answer_teacher_forcing():
    """Your answer to the question above: "a", "b", "c" or "d"."""
    ### BEGIN SOLUTION
    return "a"
    ### END SOLUTION
