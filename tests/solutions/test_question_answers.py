"""Each self-check question's answer, worked out with PyTorch and the course's own functions rather than trusted: the
reference answer (``solutions/``) must be what the computation gives (for a choice: the option the notebook shows
under its letter), and each known wrong answer what its misunderstanding computes where one computes it."""
import math
import re

import nbformat
import torch
import torch.nn.functional as F
from torch import nn

import learner.check
from coursekit.sync import notebook_path
from learner.transformer import weights_of
from learner.check import EXERCISES
from helpers import causal, gen, randn
from solutions import decoder, encoder, encoder_decoder, kv_cache, rnn
from grader import reference


def answer(name):
    ex = EXERCISES[name]
    return ex.answer.canonical(reference.resolve(ex.ref)())


def wrong(name, short):
    ex = EXERCISES[name]
    mistake = f"{ex.mistakes[0][0].split(':')[0]}:{name}_{short}"
    return ex.answer.canonical(reference.resolve(mistake, "solutions.mistakes")())


def chosen(name):
    """The text of the option the reference answer picks, as the notebook shows it above the answer cell."""
    path = notebook_path(EXERCISES[name].notebook)
    cells = nbformat.read(path, as_version=4).cells
    at = next(i for i, c in enumerate(cells) if c.metadata.get("nbgrader", {}).get("grade_id") == name)
    options = dict(re.findall(r"^\* \(([a-z])\) (.*)$", cells[at - 1].source, re.M))
    return options[answer(name)]


def canonical(name, value):
    return EXERCISES[name].answer.canonical(value)


# ---------------------------------------------------------------- 01
def test_embedding_table_size_is_nn_embeddings_parameter_count():
    table = nn.Embedding(1000, 64)
    assert answer("answer_embedding_table_size") == canonical("answer_embedding_table_size", table.weight.numel())
    assert wrong("answer_embedding_table_size", "rows") == str(table.weight.shape[0])
    assert wrong("answer_embedding_table_size", "one_row") == str(table.weight.shape[1])


def test_a_one_hot_row_times_e_is_a_row_of_e():
    g = gen(0)
    E, i = randn(g, 10, 4), 7
    picked = F.one_hot(torch.tensor(i), 10).double() @ E
    assert picked.shape == (4,) and torch.equal(picked, E[i]) and not torch.equal(picked, E.sum(0))
    assert chosen("answer_one_hot_product") == "row $w$ of $E$"


# ---------------------------------------------------------------- 02
def test_the_spread_of_a_dot_product_grows_as_sqrt_dk_and_scaling_brings_it_to_1():
    g = gen(1)
    q, k = torch.randn(200_000, 64, generator=g, dtype=torch.float64), torch.randn(200_000, 64, generator=g,
                                                                                   dtype=torch.float64)
    std = (q * k).sum(-1).std().item()
    assert abs(std - 8) < 0.1 and abs((q * k).sum(-1).var().item() - 64) < 1.5
    assert answer("answer_score_std") == canonical("answer_score_std", round(std))
    assert wrong("answer_score_std", "variance") == canonical("answer_score_std", round(std ** 2, -1) + 4)
    assert abs(((q * k).sum(-1) / math.sqrt(64)).std().item() - 1) < 0.02  # (b): dividing keeps it near 1
    assert chosen("answer_why_scale").startswith("a dot product of $d_k$ random terms has a variance")
    flat, loud = torch.softmax(torch.tensor([1.0, 0.5, 0.0]), 0), torch.softmax(torch.tensor([8.0, 4.0, 0.0]), 0)
    assert loud.max() > 0.98 > flat.max()  # unscaled scores saturate the softmax


# ---------------------------------------------------------------- 03
def test_the_largest_probability_at_temperature_2_is_torch_softmaxs():
    logits, name = torch.tensor([2.0, 1.0, 0.0], dtype=torch.float64), "answer_temperature_top_probability"
    assert answer(name) == canonical(name, torch.softmax(logits / 2, 0).max())
    assert wrong(name, "tau_ignored") == canonical(name, torch.softmax(logits, 0).max())
    assert wrong(name, "tau_multiplied") == canonical(name, torch.softmax(logits * 2, 0).max())
    assert wrong(name, "uniform") == canonical(name, torch.softmax(logits / 1e9, 0).max())


def test_a_product_of_probabilities_underflows_where_the_sum_of_logs_does_not():
    p = torch.full((200,), 0.5, dtype=torch.float32)
    assert torch.prod(p).item() == 0.0 and math.isfinite(torch.log(p).sum().item())
    assert chosen("answer_why_log_probabilities").startswith("a product of many probabilities below 1 underflows")


# ---------------------------------------------------------------- 04
def test_the_causal_pairs_of_six_tokens_are_the_lower_triangle():
    from solutions.masks_attention import bidirectional_mask, causal_mask
    name = "answer_causal_pairs"
    assert answer(name) == canonical(name, causal_mask(6).sum())
    assert wrong(name, "all_pairs") == canonical(name, bidirectional_mask(6, 6).sum())
    assert wrong(name, "no_diagonal") == canonical(name, causal_mask(6).tril(-1).sum())
    assert wrong(name, "diagonal_only") == canonical(name, torch.eye(6).sum())


def test_zeroing_blocked_weights_after_the_softmax_leaves_rows_that_sum_to_less_than_1():
    scores, allowed = torch.tensor([[1.0, 2.0, 3.0]]), torch.tensor([[True, True, False]])
    before = torch.softmax(scores.masked_fill(~allowed, -math.inf), -1)
    after = torch.softmax(scores, -1) * allowed
    assert torch.allclose(before.sum(-1), torch.ones(1)) and after.sum(-1).item() < 0.5
    assert chosen("answer_why_minus_infinity").endswith("so the allowed weights still sum to 1")


# ---------------------------------------------------------------- 05
def test_the_context_of_a_batch_is_one_state_per_source():
    g = gen(5)
    B, T_x, H, V, D = 4, 9, 32, 11, 6
    ids = torch.randint(0, V, (B, T_x), generator=g)
    mask = torch.arange(T_x)[None] < torch.tensor([9, 5, 1, 7])[:, None]
    states, context = rnn.rnn_encode(ids, mask, randn(g, V, D), randn(g, H, D), randn(g, H, H), randn(g, H))
    assert answer("answer_context_shape") == canonical("answer_context_shape", tuple(context.shape))
    assert wrong("answer_context_shape", "every_state") == canonical("answer_context_shape", tuple(states.shape))


def test_teacher_forcing_reads_the_true_previous_token():
    """Changing the target token read at step t changes the logits of step t and of no earlier step: what the
    decoder reads at step t is tgt_in[:, t], the true y_{t-1}, not anything it predicted."""
    from learner.check.cases.rnn import _dec, _params
    g = gen(11)
    params, context = _dec(_params(g, 7, 6, 3, 5)), randn(g, 2, 5)
    tgt_in = torch.tensor([[1, 3, 4, 5, 3], [1, 2, 2, 4, 0]])
    changed = tgt_in.clone()
    changed[:, 3] = torch.tensor([0, 5])
    before, after = rnn.teacher_forced_logits(context, tgt_in, params), rnn.teacher_forced_logits(context, changed,
                                                                                                  params)
    assert torch.equal(before[:, :3], after[:, :3]) and not torch.allclose(before[:, 3], after[:, 3])
    assert chosen("answer_teacher_forcing") == "the true target token $y_{t-1}$"


# ---------------------------------------------------------------- 06
def test_each_head_is_d_over_heads_wide():
    x = torch.zeros(2, 3, 64)
    assert answer("answer_head_width") == canonical("answer_head_width", encoder.split_heads(x, 8).shape[-1])
    assert wrong("answer_head_width", "whole_width") == canonical("answer_head_width", x.shape[-1])


def test_without_positions_an_encoder_block_moves_outputs_with_their_tokens():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, dtype=torch.float64)
    x, perm = randn(gen(6), 1, 5, 8), torch.tensor([3, 0, 4, 1, 2])
    out, shuffled = encoder.encoder_block(x, None, weights_of(layer), 2), encoder.encoder_block(x[:, perm], None,
                                                                                                  weights_of(layer), 2)
    assert torch.allclose(shuffled, out[:, perm]) and not torch.allclose(shuffled, out)  # (a)
    assert chosen("answer_shuffled_tokens") == "the same vectors, shuffled the same way"


# ---------------------------------------------------------------- 07
def test_the_decoder_block_is_the_encoder_layer_with_a_causal_mask():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, dtype=torch.float64)
    x = randn(gen(7), 2, 6, 8)
    w = weights_of(layer)
    assert torch.allclose(encoder.encoder_block(x, None, w, 2), layer(x))
    assert torch.allclose(decoder.decoder_block(x, None, w, 2), layer(x, src_mask=~causal(6)))  # same weights
    assert chosen("answer_encoder_to_decoder") == "the mask: bidirectional becomes causal"


def test_a_pass_over_twelve_tokens_scores_eleven_next_tokens():
    g = gen(8)
    logits, ids = randn(g, 1, 12, 5, requires_grad=True), torch.randint(0, 5, (1, 12), generator=g)
    decoder.lm_log_prob(logits, ids).sum().backward()
    scored = int((logits.grad.abs().sum(-1) > 0).sum())
    assert answer("answer_next_token_targets") == canonical("answer_next_token_targets", scored)
    assert wrong("answer_next_token_targets", "every_position") == canonical("answer_next_token_targets", ids.shape[1])


def test_the_nucleus_of_the_question_is_top_p_filters():
    probs = torch.tensor([0.5, 0.3, 0.15, 0.05], dtype=torch.float64)
    kept = tuple(torch.nonzero(decoder.top_p_filter(probs.log(), 0.9) > -math.inf).flatten().tolist())
    assert answer("answer_nucleus") == canonical("answer_nucleus", kept)


# ---------------------------------------------------------------- 08
def test_cross_attention_queries_the_decoder_against_the_encoders_keys_and_values():
    from learner.check.cases.transformer_parts import attn_params
    g = gen(9)
    y, memory, p = randn(g, 2, 5, 8), randn(g, 2, 7, 8), attn_params(g, 8)
    out, weights = encoder_decoder.cross_attention(y, memory, None, p, 4)
    same, _ = encoder.multi_head_attention(y, memory, p, 4)  # x_q: the decoder, x_kv: the encoder
    assert torch.allclose(out, same)
    assert chosen("answer_cross_attention_sources") == "$Q$ from the decoder, $K$ and $V$ from the encoder's outputs"
    assert answer("answer_cross_weights_shape") == canonical("answer_cross_weights_shape", tuple(weights.shape))
    empty, _ = encoder_decoder.cross_attention(y, memory[:, :0], torch.zeros(2, 0, dtype=torch.bool), p, 4)
    assert torch.allclose(empty, p["b_o"].expand_as(empty))  # nothing to read: only the output bias is added
    assert chosen("answer_empty_source").startswith("a decoder-only language model")


# ---------------------------------------------------------------- 09
def test_positions_through_the_model_with_and_without_a_cache():
    seen = []

    def step(ids, cache):  # counts the positions each call sends through the model
        seen.append(ids.shape[1])
        return torch.zeros(ids.shape[0], ids.shape[1], 3), (cache or 0) + ids.shape[1]
    kv_cache.greedy_generate(step, torch.zeros(1, 5, dtype=torch.long), 2, 10)  # token 0 each time: no <eos>
    name = "answer_positions_without_cache"
    assert wrong(name, "with_cache") == canonical(name, sum(seen))
    without = sum(5 + t for t in range(10))  # the whole text so far, at each of the 10 steps
    assert answer(name) == canonical(name, without)


def test_the_cache_holds_keys_and_values():
    g = gen(10)
    q, k, v = randn(g, 1, 2, 3, 4), randn(g, 1, 2, 3, 4), randn(g, 1, 2, 3, 4)
    _, cache = kv_cache.cached_attention(q, k, v)
    assert len(cache) == 2 and torch.equal(cache[0], k) and torch.equal(cache[1], v)
    assert chosen("answer_what_the_cache_keeps") == "the keys and values of the earlier tokens, in every layer"


# ---------------------------------------------------------------- 05b
def test_an_attention_decoder_computes_one_weight_per_output_step_and_source_position():
    from learner.rnn_models import AttentionSeq2Seq
    from solutions.rnn_attention import attention_decoder_step
    model = AttentionSeq2Seq(12, 9, D=4, d_h=8, d_a=4, seed=0, step=attention_decoder_step)
    src, tgt_in = torch.randint(4, 12, (1, 10)), torch.randint(4, 9, (1, 11))
    with torch.no_grad():
        _, weights = model(src, torch.ones(1, 10, dtype=torch.bool), tgt_in, with_weights=True)
    name = "answer_alignment_weights"
    assert answer(name) == canonical(name, weights[0].numel())
    assert wrong(name, "sum") == canonical(name, sum(weights.shape[1:]))
    assert chosen("answer_bottleneck").startswith("the single fixed-size context")


# ---------------------------------------------------------------- 10
def test_in_the_prefix_a_token_reads_the_prefix_token_after_it_only_with_the_prefix_lm_mask():
    from learner import data
    from solutions.capstone import prefix_lm_mask
    tokens = data.tokenize("the 1st of may 2001")
    assert tokens[4] == "may" and tokens[5] == "2"  # positions 5 and 6 once <bos> comes first
    T = 1 + len(tokens) + 1 + 11  # <bos> source = and a target of 11 tokens
    causal_allows = nn.Transformer.generate_square_subsequent_mask(T)[5, 6] == 0
    prefix_allows = prefix_lm_mask(torch.tensor([len(tokens) + 2]), T)[0, 5, 6]
    assert (bool(prefix_allows), bool(causal_allows)) == (True, False)
    assert chosen("answer_prefix_reads_later_source") == "only with the prefix-LM mask"


def test_a_prefix_of_five_opens_the_ten_pairs_above_the_diagonal():
    from solutions.capstone import prefix_lm_mask
    T = 9
    causal_allows = nn.Transformer.generate_square_subsequent_mask(T) == 0
    added = prefix_lm_mask(torch.tensor([5]), T)[0] & ~causal_allows
    name = "answer_pairs_the_prefix_adds"
    assert answer(name) == canonical(name, int(added.sum()))
    assert wrong(name, "square") == canonical(name, 5 * 5)
    assert wrong(name, "with_diagonal") == canonical(name, int(causal_allows[:5, :5].sum()))
