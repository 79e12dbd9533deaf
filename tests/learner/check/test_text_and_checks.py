"""What each exercise's text warns about and allows, and what its checks hold the learner to, kept together.

The text of an exercise is the Markdown above its answer cell (back to the previous code cell). Every sentence of it
that warns ("not", "never", "must", "raise(s)") or allows an input ("may be", "may hold", "may differ", "any",
"either", "is allowed", "even"; the convention's "may attend" aside) is ruled here, by a fragment of the sentence:

* ``mistake(...)``: the known mistakes of the exercise that name it when a learner does it (each must be registered
  for the exercise, so its check says so in words);
* ``case(...)``: the visible cases of the exercise that try it (each fragment must be in one case's description);
* ``why(...)``: why no check names it (context, a hint about style, a sentence about another function).

A fragment may give the sentence's other wordings, separated by " | ", so that prose being rewritten keeps its
ruling: the ruling holds while any of them is in the text.

A sentence that states an error (raise, raises, ``ValueError``) must be ruled by cases: the rule the text gives is the
rule the visible checks try, so what grading holds a learner to is what the text says. A warning without a ruling,
or a ruling whose sentence is gone, fails with the list. Reads the notebooks' JSON only: about 1 s.
"""
import re

import nbformat
import pytest

from coursekit.sync import source_notebooks
from learner.check import EXERCISES
from learner.check.cases import visible_cases

WARNING = re.compile(r"\b(not|never|must|raises?|n't)\b", re.I)
ALLOWS = re.compile(r"\bmay (?:be|hold|differ|have)\b|\bany\b|\beither\b|\bis allowed\b|\beven\b", re.I)
CONVENTION = re.compile(r"may (?:attend|be attended|be looked)", re.I)  # True = may attend: every mask case tries it
STATES_AN_ERROR = re.compile(r"\braises?\b|ValueError", re.I)


def mistake(*names):
    return ("mistake", names)


def case(*whats):
    return ("case", whats)


def why(reason):
    return ("why", reason)


def exercise_texts():
    """{exercise: its text}: the Markdown cells right above each exercise's answer cell."""
    texts = {}
    for path in source_notebooks():
        markdown = []
        for cell in nbformat.read(path, as_version=4).cells:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            if cell.cell_type == "markdown":
                markdown.append(cell.source)
            elif grade_id in EXERCISES and cell.metadata["nbgrader"].get("solution"):
                texts[grade_id] = "\n".join(markdown)
                markdown = []
            else:
                markdown = []
    return texts


def warnings_of(text):
    """The sentences and bullet points of ``text`` that warn or allow an input, with their white space made single."""
    parts = [" ".join(p.split()) for p in re.split(r"(?<=[.!?])\s+|\n\s*[*-] ", text)]
    return [p for p in parts if WARNING.search(p) or ALLOWS.search(CONVENTION.sub("", p))]


CONTEXT = "context of the section, not a rule of the function"
RULINGS = {
    "build_vocab": {"raise `ValueError` when `min_freq < 1`": case("min_freq=0", "one string instead of a list")},
    "decode": {"may be a list of ints or a 1-D tensor": case("an empty list", "ids given as a 1-D tensor"),
               "not in the vocabulary raises": case("an id outside the vocabulary")},
    "pad_batch": {"of any lengths": case("one sequence", "sequences of equal length",
                                                  "a sequence of length 0"),
                  "A length-0 sequence is allowed": case("a sequence of length 0"),
                  "The trip back is not perfect": why("about the demonstration of encode and decode above"),
                  "Padding is filler, not text": why("why a mask comes with the batch: the mask is checked by value "
                                                     "(pad_batch_mask_inverted)"),
                  "empty batch": case("an empty batch")},
    "embed_one_hot": {"tensor of **any** shape": case("a single id (0-d tensor)", "no ids at all"),
                      "id is negative or": case("an id outside [0, V)"),
                      "`F.one_hot` would raise": case("an id outside [0, V)")},
    "pairwise_scores": {"$T_q$ and $T_k$ may differ": case("T_q != T_k"),
                        "not the other way round": mistake("dot_products:scores_keys_first"),
                        "different widths": case("Q and K of different widths")},
    "project_qkv": {"with any leading dimensions": case("any leading dimensions", "one token"),
                    "a matrix is not 2-D": case("W_K with the wrong input width", "a W_V that is not 2-D",
                                                "W_Q and W_K of different output widths")},
    "scaled_scores": {"the square root, not $d_k$ itself": mistake("dot_products:scaled_scores_by_d_k")},
    "score_variance": {"The check accepts any sampling": why("says how the check judges a random estimate"),
                       "*not* all": mistake("dot_products:score_variance_all_pairs"),
                       "`d_k < 1`": case("d_k = 0")},
    "softmax": {"a float tensor of any shape": case("dim=0 on a matrix", "an axis of size 0"),
                "Make any new tensor": why("the device rule; the hidden part's device probe tries it"),
                "One way out": why("a hint towards the stable softmax; the edge cases try the all -inf slice"),
                "the axis that must sum to 1": mistake("softmax:softmax_wrong_axis"),
                "Logits of $10^4$": mistake("softmax:softmax_no_max_subtraction"),
                "The third checks that a temperature of 0 or below raises": case("temperature 0 is an error",
                                                                                 "a negative temperature is an error"),
                "gives all zeros, not NaN": case("all -inf"),
                "`temperature <= 0` raises": case("temperature 0", "a negative temperature")},
    "log_softmax": {"Don't call `torch.log_softmax` either": why("style: the checks judge what it computes, and "
                                                                 "torch.log_softmax computes the right values"),
                    "gives all $-\\infty$": case("all -inf"),
                    "`temperature <= 0` raises": case("temperature 0"),
                    "an entry 2000 below the maximum must come out near": case("an entry 2000 below the max")},
    "sequence_log_prob": {"never index with a padded target": case("padding may hold any id, even -100"),
                          "Raises `ValueError` if `logits` is not 3-D": case(
                              "2-D logits (T, V)", "targets of the wrong shape", "float targets",
                              "a mask of another shape"),
                          "Edge cases checked": case("T = 1", "uniform logits", "confident logits (1e3)",
                                                     "an all-padding row")},
    "bidirectional_mask": {"$T_q$ and $T_k$ may differ": case("T_q = 2 queries and T_k = 5 keys differ"),
                           "Either may be 0": case("an empty source, T_k = 0", "no queries, T_q = 0"),
                           "A negative length raises": case("T_q = -1", "T_k = -2")},
    "causal_mask": {"$T < 0$ raises": case("T = -1")},
    "padding_mask": {"not queries": mistake("masks_attention:padding_mask_over_queries"),
                     "not 2-D or not boolean": case("a float mask", "a 1-D key_valid", "a 3-D key_valid")},
    "combine_masks": {"Takes any number": case("a single mask", "no masks at all", "only None"),
                      "not boolean raises": case("a float mask")},
    "additive_mask": {"0 where attending is allowed": why("the convention, which every case of the exercise tries"),
                      "a BoolTensor of any shape": case("a mask of any shape: 4-D", "causal mask"),
                      "not a large negative number": mistake("masks_attention:additive_mask_large_negative"),
                      "not boolean raises": case("an integer mask", "an integer dtype")},
    "masked_attention": {"never NaN": case("empty source (T_k = 0)", "a fully masked row"),
                         "Raises `ValueError` if `Q` and `K`": case(
                             "Q and K of different widths", "K and V of different lengths", "a float mask",
                             "a mask of the wrong shape", "extra leading axes"),
                         "It also checks": why("says what the properties try (rows sum to 1, blocked weights 0, "
                                               "no future leak): they are the checks themselves")},
    "rnn_cell": {"widths disagree": case("x_t of the wrong width", "h_prev of width", "W_x of d_h = 3")},
    "rnn_encode": {"may have only 6 real tokens": case("padded batch, lengths [6, 3, 1]"),
                   "Padding positions may hold any id": case("ids other than <pad>", "id 999, outside the vocabulary"),
                   "not an index error": case("empty source (T_x = 0)", "all padding"),
                   "does not have the shape": case("a src_mask of the wrong shape")},
    "decoder_step": {"not probabilities": mistake("rnn:decoder_step_probabilities",
                                                  "rnn:decoder_step_log_probabilities")},
    "teacher_forced_logits": {"read like any token": case("padded targets"),
                              "must read the *true* previous tokens": mistake("rnn:teacher_forced_own_predictions"),
                              "does not depend on the state": why("a tip on speed, not a rule")},
    "seq2seq_loss": {"whatever id it holds (even": case("padding targets hold -100", "one example is all padding"),
                     "Raises `ValueError` if `logits` is not 3-D": case(
        "2-D logits", "targets of another shape", "a mask of the wrong shape")},
    "greedy_translate": {"the source's never change at all": why(CONTEXT)},
    "greedy_decode": {"it must choose a token": why(CONTEXT),
                      "must stop at `max_len`": mistake("rnn:greedy_decode_finished_keep_going")},
    "beam_search": {"The gradient comes back": why(CONTEXT),
                    "not the first factor": mistake("rnn:beam_search_no_cumulative"),
                    "never extended again": mistake("rnn:beam_search_finished_keep_growing"),
                    "not normalised": mistake("rnn:beam_search_scores_normalised"),
                    "Raises `ValueError` naming the argument": case("beam_width = 0", "max_len = -1",
                                                                    "a batch of contexts")},
    "additive_score": {"may have different widths": case("d_dec != d_enc"),
                       "both states must have the same width": why("about dot_score, which the next exercise "
                                                                   "checks"),
                       "do not fit": case("W_k of the wrong width", "u of the wrong length")},
    "dot_score": {"widths or the batch sizes differ": case("widths that differ", "batches that differ")},
    "attend": {"not NaN": mistake("rnn_attention:attend_nan_when_empty"),
               "shapes disagree": case("scores and states of different lengths", "a src_mask of the wrong shape")},
    "split_heads": {"A query with no allowed key gets zero weights": why("about the ready-made masked_attention the "
                                                                          "set-up cell imports, stated above it"),
                    "does not divide $D$": case("not divisible by n_heads", "x without a batch axis")},
    "merge_heads": {"not 4-D": case("a 3-D input")},
    "multi_head_attention": {"not of $D$": mistake("encoder:mha_scaled_by_sqrt_D"),
                             "disagree on $B$ or $D$": case("x_q of width D=6 and x_kv of width 4",
                                                            "not divisible by n_heads")},
    "sinusoidal_positions": {"The original Transformer": why(CONTEXT),
                             "not two halves": mistake("encoder:sinusoidal_halves"),
                             "$T < 0$ or $D < 1$": case("D = 0", "T = -1")},
    "embed_with_positions": {"Either table is used the same way": case("a fixed sinusoidal table"),
                             "no row for a position": case("longer than the positional table"),
                             "not of the token id": mistake("encoder:embed_positions_by_token_id")},
    "encoder_block": {"which are not an RNN's states | Each sub-layer is wrapped in a **residual connection**": why("the notation: what r names")},
    "masked_lm_loss": {"## 4 ·": why(CONTEXT),
                       "(BERT replaces": why(CONTEXT),
                       "must not count": mistake("encoder:masked_lm_loss_mean_over_all",
                                                 "encoder:masked_lm_loss_divided_by_all"),
                       "never NaN": case("no position is masked")},
    "probe_accuracy": {"## 5 ·": why(CONTEXT),
                       "**The probe.**": why(CONTEXT),
                       "not the sentence's first or last": mistake("encoder:probe_accuracy_first_position",
                                                                   "encoder:probe_accuracy_last_position",
                                                                   "encoder:probe_accuracy_mean_over_sentence"),
                       "Never score the probe": mistake("encoder:probe_accuracy_tested_on_train",
                                                        "encoder:probe_accuracy_means_from_all"),
                       "shapes disagree": case("the shapes disagree", "a position outside its sentence", "a sense of 2",
                                               "no sentence of sense 1", "no sentence left to test")},
    "lm_log_prob": {"even out of range": case("padding holds 999, out of range", "a sequence that is all padding"),
                    "Rows 0–3 did not move": why("what the demonstration above printed"),
                    "given, not predicted": mistake("decoder:lm_log_prob_not_shifted"),
                    "does not underflow": why(CONTEXT)},
    "rope": {"any leading axes": case("the queries of every head at once, (B, H, T, d)"),
             "Cut a row of width | never on where the pair sits": why(
                 "the formula; its mistakes are named by rope's frequency and sign checks"),
             "so their frequencies are not these | sinusoids use the same frequencies": why("about notebook 06's sinusoids, checked there"),
             "Values are not rotated": why("about rope_attention, whose check names rope_attention_values_rotated"),
             "that is a different layout": mistake("decoder:rope_pairs_halves")},
    "top_k_filter": {"Left of the dashed line": why(CONTEXT),
                     "is not a distribution": why("about sample_next's temperature, tried there"),
                     "does not depend on how a sort": why("about ties; top_k_filter_drops_ties names the mistake"),
                     "the token that crosses": why("about top_p_filter, whose check names "
                                                       "top_p_filter_drops_the_crossing_token"),
                     "is a `ValueError`": case("k = 0", "k = -1", "k = 2.5")},
    "sample_next": {"not $> 0$": case("temperature 0", "a negative temperature")},
    "rope_attention": {"`mask` may be $(T, T)$": case("a causal mask", "a padding mask (B, 1, T)",
                                                      "a fully masked row")},
    "encdec_decoder_block": {"not with $r$": mistake("encoder_decoder:encdec_cross_reads_y")},
    "encdec_forward": {"not its own guesses": why("the decoder is the given run_decoder, which reads tgt_in as it "
                                                  "is given"),
                       "the encoder must not read source padding": mistake(
                           "encoder_decoder:encdec_forward_encoder_unmasked", "encoder_decoder:encdec_forward_no_src_mask")},
    "translation_loss": {"### Exercise 4": why("says what the batch holds; translation_loss_targets_not_shifted "
                                               "names the shift"),
                         "padding adds nothing": mistake("encoder_decoder:translation_loss_padding_counted",
                                                         "encoder_decoder:translation_loss_mean_of_sentences")},
    "cached_attention": {"do not fit": case("q has T_new = 2 positions but k_new has 3", "v_new of T_new = 1",
                                            "a cache of another batch size", "a cache of keys of width 2",
                                            "a cache of another number of heads")},
    "decoder_block_step": {"`n_heads` must divide": case("not divisible by n_heads", "a cache of 3 heads")},
    "greedy_generate": {"for any model given as a `step` function": why("the checks' toy models are such models: "
                                                                         "every case passes one"),
                        "an empty prompt": case("max_len = -1", "an empty prompt")},
    "kv_cache_bytes": {"not a whole number": case("n_positions = -1", "n_positions = 2.5")},
}

TEXTS = exercise_texts()


def wordings(fragment):
    return fragment.split(" | ")


def ruling_of(name, sentence):
    found = [(fragment, r) for fragment, r in RULINGS.get(name, {}).items()
             if any(w in sentence for w in wordings(fragment))]
    return found[0] if found else (None, None)


def test_every_warning_of_an_exercise_is_ruled():
    """Each warning sentence of each exercise's text has a ruling here (a named mistake, cases, or a reason)."""
    unruled = [f"{name}: {sentence}" for name, text in TEXTS.items() if EXERCISES[name].answer is None
               for sentence in warnings_of(text) if ruling_of(name, sentence)[0] is None]
    assert unruled == [], "warnings that no check names and no reason covers:\n" + "\n".join(unruled)


def test_every_ruling_still_has_its_sentence():
    stale = [f"{name}: {fragment}" for name, rulings in RULINGS.items() for fragment in rulings
             if not any(w in " ".join(TEXTS.get(name, "").split()) for w in wordings(fragment))]
    assert stale == [], "rulings whose sentence is gone from the text:\n" + "\n".join(stale)


@pytest.mark.parametrize("name", sorted(RULINGS))
def test_each_ruling_names_a_mistake_or_cases_of_its_exercise(name):
    """A named mistake is registered for the exercise (its check says it in words); a case is one of its visible
    cases (edge or errors, whose description holds the fragment)."""
    ex = EXERCISES[name]
    registered = {m for m, _ in ex.mistakes}
    whats = [c.what for part in ("edge", "errors") for c in visible_cases(ex, part)]
    for fragment, (kind, what) in RULINGS[name].items():
        if kind == "mistake":
            assert set(what) <= registered, (fragment, set(what) - registered)
        elif kind == "case":
            missing = [w for w in what if not any(w in c for c in whats)]
            assert missing == [], (fragment, missing, whats)


def test_every_error_the_text_states_is_tried_by_a_visible_check():
    """A sentence that says the function raises is ruled by the visible cases that try it, which raise."""
    loose = []
    for name, rulings in RULINGS.items():
        errors = [c.what for c in visible_cases(EXERCISES[name], "errors")]
        for sentence in warnings_of(TEXTS[name]):
            fragment, ruling = ruling_of(name, sentence)
            if ruling is None or not STATES_AN_ERROR.search(sentence):
                continue
            if ruling[0] != "case" or not all(any(w in e for e in errors) for w in ruling[1]):
                loose.append(f"{name}: {sentence}")
    assert loose == [], "errors the text states but no visible errors case tries:\n" + "\n".join(loose)
