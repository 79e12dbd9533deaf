"""A function that changes its inputs in place is named, with the argument it changed, whatever its output (a
learner's walk found Q.div_, mask.logical_not_(), masked_fill_ on the logits and copy_ into h_prev passing or
misdiagnosed); the reference and the known mistakes see each case as it was made. Cost: about 2 s."""
import math

import pytest
import torch

from learner.check import CheckFailed, check


def attention_scaling_q_in_place(Q, K, V, mask=None):
    Q.div_(math.sqrt(Q.shape[-1]))
    s = Q @ K.transpose(-2, -1)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, -1).nan_to_num(0.0) @ V


def attention_inverting_the_mask(Q, K, V, mask=None):
    s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        s = s.masked_fill(mask.logical_not_(), float("-inf"))
    return torch.softmax(s, -1).nan_to_num(0.0) @ V


def top_k_in_place(logits, k):
    if k <= 0:
        raise ValueError("k must be positive")
    k = min(k, logits.shape[-1])
    kth = logits.topk(k, dim=-1).values[..., -1:]
    return logits.masked_fill_(logits < kth, float("-inf"))


def rnn_cell_into_h_prev(x, h_prev, W_x, W_h, b):
    return h_prev.copy_(torch.tanh(x @ W_x.T + h_prev @ W_h.T + b))


@pytest.mark.parametrize("name, fn, argument", [
    ("masked_attention", attention_scaling_q_in_place, "Q"),
    ("masked_attention", attention_inverting_the_mask, "mask"),
    ("top_k_filter", top_k_in_place, "logits"),
    ("rnn_cell", rnn_cell_into_h_prev, "h_prev"),
])
def test_a_function_that_changes_an_input_is_told_which_and_how_not_to(name, fn, argument):
    with pytest.raises(CheckFailed) as failed:
        check(name, fn, part="basic")
    said = str(failed.value)
    assert f"it changed its input `{argument}` in place" in said, said
    assert "x = x.clone()" in said and "masked_fill_" in said


def test_the_same_functions_written_out_of_place_pass():
    def attention(Q, K, V, mask=None):
        s = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        w = torch.softmax(s, -1).nan_to_num(0.0)
        return w @ V, w

    def cell(x, h_prev, W_x, W_h, b):
        h = h_prev.clone()  # a copy changed in place is the function's own
        return h.copy_(torch.tanh(x @ W_x.T + h_prev @ W_h.T + b))
    check("masked_attention", attention, part="basic")
    check("rnn_cell", cell, part="basic")
