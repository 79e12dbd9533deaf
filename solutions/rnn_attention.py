"""Notebook 05b: attention in the RNN encoder-decoder (Bahdanau et al. 2015, Luong et al. 2015).

Notebook 05's decoder reads the source through one vector, the context c = h_{T_x}. Here it reads every
encoder state h_1 .. h_{T_x} at every step t: it scores each against its own state, turns the scores into
weights alpha_{tj} with a softmax over the source positions (padding blocked), and takes the weighted
average of the states, a context c_t of its own for each step.

Shape letters: B batch, T_x source length, H_e encoder width, H_d decoder width, A the additive score's
hidden width, D embedding width, V target vocabulary size.

The decoder's weights come as one dict ``params`` (see ``coursekit.rnn.init_attention_params``) with the keys

    E_tgt (V, D)       the target embeddings
    W_s (A, H_d)       W_h (A, H_e)      v (A,)      the additive score
    W_x (H_d, D)       W_c (H_d, H_e)    W_hh (H_d, H_d)    b (H_d,)     the state update
    W_out (V, H_d + H_e)    b_out (V,)   the output layer, reading [s_t ; c_t]

A weight matrix W of shape (out, in) acts on a batch of row vectors as ``x @ W.T``, as in ``torch.nn.Linear``.
"""

import torch


def additive_score(s_prev, H, W_s, W_h, v):
    """Bahdanau's additive score of every encoder state against the decoder state.

    e_j = v . tanh(W_s s_{t-1} + W_h h_j)        for j = 1 .. T_x

    Args:
        s_prev: (B, H_d), the decoder state s_{t-1} (before it reads step t).
        H: (B, T_x, H_e), the encoder states h_1 .. h_{T_x}.
        W_s: (A, H_d), W_h: (A, H_e), v: (A,): the score's weights.

    Returns:
        (B, T_x) the scores e_{t1} .. e_{tT_x} (any real numbers; the softmax comes later).

    Raises:
        ValueError when the widths disagree (H_d, H_e or A).

    Device: make every tensor you create on the inputs' device (``device=<input>.device``);
    the grader also runs this function on tensors of another device.
    """
    ### BEGIN SOLUTION
    if s_prev.dim() != 2 or H.dim() != 3 or s_prev.shape[0] != H.shape[0]:
        raise ValueError(f"s_prev must be (B, H_d) and H (B, T_x, H_e); got {tuple(s_prev.shape)} and "
                         f"{tuple(H.shape)}")
    if W_s.shape[1] != s_prev.shape[1] or W_h.shape[1] != H.shape[2] or not (W_s.shape[0] == W_h.shape[0]
                                                                               == v.shape[0]):
        raise ValueError(f"W_s {tuple(W_s.shape)}, W_h {tuple(W_h.shape)} and v {tuple(v.shape)} do not fit "
                         f"H_d={s_prev.shape[1]}, H_e={H.shape[2]}")
    query = s_prev @ W_s.T  # (B, A): the decoder's side, once per step
    keys = H @ W_h.T  # (B, T_x, A): the encoder's side, one per source position
    return torch.tanh(query[:, None, :] + keys) @ v  # (B, T_x)
    ### END SOLUTION


def dot_score(s, H):
    """Luong's dot score: how aligned the decoder state is with each encoder state.

    e_j = s . h_j        for j = 1 .. T_x

    Args:
        s: (B, H_d), the decoder state.
        H: (B, T_x, H_e), the encoder states, with H_e = H_d.

    Returns:
        (B, T_x) the scores.

    Raises:
        ValueError when the widths differ (a dot product needs H_e = H_d) or the batches do.
    """
    ### BEGIN SOLUTION
    if s.dim() != 2 or H.dim() != 3 or s.shape[0] != H.shape[0] or s.shape[1] != H.shape[2]:
        raise ValueError(f"s must be (B, H) and H (B, T_x, H) with the same B and H; got {tuple(s.shape)} and "
                         f"{tuple(H.shape)}")
    return (H @ s[:, :, None])[:, :, 0]  # (B, T_x, H) @ (B, H, 1) -> (B, T_x)
    ### END SOLUTION


def attend(scores, H, src_mask=None):
    """The weights of every source position and the context they make for one decoder step.

    alpha_j = softmax_j(e_j) over the real positions (padding gets weight 0),
    c = sum_j alpha_j h_j.

    Args:
        scores: (B, T_x), the scores e_j.
        H: (B, T_x, H_e), the encoder states.
        src_mask: BoolTensor (B, T_x), True on real tokens (None: all real).

    Returns:
        context: (B, H_e), c_t.
        alpha: (B, T_x), the weights; each row sums to 1, except a source with no real token (all padding, or
            T_x = 0), whose weights and context are all 0.

    Raises:
        ValueError when the shapes disagree.

    Device: make every tensor you create on the inputs' device (``device=<input>.device``);
    the grader also runs this function on tensors of another device.
    """
    ### BEGIN SOLUTION
    if scores.dim() != 2 or H.dim() != 3 or scores.shape != H.shape[:2]:
        raise ValueError(f"scores must be (B, T_x) and H (B, T_x, H_e); got {tuple(scores.shape)} and "
                         f"{tuple(H.shape)}")
    if src_mask is not None and src_mask.shape != scores.shape:
        raise ValueError(f"src_mask must be (B, T_x) = {tuple(scores.shape)}, got {tuple(src_mask.shape)}")
    if src_mask is not None:
        scores = scores.masked_fill(~src_mask, float("-inf"))  # padding: never read
    alpha = torch.softmax(scores, dim=-1).nan_to_num(0.0)  # a row with no real position: 0 everywhere
    context = (alpha[:, :, None] * H).sum(dim=1)  # (B, H_e), the weighted average of the states
    return context, alpha
    ### END SOLUTION


def attention_decoder_step(prev_ids, s_prev, H, src_mask, params):
    """One step of the attention decoder (Bahdanau): look at the source, then update, then score.

    e_j = v . tanh(W_s s_{t-1} + W_h h_j);   alpha, c_t = attend(e, H, src_mask)
    s_t = tanh(W_x E_tgt[y_{t-1}] + W_c c_t + W_hh s_{t-1} + b)
    z_t = W_out [s_t ; c_t] + b_out      (logits over the V target tokens)

    The scores read s_{t-1}, the state *before* this step: the decoder decides where to look from what it has
    written so far, then reads the token and the context together.

    Args:
        prev_ids: LongTensor (B,), the previous tokens y_{t-1} (<bos> at t = 1).
        s_prev: (B, H_d), the decoder state s_{t-1}.
        H: (B, T_x, H_e), the encoder states.
        src_mask: BoolTensor (B, T_x), True on real source tokens (None: all real).
        params: the dict of the decoder's weights (the module's docstring).

    Returns:
        logits: (B, V), z_t.
        s: (B, H_d), the new state s_t.
        alpha: (B, T_x), where this step looked.

    Device: make every tensor you create on the inputs' device (``device=<input>.device``);
    the grader also runs this function on tensors of another device.
    """
    ### BEGIN SOLUTION
    p = params
    scores = additive_score(s_prev, H, p["W_s"], p["W_h"], p["v"])  # (B, T_x)
    context, alpha = attend(scores, H, src_mask)  # (B, H_e), (B, T_x)
    x = p["E_tgt"][prev_ids]  # (B, D)
    s = torch.tanh(x @ p["W_x"].T + context @ p["W_c"].T + s_prev @ p["W_hh"].T + p["b"])  # (B, H_d)
    logits = torch.cat([s, context], dim=-1) @ p["W_out"].T + p["b_out"]  # (B, V)
    return logits, s, alpha
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
