"""Known mistakes of notebook 05 (the RNN encoder-decoder): wrong variants of ``solutions/rnn.py``.

The checks run them on the same inputs as the learner's function and names the
mistake whose output the learner's equals. Each is self-contained (torch only),
so it can also be compiled as learner code in the tests.
"""
import torch


# --- rnn_cell ----------------------------------------------------------------
def rnn_cell_no_tanh(x_t, h_prev, W_x, W_h, b):
    return h_prev @ W_h.T + x_t @ W_x.T + b


def rnn_cell_ignores_h_prev(x_t, h_prev, W_x, W_h, b):
    return torch.tanh(x_t @ W_x.T + b)


def rnn_cell_weights_transposed(x_t, h_prev, W_x, W_h, b):
    return torch.tanh(h_prev @ W_h + x_t @ W_x + b)


def rnn_cell_w_x_transposed(x_t, h_prev, W_x, W_h, b):
    """The same slip for W_x alone: named as the one above."""
    return torch.tanh(h_prev @ W_h.T + x_t @ W_x + b)


def rnn_cell_w_h_transposed(x_t, h_prev, W_x, W_h, b):
    return torch.tanh(h_prev @ W_h + x_t @ W_x.T + b)


# --- rnn_encode --------------------------------------------------------------
def _encode(src_ids, src_mask, E, W_x, W_h, b, skip_padding=True, zero_padding_states=True):
    if src_mask is None:
        src_mask = torch.ones(src_ids.shape, dtype=torch.bool, device=src_ids.device)
    B, T_x = src_ids.shape
    ids = src_ids.masked_fill(~src_mask, 0)
    h = torch.zeros(B, W_h.shape[0], dtype=E.dtype, device=E.device)
    states = []
    for t in range(T_x):
        h_new = torch.tanh(h @ W_h.T + E[ids[:, t]] @ W_x.T + b)
        real = src_mask[:, t, None]
        h = torch.where(real, h_new, h) if skip_padding else h_new
        states.append(torch.where(real, h_new, torch.zeros_like(h_new)) if zero_padding_states else h)
    states = torch.stack(states, 1) if states else torch.zeros(B, 0, W_h.shape[0], dtype=E.dtype, device=E.device)
    return states, h


def rnn_encode_context_after_padding(src_ids, src_mask, E, W_x, W_h, b):
    """The cell keeps running over the <pad> tokens; the context is the state after them."""
    return _encode(src_ids, src_mask, E, W_x, W_h, b, skip_padding=False)


def rnn_encode_context_last_column(src_ids, src_mask, E, W_x, W_h, b):
    """The context is states[:, -1], which is a padding position (0) for every shorter sentence."""
    states, h = _encode(src_ids, src_mask, E, W_x, W_h, b)
    return states, (states[:, -1] if states.shape[1] else h)


def rnn_encode_padding_states_kept(src_ids, src_mask, E, W_x, W_h, b):
    """Padding positions repeat the last real state instead of holding 0."""
    return _encode(src_ids, src_mask, E, W_x, W_h, b, zero_padding_states=False)


# --- decoder_step ------------------------------------------------------------
def decoder_step_logits_from_old_state(prev_ids, h, params):
    e = params["E_tgt"][prev_ids]
    h_new = torch.tanh(h @ params["W_h_dec"].T + e @ params["W_x_dec"].T + params["b_dec"])
    return h @ params["W_out"].T + params["b_out"], h_new


def decoder_step_probabilities(prev_ids, h, params):
    e = params["E_tgt"][prev_ids]
    h = torch.tanh(h @ params["W_h_dec"].T + e @ params["W_x_dec"].T + params["b_dec"])
    return torch.softmax(h @ params["W_out"].T + params["b_out"], dim=-1), h


def decoder_step_log_probabilities(prev_ids, h, params):
    e = params["E_tgt"][prev_ids]
    h = torch.tanh(h @ params["W_h_dec"].T + e @ params["W_x_dec"].T + params["b_dec"])
    return torch.log_softmax(h @ params["W_out"].T + params["b_out"], dim=-1), h


# --- teacher_forced_logits ---------------------------------------------------
def _decoder_run(context, tgt_in, params, own_predictions=False, old_state=False, lagged=False):
    B, T_y = tgt_in.shape
    h, out = context, []
    prev = tgt_in[:, -1 if lagged else 0] if T_y else None
    for t in range(T_y):
        e = params["E_tgt"][prev]
        h_old, h = h, torch.tanh(h @ params["W_h_dec"].T + e @ params["W_x_dec"].T + params["b_dec"])
        logits = (h_old if old_state else h) @ params["W_out"].T + params["b_out"]
        out.append(logits)
        if t + 1 < T_y:
            prev = logits.argmax(dim=-1) if own_predictions else tgt_in[:, t if lagged else t + 1]
    if not out:
        return torch.zeros(B, 0, params["W_out"].shape[0], dtype=context.dtype, device=context.device)
    return torch.stack(out, dim=1)


def teacher_forced_own_predictions(context, tgt_in, params):
    """Step t reads the decoder's own argmax from step t - 1 instead of the true token."""
    return _decoder_run(context, tgt_in, params, own_predictions=True)


def teacher_forced_logits_from_old_state(context, tgt_in, params):
    """Step t scores the next token from h_{t-1}, the state before the update."""
    return _decoder_run(context, tgt_in, params, old_state=True)


def teacher_forced_reads_previous_column(context, tgt_in, params):
    """Step t reads tgt_in[:, t - 1] (so step 0 reads tgt_in[:, -1], the last column) instead of tgt_in[:, t]."""
    return _decoder_run(context, tgt_in, params, lagged=True)


def teacher_forced_zero_start(context, tgt_in, params):
    """The decoder starts from h_0 = 0, so it never sees the source."""
    return _decoder_run(torch.zeros_like(context), tgt_in, params)


# --- seq2seq_loss ------------------------------------------------------------
def _token_nll(logits, targets, mask=None):
    """Each position's -log p(target). With ``mask``, padding's ids are not used as indices (they may be any id,
    999 say), as in a learner's answer that masks; without it they are, as by a learner who scores the padding."""
    ids = targets.clamp_min(0) if mask is None else targets.masked_fill(~mask, 0)
    return -torch.log_softmax(logits, dim=-1).gather(-1, ids.unsqueeze(-1)).squeeze(-1)


def seq2seq_loss_mean_over_all(logits, targets, mask=None):
    """Every position, padding included, averaged: F.cross_entropy without ignore_index."""
    return _token_nll(logits, targets).mean()


def seq2seq_loss_mean_over_tokens(logits, targets, mask=None):
    """Padding ignored, but the sum divided by the number of real tokens (cross_entropy's 'mean')."""
    nll = _token_nll(logits, targets, mask)
    if mask is None:
        return nll.mean()
    return (nll * mask).sum() / mask.sum()


def seq2seq_loss_mean_of_sentences(logits, targets, mask=None):
    """Each example's mean over its real tokens, then the mean of the examples (translation_loss's slip too)."""
    nll = _token_nll(logits, targets, mask)
    if mask is None:
        return nll.mean(dim=1).mean()
    return ((nll * mask).sum(dim=1) / mask.sum(dim=1)).mean()


def seq2seq_loss_padding_counted(logits, targets, mask=None):
    """Summed per example and averaged over examples, but the padding positions are scored too."""
    return _token_nll(logits, targets).sum() / logits.shape[0]


def seq2seq_loss_not_divided(logits, targets, mask=None):
    """The summed negative log-likelihood of the whole batch, not divided by N."""
    nll = _token_nll(logits, targets, mask)
    return (nll if mask is None else nll * mask).sum()


# --- greedy_decode -----------------------------------------------------------
def _greedy(context, params, bos_id, eos_id, max_len, stop_rows=True, feed_back=True, stop_scores=True):
    if max_len < 0:
        raise ValueError(f"max_len must be >= 0, got {max_len}")
    B = context.shape[0]
    h = context
    prev = torch.full((B,), bos_id, dtype=torch.long, device=context.device)
    done = torch.zeros(B, dtype=torch.bool, device=context.device)
    total = torch.zeros(B, dtype=context.dtype, device=context.device)
    out = []
    for _ in range(max_len):
        e = params["E_tgt"][prev]
        h = torch.tanh(h @ params["W_h_dec"].T + e @ params["W_x_dec"].T + params["b_dec"])
        lp, best = torch.log_softmax(h @ params["W_out"].T + params["b_out"], dim=-1).max(dim=-1)
        if stop_rows:
            best = best.masked_fill(done, 0)
            lp = lp.masked_fill(done, 0.0) if stop_scores else lp
        total = total + lp
        out.append(best)
        done = done | (best == eos_id)
        if feed_back:
            prev = best
        if bool(done.all()):
            break
    return (torch.stack(out, dim=1) if out else context.new_zeros(context.shape[0], 0, dtype=torch.long)), total


def greedy_decode_finished_keep_going(context, params, bos_id, eos_id, max_len):
    """Sentences that emitted <eos> keep generating (and scoring) tokens while others finish."""
    return _greedy(context, params, bos_id, eos_id, max_len, stop_rows=False)


def greedy_decode_finished_keep_scoring(context, params, bos_id, eos_id, max_len):
    """The same slip in the log-probability only: a finished row writes padding, but its score keeps growing."""
    return _greedy(context, params, bos_id, eos_id, max_len, stop_scores=False)


def greedy_decode_no_feedback(context, params, bos_id, eos_id, max_len):
    """Every step reads <bos> again instead of the token just emitted."""
    return _greedy(context, params, bos_id, eos_id, max_len, feed_back=False)


# --- beam_search -------------------------------------------------------------
def _beam(context, params, bos_id, eos_id, beam_width, max_len, length_norm=False, cumulative=True,
          finish=True, use_norm=True, return_norm=False):
    if beam_width < 1:
        raise ValueError(f"beam_width must be >= 1, got {beam_width}")
    if max_len < 0:
        raise ValueError(f"max_len must be >= 0, got {max_len}")
    V = params["W_out"].shape[0]
    live = [([], torch.zeros((), dtype=context.dtype, device=context.device), context)]
    finished = []
    for _ in range(max_len):
        prev = torch.tensor([t[-1] if t else bos_id for t, _, _ in live], device=context.device)
        h = torch.stack([s for _, _, s in live])
        e = params["E_tgt"][prev]
        h = torch.tanh(h @ params["W_h_dec"].T + e @ params["W_x_dec"].T + params["b_dec"])
        log_p = torch.log_softmax(h @ params["W_out"].T + params["b_out"], dim=-1)
        scores = (torch.stack([s for _, s, _ in live])[:, None] + log_p) if cumulative else log_p
        top = scores.flatten().topk(min(beam_width, scores.numel()))
        new_live = []
        for score, index in zip(top.values, top.indices.tolist()):
            k, v = divmod(index, V)
            hyp = (live[k][0] + [v], score, h[k])
            (finished if finish and v == eos_id else new_live).append(hyp)
        live = new_live
        if not live:
            break
    pool = finished + live
    norm = length_norm and use_norm
    best = sorted(pool, key=lambda hyp: float(hyp[1]) / (max(len(hyp[0]), 1) if norm else 1),
                  reverse=True)[:beam_width]
    scores = [s / max(len(t), 1) if norm and return_norm else s for t, s, _ in best]
    return [t for t, _, _ in best], torch.stack(scores)


def beam_search_no_cumulative(context, params, bos_id, eos_id, beam_width, max_len, length_norm=False):
    """A hypothesis is scored by its last token's log-probability instead of the sum over its tokens."""
    return _beam(context, params, bos_id, eos_id, beam_width, max_len, length_norm, cumulative=False)


def beam_search_finished_keep_growing(context, params, bos_id, eos_id, beam_width, max_len, length_norm=False):
    """Hypotheses that emitted <eos> stay in the beam and keep being extended."""
    return _beam(context, params, bos_id, eos_id, beam_width, max_len, length_norm, finish=False)


def beam_search_ignores_length_norm(context, params, bos_id, eos_id, beam_width, max_len, length_norm=False):
    return _beam(context, params, bos_id, eos_id, beam_width, max_len, length_norm, use_norm=False)


def beam_search_scores_normalised(context, params, bos_id, eos_id, beam_width, max_len, length_norm=False):
    """Ranked right, but with length_norm=True each score comes back divided by its number of tokens."""
    return _beam(context, params, bos_id, eos_id, beam_width, max_len, length_norm, return_norm=True)


# ---------------------------------------------------------------- wrong answers to the self-check questions
def answer_context_shape_every_state():
    return (4, 9, 32)


def answer_context_shape_no_batch():
    return (9, 32)


def answer_context_shape_one_vector():
    return (32,)


def answer_teacher_forcing_own_prediction():
    return "b"


def answer_teacher_forcing_context_only():
    return "c"


def answer_teacher_forcing_source_token():
    return "d"


def answer_context_shape_swapped():
    return (32, 4)


def answer_context_shape_of_the_ids():
    return (4, 9)
