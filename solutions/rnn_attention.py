"""Notebook 05b: attention in the RNN encoder-decoder (Bahdanau et al. 2015, Luong et al. 2015).

Notebook 05's decoder reads the source through one vector, the context c = h_{T_x}. Here it reads every
encoder state h_1 .. h_{T_x} at every step t: it scores each against its own state, turns the scores s_tj into
weights alpha_tj with a softmax over the source positions (padding blocked), and takes the weighted average of
the states, a context c_t of its own for each step. The symbols are the notation page's: s for a score (as in
notebooks 02-04), h_j an encoder state and h^dec_t the decoder's (as in notebook 05), W_q and W_k the matrices
that turn the decoder's state (the query) and an encoder state (a key) into d_a numbers.

Shape letters: B batch, T_x source length, d_enc the encoder's state width, d_dec the decoder's, d_a the
additive score's hidden width, D embedding width, V target vocabulary size.

The decoder's weights come as one dict ``params`` (see ``learner.rnn_models.init_attention_params``) with the keys

    E_tgt (V, D)          the target embeddings
    W_q (d_a, d_dec)      W_k (d_a, d_enc)      u (d_a,)      the additive score
    W_x (d_dec, D)        W_c (d_dec, d_enc)    W_h (d_dec, d_dec)    b (d_dec,)     the state update
    W_out (V, d_dec + d_enc)    b_out (V,)     the output layer, reading [h^dec_t ; c_t]

A weight matrix W of shape (out, in) acts on a batch of row vectors as ``x @ W.T``, as in ``torch.nn.Linear``.
"""

import torch


def additive_score(h_prev, states, W_q, W_k, u):
    """Bahdanau's additive score of every encoder state against the decoder state.

    s_tj = u . tanh(W_q h^dec_{t-1} + W_k h_j)        for j = 1 .. T_x

    Args:
        h_prev: (B, d_dec), the decoder state h^dec_{t-1} (before it reads step t).
        states: (B, T_x, d_enc), the encoder states h_1 .. h_{T_x}.
        W_q: (d_a, d_dec), W_k: (d_a, d_enc), u: (d_a,): the score's weights.

    Returns:
        (B, T_x) the scores s_t1 .. s_tT_x (any real numbers; the softmax comes later).

    Raises:
        ValueError when the widths disagree (d_dec, d_enc or d_a).

    Device: make every tensor you create on the inputs' device (``device=<input>.device``);
    the checks also run this function on tensors of another device.
    """
    ### BEGIN SOLUTION
    if h_prev.dim() != 2 or states.dim() != 3 or h_prev.shape[0] != states.shape[0]:
        raise ValueError(f"h_prev must be (B, d_dec) and states (B, T_x, d_enc); got {tuple(h_prev.shape)} and "
                         f"{tuple(states.shape)}")
    if W_q.shape[1] != h_prev.shape[1] or W_k.shape[1] != states.shape[2] or not (W_q.shape[0] == W_k.shape[0]
                                                                                  == u.shape[0]):
        raise ValueError(f"W_q {tuple(W_q.shape)}, W_k {tuple(W_k.shape)} and u {tuple(u.shape)} do not fit "
                         f"d_dec={h_prev.shape[1]}, d_enc={states.shape[2]}")
    query = h_prev @ W_q.T  # (B, d_a): the decoder's side, once per step
    keys = states @ W_k.T  # (B, T_x, d_a): the encoder's side, one per source position
    return torch.tanh(query[:, None, :] + keys) @ u  # (B, T_x)
    ### END SOLUTION


def dot_score(h_dec, states):
    """Luong's dot score: how aligned the decoder state is with each encoder state.

    s_tj = h^dec_t . h_j        for j = 1 .. T_x

    Args:
        h_dec: (B, d_dec), the decoder state.
        states: (B, T_x, d_enc), the encoder states, with d_enc = d_dec.

    Returns:
        (B, T_x) the scores.

    Raises:
        ValueError when the widths differ (a dot product needs d_enc = d_dec) or the batches do.
    """
    ### BEGIN SOLUTION
    if h_dec.dim() != 2 or states.dim() != 3 or h_dec.shape[0] != states.shape[0] \
            or h_dec.shape[1] != states.shape[2]:
        raise ValueError(f"h_dec must be (B, d_dec) and states (B, T_x, d_enc) with the same B and d_enc = d_dec; "
                         f"got {tuple(h_dec.shape)} and {tuple(states.shape)}")
    return (states @ h_dec[:, :, None])[:, :, 0]  # (B, T_x, d) @ (B, d, 1) -> (B, T_x)
    ### END SOLUTION


def attend(scores, states, src_mask=None):
    """The weights of every source position and the context they make for one decoder step.

    alpha_tj = softmax_j(s_tj) over the real positions (padding gets weight 0),
    c_t = sum_j alpha_tj h_j.

    Args:
        scores: (B, T_x), the scores s_tj.
        states: (B, T_x, d_enc), the encoder states.
        src_mask: BoolTensor (B, T_x), True on real tokens (None: all real).

    Returns:
        context: (B, d_enc), c_t.
        alpha: (B, T_x), the weights; each row sums to 1, except a source with no real token (all padding, or
            T_x = 0), whose weights and context are all 0.

    Raises:
        ValueError when the shapes disagree.

    Device: make every tensor you create on the inputs' device (``device=<input>.device``);
    the checks also run this function on tensors of another device.
    """
    ### BEGIN SOLUTION
    if scores.dim() != 2 or states.dim() != 3 or scores.shape != states.shape[:2]:
        raise ValueError(f"scores must be (B, T_x) and states (B, T_x, d_enc); got {tuple(scores.shape)} and "
                         f"{tuple(states.shape)}")
    if src_mask is not None and src_mask.shape != scores.shape:
        raise ValueError(f"src_mask must be (B, T_x) = {tuple(scores.shape)}, got {tuple(src_mask.shape)}")
    if src_mask is not None:
        scores = scores.masked_fill(~src_mask, float("-inf"))  # padding: never read
    alpha = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # a row with no real position: 0 everywhere
    context = (alpha[:, :, None] * states).sum(dim=1)  # (B, d_enc), the weighted average of the states
    return context, alpha
    ### END SOLUTION


def attention_decoder_step(prev_ids, h_prev, states, src_mask, params):
    """One step of the attention decoder (Bahdanau): look at the source, then update, then score.

    s_tj = u . tanh(W_q h^dec_{t-1} + W_k h_j);   c_t, alpha_t = attend(s_t, states, src_mask)
    h^dec_t = tanh(W_x E_tgt[y_{t-1}] + W_c c_t + W_h h^dec_{t-1} + b)
    z_t = W_out [h^dec_t ; c_t] + b_out      (logits over the V target tokens)

    The scores read h^dec_{t-1}, the state *before* this step: the decoder decides where to look from what it has
    written so far, then reads the token and the context together.

    Args:
        prev_ids: LongTensor (B,), the previous tokens y_{t-1} (<bos> at t = 1).
        h_prev: (B, d_dec), the decoder state h^dec_{t-1}.
        states: (B, T_x, d_enc), the encoder states.
        src_mask: BoolTensor (B, T_x), True on real source tokens (None: all real).
        params: the dict of the decoder's weights (the module's docstring).

    Returns:
        logits: (B, V), z_t.
        h: (B, d_dec), the new state h^dec_t.
        alpha: (B, T_x), where this step looked.

    Device: make every tensor you create on the inputs' device (``device=<input>.device``);
    the checks also run this function on tensors of another device.
    """
    ### BEGIN SOLUTION
    p = params
    scores = additive_score(h_prev, states, p["W_q"], p["W_k"], p["u"])  # (B, T_x)
    context, alpha = attend(scores, states, src_mask)  # (B, d_enc), (B, T_x)
    x = p["E_tgt"][prev_ids]  # (B, D)
    h = torch.tanh(x @ p["W_x"].T + context @ p["W_c"].T + h_prev @ p["W_h"].T + p["b"])  # (B, d_dec)
    logits = torch.cat([h, context], dim=-1) @ p["W_out"].T + p["b_out"]  # (B, V)
    return logits, h, alpha
    ### END SOLUTION


# ---------------------------------------------------------------- self-check questions (answers are literals)
def answer_alignment_weights():
    """Your answer to the question above: an int."""
    ### BEGIN SOLUTION
    return 110
    ### END SOLUTION


def answer_bottleneck():
    """Your answer to the question above: "a", "b", "c" or "d"."""
    ### BEGIN SOLUTION
    return "b"
    ### END SOLUTION
