"""The widgets, driven headless from Python: every control changes what is shown, bad input never does.

Each test moves a control the way a learner does (setting the ipywidget's value
fires the same observers a browser does) and reads what the widget shows: its
PNG bytes, its readouts and its messages.
"""
import math
import re
import os
import subprocess
import sys

import ipywidgets
import matplotlib.pyplot as plt
import pytest
import torch

from learner import data, widgets
from coursekit.samples import ONE_BUG, edited_source
from helpers import as_learner


def stub(*args, **kwargs):
    raise NotImplementedError()


def images_in(widget):
    """Every ipywidgets.Image inside a container, however deep."""
    found = [widget] if isinstance(widget, ipywidgets.Image) else []
    for child in getattr(widget, "children", ()):
        found += images_in(child)
    return found


# ====================================================================== temperature explorer
@pytest.fixture
def temp(learner):
    return widgets.temperature_explorer(learner["softmax"])


def test_temperature_explorer_shows_the_learners_softmax_beside_the_reference(temp):
    """A correct softmax: bars drawn, readouts for both sides, no message."""
    assert temp.png.startswith(b"\x89PNG") and temp.image.value == temp.png
    assert temp.learner_message == "" and temp.message == ""
    assert temp.readouts["max_abs_diff"] < 1e-6
    assert temp.readouts["learner_entropy"] == pytest.approx(temp.readouts["entropy"], abs=1e-6)
    assert "matches the reference" in temp.readout.value
    assert torch.allclose(temp.reference, torch.softmax(torch.tensor(temp.logits, dtype=torch.float64), -1))


def test_moving_the_temperature_slider_changes_bars_entropy_and_max_probability(temp):
    """Low τ: sharper (lower entropy, higher max p). High τ: towards uniform. Each move redraws."""
    n = len(temp.logits)
    seen = {temp.png}
    temp.slider.value = 0.1
    cold = dict(temp.readouts)
    assert temp.temperature == pytest.approx(0.1) and temp.tau_box.value == "0.1"
    assert temp.png not in seen
    seen.add(temp.png)
    temp.slider.value = 20.0
    hot = dict(temp.readouts)
    assert temp.png not in seen
    assert cold["entropy"] < 0.05 and cold["max_prob"] > 0.99          # near the argmax limit
    assert hot["entropy"] > 0.95 * math.log(n) and hot["max_prob"] < 1.5 / n  # near the uniform limit
    assert hot["learner_entropy"] == pytest.approx(hot["entropy"], abs=1e-5)
    assert f"log {n}" in temp.readout.value and f"1/{n}" in temp.readout.value  # the limits are stated


def test_a_typed_temperature_moves_the_slider_and_the_readouts(temp):
    temp.tau_box.value = "0.5"
    assert temp.message == ""
    assert temp.slider.value == pytest.approx(0.5) and temp.temperature == pytest.approx(0.5)
    expected = torch.softmax(torch.tensor(temp.logits, dtype=torch.float64) / 0.5, -1)
    assert temp.readouts["max_prob"] == pytest.approx(float(expected.max()))


@pytest.mark.parametrize("typed, says", [("0", "τ = 0 is not allowed"), ("-2", "must be positive"),
                                         ("abc", "is not a number"), ("nan", "NaN"), ("100", "outside"),
                                         ("", "is not a number")])
def test_a_bad_typed_temperature_says_what_is_allowed_and_keeps_the_last_good_state(temp, typed, says):
    temp.slider.value = 2.0
    before = (temp.png, dict(temp.readouts), temp.temperature, temp.slider.value)
    temp.tau_box.value = typed
    assert says in temp.message and "from 0.05 to 20" in temp.message
    assert "Input not used" in temp.notice.value
    assert (temp.png, temp.readouts, temp.temperature, temp.slider.value) == before
    temp.tau_box.value = "3"  # a good value afterwards clears the message
    assert temp.message == "" and temp.temperature == 3.0


def test_presets_and_typed_logits_change_what_is_shown(temp):
    temp.preset.value = "all scores equal"
    assert temp.readouts["entropy"] == pytest.approx(math.log(4)) and temp.readouts["max_prob"] == pytest.approx(0.25)
    assert temp.logits_box.value == "1, 1, 1, 1" and temp.labels == ["k1", "k2", "k3", "k4"]
    png = temp.png
    temp.logits_box.value = "5, -inf, 1"
    assert temp.message == "" and temp.logits == [5.0, -math.inf, 1.0] and temp.labels == ["x1", "x2", "x3"]
    assert temp.reference[1] == 0 and temp.learner[1] == 0 and temp.readouts["allowed"] == 2
    assert temp.png != png


def test_all_logits_blocked_gives_all_zeros_not_nan(temp):
    temp.logits_box.value = "-inf, -inf"
    assert temp.message == "" and temp.learner_message == ""
    assert temp.reference.tolist() == [0.0, 0.0] and temp.readouts["max_prob"] == 0.0


@pytest.mark.parametrize("typed, says", [("", "Type between 1 and 12"), ("1, 2, x", "'x' is not a number"),
                                         ("1, inf", "cannot be a logit"), (", ".join(["1"] * 13), "at most 12")])
def test_bad_logits_say_what_is_allowed_and_keep_the_last_good_state(temp, typed, says):
    before = (temp.png, dict(temp.readouts), temp.logits)
    temp.logits_box.value = typed
    assert says in temp.message
    assert (temp.png, temp.readouts, temp.logits) == before


def test_the_stub_shows_a_friendly_message_and_the_reference_still_works():
    w = widgets.temperature_explorer(stub)
    assert "not implemented yet" in w.learner_message and "reference is shown alone" in w.learner_message
    assert w.learner is None and w.readouts["learner_entropy"] is None
    png, h = w.png, w.readouts["entropy"]
    w.slider.value = 0.1
    assert w.png != png and w.readouts["entropy"] < h
    assert "not implemented yet" in w.learner_message and "Your function" in w.notice.value


@pytest.mark.parametrize("garbage, says", [
    (lambda x, dim=-1, temperature=1.0: "hello", "returned a str, not a tensor"),
    (lambda x, dim=-1, temperature=1.0: torch.zeros(2), "must keep the shape"),
    (lambda x, dim=-1, temperature=1.0: torch.full_like(x, float("nan")), "returned nan at position 0"),
    (lambda x, dim=-1, temperature=1.0: x.long(), "not a float tensor"),
    (lambda x, dim=-1, temperature=1.0: 1 / 0, "raised ZeroDivisionError"),
])
def test_a_garbage_returning_softmax_gets_a_message_and_the_reference_is_drawn_alone(garbage, says):
    w = widgets.temperature_explorer(garbage)
    assert says in w.learner_message
    assert w.learner is None and w.reference is not None and w.png
    png = w.png
    w.slider.value = 3.0
    assert w.png != png and w.temperature == 3.0


def test_a_wrong_softmax_is_drawn_and_the_known_mistake_named():
    _, _, (old, new) = ONE_BUG["03_softmax"]  # logits multiplied by the temperature
    wrong = as_learner({"softmax": edited_source("softmax", old, new)})["softmax"]
    w = widgets.temperature_explorer(wrong, temperature=2.0)
    assert w.learner is not None
    assert "differ from the reference" in w.learner_message and "multiply by τ" in w.learner_message
    w.slider.value = 1.0  # at τ = 1 the bars agree, but the notebook's check still fails it, and the widget says so
    assert "differ from the reference" not in w.learner_message and w.readouts["max_abs_diff"] < 1e-6
    assert "the notebook's check fails your `softmax`" in w.learner_message
    assert "the logits were multiplied by the temperature" in w.learner_message  # the check's own diagnosis
    assert "matches the reference" not in w.readout.value and "Your bars match here" in w.readout.value


def test_a_slow_softmax_is_stopped(monkeypatch):
    monkeypatch.setattr(widgets.base, "LEARNER_TIME_LIMIT", 0.3)

    def forever(x, dim=-1, temperature=1.0):
        while True:
            pass

    w = widgets.temperature_explorer(forever)
    assert "did not finish" in w.learner_message and w.reference is not None


def test_learner_prints_and_warnings_stay_off_the_notebook(capfd):
    import warnings

    def noisy(x, dim=-1, temperature=1.0):
        print("debug", x)
        warnings.warn("careful")
        return torch.softmax(x / temperature, dim).nan_to_num(0.0)  # a row of all -inf: zeros (the course's rule)

    w = widgets.temperature_explorer(noisy)
    w.slider.value = 0.5
    out, err = capfd.readouterr()
    assert out == "" and err == "" and w.learner_message == ""


# ====================================================================== mask explorer
@pytest.fixture
def mask(learner):
    return widgets.mask_explorer(learner["masked_attention"], sentence="a b c d", source="x y z", kind="causal")


def allowed(kind, i, j, n_words, n_source, pads):
    """The rules in words, one pair at a time (independent of the widget's torch code)."""
    if kind == "bidirectional":
        return True
    if kind == "causal":
        return j <= i
    if kind == "padding":
        return j < n_words
    if kind == "cross":
        return j < n_source
    if kind == "prefix":
        return (j <= i or j < n_source) and j < n_source + n_words
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["bidirectional", "causal", "padding", "cross", "prefix"])
def test_each_mask_kind_blocks_exactly_the_pairs_its_rule_forbids(mask, kind):
    mask.padding.value = 1
    mask.kind.value = kind
    assert mask.message == "" and mask.learner_message == ""
    T_q, T_k = mask.mask.shape
    want = torch.tensor([[allowed(kind, i, j, 4, 3, 1) for j in range(T_k)] for i in range(T_q)])
    assert torch.equal(mask.mask, want)
    assert mask.blocked_pairs == int((~want).sum()) == mask.readouts["blocked_pairs"]
    assert f"blocked pairs: {mask.blocked_pairs} of {T_q * T_k}" in mask.readout.value
    assert float(mask.learner.masked_fill(want, 0).abs().max()) == 0  # blocked weights are exactly 0
    assert torch.allclose(mask.learner.sum(-1), torch.ones(T_q, dtype=torch.float64))
    assert mask.readouts["max_abs_diff"] < 1e-5


def test_the_shapes_of_each_kind():
    w = widgets.mask_explorer(stub, sentence="a b c d", source="x y z", kind="cross", padding=2)
    assert (w.q_tokens, w.k_tokens) == (["a", "b", "c", "d"], ["x", "y", "z", "<pad>", "<pad>"])
    w.kind.value = "prefix"
    assert w.q_tokens == w.k_tokens == ["x", "y", "z", "a", "b", "c", "d", "<pad>", "<pad>"]
    w.kind.value = "padding"
    assert w.q_tokens == w.k_tokens == ["a", "b", "c", "d", "<pad>", "<pad>"]
    assert w.source.disabled
    w.kind.value = "cross"
    assert not w.source.disabled


def test_changing_the_mask_changes_the_heatmap_and_the_weights(mask):
    causal_png, causal_w = mask.png, mask.learner
    mask.kind.value = "bidirectional"
    assert mask.blocked_pairs == 0 and mask.png != causal_png
    assert not torch.allclose(mask.learner, causal_w)
    assert bool((mask.learner > 0).all())
    mask.kind.value = "causal"
    assert torch.equal(mask.learner, causal_w) and mask.blocked_pairs == 6  # same picture as before
    assert mask.png == causal_png


def test_the_query_row_selector_shows_that_rows_weights(mask):
    assert mask.row == 3  # starts on the last word
    png = mask.png
    mask.query.value = 1
    assert mask.row == 1 and mask.png != png
    assert torch.equal(mask.row_weights, mask.learner[1])
    assert mask.readouts["row_allowed"] == 2 and mask.readouts["row_weights"][2:] == [0.0, 0.0]
    assert "query i = 1 (b) may attend to 2 of 4 keys" in mask.readout.value


def test_the_padding_slider_adds_pad_keys_that_the_padding_mask_blocks(mask):
    mask.kind.value = "padding"
    assert mask.blocked_pairs == 0
    mask.padding.value = 2
    assert mask.k_tokens[-2:] == ["<pad>", "<pad>"] and mask.blocked_pairs == 6 * 2
    assert float(mask.learner[:, -2:].abs().max()) == 0
    mask.kind.value = "bidirectional"
    assert mask.blocked_pairs == 0 and "does not block the 2 pad keys" in mask.readout.value


def test_a_new_sentence_resizes_the_matrices_and_the_query_selector(mask):
    mask.query.value = 3
    mask.sentence.value = "one two"
    assert mask.q_tokens == ["one", "two"] and mask.mask.shape == (2, 2)
    assert mask.query.max == 1 and mask.row == 1 and mask.query.value == 1


def test_cross_attention_uses_the_source_as_keys(mask):
    mask.kind.value = "cross"
    png = mask.png
    mask.source.value = "p q r s t"
    assert mask.mask.shape == (4, 5) and mask.k_tokens == ["p", "q", "r", "s", "t"] and mask.png != png


@pytest.mark.parametrize("control, value, says", [
    ("sentence", "   ", "The sentence is empty"),
    ("sentence", " ".join("w%d" % i for i in range(13)), "at most 12 positions"),
])
def test_a_bad_sentence_says_what_is_allowed_and_keeps_the_last_good_state(mask, control, value, says):
    before = (mask.png, mask.blocked_pairs, mask.q_tokens, dict(mask.readouts))
    getattr(mask, control).value = value
    assert says in mask.message
    assert (mask.png, mask.blocked_pairs, mask.q_tokens, mask.readouts) == before


def test_an_empty_source_in_cross_attention_is_refused_with_the_reason(mask):
    mask.kind.value = "cross"
    before = (mask.png, mask.k_tokens)
    mask.source.value = ""
    assert "The source is empty" in mask.message and "n = 0" in mask.message
    assert (mask.png, mask.k_tokens) == before


def test_a_slider_or_dropdown_that_would_overflow_goes_back_to_what_is_drawn(mask):
    mask.sentence.value = "a b c d e f g h i j"
    mask.padding.value = 3  # 13 positions
    assert "at most 12 positions" in mask.message and mask.padding.value == 0
    mask.kind.value = "prefix"  # 3 source + 10 words
    assert "at most 12 positions" in mask.message and mask.kind.value == "causal"
    mask.padding.value = 2
    assert mask.message == "" and mask.blocked_pairs == 12 * 11 // 2


def test_the_stub_masked_attention_shows_a_message_and_the_reference_still_works():
    w = widgets.mask_explorer(stub)
    assert "not implemented yet" in w.learner_message and w.learner is None and w.reference is not None
    png = w.png
    w.kind.value = "bidirectional"
    assert w.blocked_pairs == 0 and w.png != png
    assert bool((w.reference > 0).all())


@pytest.mark.parametrize("garbage, says", [
    (lambda Q, K, V, mask=None: torch.zeros(3), "must return the pair"),
    (lambda Q, K, V, mask=None: (Q, torch.zeros(2, 2)), "should be a tensor of shape (T_q, T_k)"),
    (lambda Q, K, V, mask=None: (Q, torch.full((Q.shape[0], K.shape[0]), float("nan"))), "hold nan"),
    (lambda Q, K, V, mask=None: None, "returned a NoneType"),
])
def test_a_garbage_returning_masked_attention_gets_a_message(garbage, says):
    w = widgets.mask_explorer(garbage)
    assert says in w.learner_message and w.learner is None
    png = w.png
    w.query.value = 0
    assert w.png != png


def test_a_wrong_masked_attention_is_drawn_and_the_known_mistake_named():
    _, _, (old, new) = ONE_BUG["04_masks_attention"]  # no division by sqrt(d_k)
    wrong = as_learner({"masked_attention": edited_source("masked_attention", old, new)})["masked_attention"]
    w = widgets.mask_explorer(wrong)
    assert w.learner is not None and "√d_k" in w.learner_message


def test_a_mask_that_is_ignored_is_reported_as_a_leak():
    def no_mask(Q, K, V, mask=None):
        w = torch.softmax(Q @ K.T / math.sqrt(Q.shape[-1]), -1)
        return w @ V, w

    w = widgets.mask_explorer(no_mask, kind="causal")
    assert "on the blocked pair" in w.learner_message


# ====================================================================== both
@pytest.mark.parametrize("make", ["temperature", "mask"])
def test_a_widget_is_one_container_with_exactly_one_plot_image_and_no_pyplot_figure(learner, make):
    before = plt.get_fignums()
    w = (widgets.temperature_explorer(learner["softmax"]) if make == "temperature"
         else widgets.mask_explorer(learner["masked_attention"]))
    w.ui.children  # noqa: B018 (it is a container)
    assert isinstance(w.ui, ipywidgets.VBox) and images_in(w.ui) == [w.image]
    assert f"ck-{make}" in w.ui._dom_classes and "ck-plot" in w.image._dom_classes
    assert callable(w._ipython_display_)
    assert plt.get_fignums() == before  # nothing for the inline backend to show a second time


def test_the_widgets_work_without_the_solutions_package():
    """Students do not have `solutions`: the reference side is the widget module's own torch code."""
    code = (
        "import sys; sys.modules['solutions'] = None\n"
        "import torch\n"
        "from learner import widgets\n"
        "t = widgets.temperature_explorer(lambda x, dim=-1, temperature=1.0: torch.softmax(x / temperature, dim)"
        ".nan_to_num(0.0))\n"  # the notebook's checks run from their shipped expectations, and pass it
        "t.slider.value = 0.3\n"
        "m = widgets.mask_explorer(lambda Q, K, V, mask=None: (_ for _ in ()).throw(NotImplementedError()))\n"
        "m.kind.value = 'prefix'\n"
        "assert t.learner_message == '' and 'not implemented' in m.learner_message and m.blocked_pairs > 0\n"
        "assert 'passes the notebook' in t.readout.value\n"
        "assert 'solutions' not in [k for k, v in sys.modules.items() if v is not None]\n"
        "print('ok')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


def test_the_browsers_snapped_echo_of_the_slider_is_not_a_move(temp):
    """A browser snaps τ to its slider grid and sends it back; that echo changes nothing."""
    temp.tau_box.value = "8"
    png, readouts = temp.png, dict(temp.readouts)
    temp.slider.value = 7.96  # what the browser's grid makes of 8
    assert temp.temperature == 8.0 and temp.png == png and temp.readouts == readouts
    assert temp.tau_box.value == "8"


# ====================================================================== cross-attention viewer (notebook 08)
@pytest.fixture(scope="module")
def date_task():
    from learner import data
    return data.make_date_task(seed=0)


def _translator(task, decoder_block=None, steps=0):
    """An encoder-decoder on the date task built with the reference blocks (optionally trained a little)."""
    from learner import data, transformer
    from solutions import encoder, encoder_decoder
    cfg = transformer.EncoderDecoderConfig(len(task.src_vocab), len(task.tgt_vocab), d_model=32, n_heads=2, d_ff=64,
                                           n_enc_layers=1, n_dec_layers=2, max_len=32)
    model = transformer.EncoderDecoder(cfg, decoder_block or encoder_decoder.encdec_decoder_block,
                                       encoder.embed_with_positions, encoder.encoder_block, seed=0)
    if steps:
        stream = data.batches(task.train, 64, task.src_vocab, task.tgt_vocab, seed=0)
        transformer.fit(model, lambda b: torch.nn.functional.cross_entropy(
            model(b["src"], b["src_mask"], b["tgt_in"], b["tgt_mask"]).flatten(0, 1), b["tgt_out"].flatten(),
            ignore_index=0), stream, steps=steps, report_every=steps)
    return model


@pytest.fixture(scope="module")
def viewer(date_task):
    return widgets.cross_attention_viewer(_translator(date_task), date_task, "the 1st of february 2014")


def test_the_viewer_translates_the_typed_date_and_draws_one_row_per_written_token(viewer):
    """The readouts hold the model's greedy translation; the heatmap has T_y rows over T_x source tokens, each a
    distribution over the source."""
    r = viewer.readouts
    assert viewer.png.startswith(b"\x89PNG") and viewer.message == "" and viewer.learner_message == ""
    assert r["T_x"] == 9 and len(r["strongest"]) == r["T_y"] == len(r["row_sums"])
    assert all(abs(s - 1) < 1e-5 for s in r["row_sums"])
    from learner import data
    b = data.make_batch([("the 1st of february 2014", "")], viewer.task.src_vocab, viewer.task.tgt_vocab)
    tokens, cross = viewer.model.greedy(b["src"], b["src_mask"], data.BOS_ID, data.EOS_ID, 12)
    assert r["translation"] == data.to_text(tokens[0], viewer.task.tgt_vocab)  # the model's own greedy output
    w = cross[-1][0].mean(0)[:r["T_y"]]  # last block, mean over heads: what the viewer draws by default
    assert r["strongest"] == [data.tokenize("the 1st of february 2014")[j] for j in w.argmax(-1).tolist()]


def test_typing_another_date_changes_the_translation_and_the_picture(viewer):
    before_png, before = viewer.png, dict(viewer.readouts)
    viewer.text.value = "07/27/2013"
    assert viewer.readouts["T_x"] == 10 and viewer.png != before_png and viewer.readouts != before
    viewer.text.value = "the 1st of february 2014"


def test_choosing_a_head_or_a_block_redraws_that_heads_weights(viewer):
    mean_png = viewer.png
    viewer.head.value = 1
    assert viewer.png != mean_png and all(abs(s - 1) < 1e-5 for s in viewer.readouts["row_sums"])
    viewer.layer.value = 0
    assert viewer.png != mean_png
    viewer.head.value, viewer.layer.value = -1, 1
    assert viewer.png == mean_png


@pytest.mark.parametrize("typed, says", [("", "type a date"), ("the zebra of may", "'zebra'"),
                                         ("1 " * 40, "at most 30")])
def test_a_bad_date_says_what_is_allowed_and_keeps_the_last_good_state(viewer, typed, says):
    png, readouts, text = viewer.png, dict(viewer.readouts), viewer.text.value
    viewer.text.value = typed
    assert says in viewer.message
    assert viewer.png == png and viewer.readouts == readouts and viewer.text.value == text


def test_a_model_built_on_the_stub_block_gets_a_friendly_message(date_task):
    v = widgets.cross_attention_viewer(_translator(date_task, decoder_block=stub), date_task)
    assert "not implemented yet" in v.learner_message and v.png == b""
    assert "reference" not in v.learner_message  # the viewer draws no reference to fall back on
    assert "Your function" in v.notice.value


# ====================================================================== KV-cache stepper (notebook 09)
PROMPT = "the 1st of february 2014 ="  # <bos> + 10 tokens: T = 11 positions after the prompt


def _gpt(task, max_len=48, writes_eos=False):
    """A small DecoderLM on the date task's vocabulary with seeded random weights (untrained: the stepper's
    mechanics do not need good text). ``writes_eos``: its last block always predicts <eos>."""
    from learner import blocks, data, transformer
    cfg = transformer.TransformerConfig(vocab_size=len(data.lm_vocab(task)), d_model=32, n_heads=2, d_ff=64,
                                        n_layers=2, max_len=max_len)
    model = transformer.DecoderLM(cfg, blocks.decoder_block, blocks.embed_with_positions, seed=1, block_step=stub)
    if writes_eos:  # every position's output is E[<eos>] (x 10), whose logit then beats every other token's
        with torch.no_grad():
            model.embed.E[data.EOS_ID] *= 10
            model.layers[-1]["ln2"]["weight"].zero_()
            model.layers[-1]["ln2"]["bias"].copy_(model.embed.E[data.EOS_ID])
    return model


@pytest.fixture(scope="module")
def gpt(date_task):
    return _gpt(date_task)


@pytest.fixture
def stepper(learner, gpt, date_task):
    return widgets.kv_cache_stepper(learner["decoder_block_step"], gpt, date_task, PROMPT)


def _mistake(name):
    """A wrong variant from solutions/mistakes/kv_cache.py, compiled as a learner's notebook code."""
    from helpers import mistakes_as_learner
    return mistakes_as_learner("kv_cache")[name]


def test_the_stepper_feeds_the_prompt_once_then_one_token_a_step_and_counts_the_work(stepper, gpt, date_task):
    """Step 0 feeds <bos> + the prompt; each Step feeds 1 token, the cache grows by one position, the dot products
    are T with the cache and T(T+1)/2 recomputing everything, and the picture changes."""
    from learner import data
    n_prompt = 1 + len(data.tokenize(PROMPT))
    L, H, d_k = 2, 2, 16
    pngs, cached_total, recomputed_total = {stepper.png}, n_prompt * (n_prompt + 1) // 2, n_prompt * (n_prompt + 1) // 2
    r = stepper.readouts
    prefill = n_prompt * (n_prompt + 1) // 2  # the prompt's causal pairs, with or without a cache
    assert (r["step"], r["fed"], r["T"], r["dots_cached"], r["dots_recomputed"]) == (0, n_prompt, n_prompt, prefill,
                                                                                     prefill)
    assert "tokens fed this step: 11" in stepper.readout.value and stepper.learner_message == ""
    for k in range(1, 4):
        stepper.step_button.click()
        T = n_prompt + k
        cached_total += T
        recomputed_total += T * (T + 1) // 2
        r = stepper.readouts
        assert stepper.message == "" and (r["step"], r["fed"], r["T"]) == (k, 1, T)
        assert (r["dots_cached"], r["dots_recomputed"]) == (T, T * (T + 1) // 2)
        assert (r["dots_cached_total"], r["dots_recomputed_total"]) == (cached_total, recomputed_total)
        assert (r["kv_cached"], r["kv_recomputed"]) == (1, T)
        assert r["cache_numbers"] == 2 * L * H * T * d_k and r["cache_bytes"] == 4 * 2 * L * H * T * d_k
        assert all(K.shape == V.shape == (1, H, T, d_k) for K, V in stepper.gen.cache)  # the learner's cache
        assert f"cache: T = {T} positions" in stepper.readout.value
        assert f"{2 * L * H * T * d_k:,} numbers = {4 * 2 * L * H * T * d_k:,} bytes" in stepper.readout.value
        assert stepper.png not in pngs
        pngs.add(stepper.png)
    # the text is the model's own greedy continuation, recomputed without a cache
    assert stepper.gen.ids == gpt.generate(data.lm_ids(PROMPT[:-1], None, stepper.vocab), 4)
    assert r["tokens"][-1] == r["newest"] and "<b>step 3</b> (the newest token)" in stepper.readout.value
    assert gpt.block_step is stub  # the model's own block_step is put back after every call


def test_a_correct_decoder_block_step_agrees_with_recomputation_at_every_step(stepper):
    for _ in range(2):
        r = stepper.readouts
        assert r["yours"] and r["agrees"] is True and r["max_abs_diff"] < 1e-4
        assert r["next_token"] == r["reference_token"]
        assert "agrees with recomputation" in stepper.readout.value and stepper.learner_message == ""
        stepper.step_button.click()


def test_the_layer_selector_redraws_that_layers_cache_and_keeps_the_state(stepper):
    stepper.step_button.click()
    png, T = stepper.png, stepper.readouts["T"]
    stepper.layer.value = 1
    assert stepper.png != png and stepper.readouts["layer"] == 1 and stepper.readouts["T"] == T
    stepper.layer.value = 0
    assert stepper.png == png


def test_run_to_eos_stops_at_the_end_of_the_positional_table_and_says_so(learner, date_task):
    w = widgets.kv_cache_stepper(learner["decoder_block_step"], _gpt(date_task, max_len=14), date_task, PROMPT)
    w.run_button.click()  # 11 positions after the prompt: 3 steps fill the table of 14
    assert w.message == "" and w.readouts["step"] == 3 and w.readouts["T"] == 14 and w.readouts["agrees"]
    png, readouts = w.png, dict(w.readouts)
    w.step_button.click()
    assert "the positional table ends at 14 positions: Reset to start again" in w.message
    assert w.png == png and w.readouts == readouts
    w.run_button.click()
    assert "positional table ends" in w.message and w.png == png


def test_stepping_after_eos_is_refused_because_the_text_is_finished(learner, date_task):
    w = widgets.kv_cache_stepper(learner["decoder_block_step"], _gpt(date_task, writes_eos=True), date_task, PROMPT)
    assert w.readouts["newest"] == "<eos>" and w.readouts["finished"] and w.readouts["agrees"]
    png, readouts = w.png, dict(w.readouts)
    for button in (w.step_button, w.run_button):
        button.click()
        assert "the text is finished" in w.message and "Input not used" in w.notice.value
        assert w.png == png and w.readouts == readouts


@pytest.mark.parametrize("typed, says", [("", "the prompt is empty"), ("the zebra of may =", "never seen 'zebra'"),
                                         ("1 " * 31, "at most 30")])
def test_a_bad_prompt_says_what_is_allowed_and_keeps_the_last_good_state(stepper, typed, says):
    stepper.step_button.click()
    png, readouts, ids = stepper.png, dict(stepper.readouts), list(stepper.gen.ids)
    stepper.text.value = typed
    assert says in stepper.message
    assert stepper.png == png and stepper.readouts == readouts and stepper.gen.ids == ids
    assert stepper.text.value == PROMPT  # the box shows the prompt that is drawn
    stepper.step_button.click()  # and stepping goes on from there
    assert stepper.message == "" and stepper.readouts["T"] == readouts["T"] + 1


def test_a_prompt_longer_than_the_positional_table_is_refused(learner, date_task):
    w = widgets.kv_cache_stepper(learner["decoder_block_step"], _gpt(date_task, max_len=14), date_task, PROMPT)
    w.text.value = "monday, the 1st of february 2014 = 2 0"  # 14 tokens
    assert "needs 15 positions" in w.message and "ends at 14" in w.message and w.readouts["T"] == 11


def test_reset_and_a_new_prompt_empty_the_cache_and_feed_the_prompt_again(stepper):
    first = stepper.png
    stepper.step_button.click()
    stepper.step_button.click()
    stepper.reset_button.click()
    assert stepper.readouts["step"] == 0 and stepper.readouts["T"] == 11 and stepper.png == first
    stepper.text.value = "07/27/2013 ="  # <bos> 0 7 / 2 7 / 2 0 1 3 =
    r = stepper.readouts
    assert stepper.message == "" and (r["step"], r["fed"], r["T"], r["dots_cached"]) == (0, 12, 12, 12 * 13 // 2)
    assert all(K.shape[-2] == 12 for K, _ in stepper.gen.cache) and stepper.png != first
    stepper.reset_button.click()  # Reset starts the prompt now shown again
    assert stepper.readouts["T"] == 12 and stepper.text.value == "07/27/2013 ="


def test_the_stub_gets_a_friendly_message_and_the_ready_made_step_keeps_stepping(gpt, date_task):
    w = widgets.kv_cache_stepper(stub, gpt, date_task, PROMPT)
    assert "not implemented yet" in w.learner_message and "ready-made decoder_block_step" in w.learner_message
    assert "Your function" in w.notice.value and not w.readouts["yours"] and w.readouts["agrees"] is None
    png = w.png
    w.step_button.click()
    assert w.message == "" and w.readouts["T"] == 12 and w.png != png
    assert all(K.shape[-2] == 12 for K, _ in w.gen.ref_cache) and "not implemented yet" in w.learner_message
    assert gpt.block_step is stub


@pytest.mark.parametrize("garbage, says", [
    (lambda x_new, params, n_heads, cache=None: x_new, "must return the pair (out, (K, V))"),
    (lambda x_new, params, n_heads, cache=None: (x_new[:, :1, :1], (x_new, x_new)), "your out should be"),
    (lambda x_new, params, n_heads, cache=None: (x_new, None), "should be the pair (K, V)"),
    (lambda x_new, params, n_heads, cache=None: 1 / 0, "raised ZeroDivisionError"),
    ("decoder_block_step_caches_merged", "your cache's K should be a tensor of shape (B, H, T_past + T_new, d_k)"),
    ("decoder_block_step_ignores_cache", "your cache's K holds 1 position, but the grown cache must hold"),
    ("nan", "holds nan"),
])
def test_a_garbage_returning_step_gets_a_message_and_stepping_goes_on(learner, gpt, date_task, garbage, says):
    if garbage == "nan":
        def garbage(x_new, params, n_heads, cache=None):
            out, kv = learner["decoder_block_step"](x_new, params, n_heads, cache)
            return out * float("nan"), kv
    elif isinstance(garbage, str):
        garbage = _mistake(garbage)
    w = widgets.kv_cache_stepper(garbage, gpt, date_task, PROMPT)
    png = w.png
    w.step_button.click()  # a step that ignores the cache is fine on the prompt alone: it shows at step 1
    assert says in w.learner_message and "goes on with the course's ready-made" in w.learner_message
    assert not w.readouts["yours"] and "Your function" in w.notice.value
    assert w.readouts["T"] == 12 and w.png != png and gpt.block_step is stub
    w.step_button.click()
    assert w.readouts["T"] == 13 and w.message == ""


def test_a_wrong_cached_step_is_reported_as_disagreeing_with_recomputation(gpt, date_task):
    """The causal mask not shifted by T_past: the new query reads the first key only, so its output is wrong."""
    w = widgets.kv_cache_stepper(_mistake("decoder_block_step_mask_top_left"), gpt, date_task, PROMPT)
    assert w.readouts["agrees"] is True  # the prompt alone needs no cache, but the notebook's check fails it, and says:
    assert "the notebook's check fails your `decoder_block_step`" in w.learner_message
    assert "the causal mask is aligned at the top left" in w.learner_message  # the check's known mistake
    assert "but the notebook's check fails your decoder_block_step" in w.readout.value
    w.step_button.click()
    r = w.readouts
    assert r["yours"] and r["agrees"] is False and r["max_abs_diff"] > 1e-3
    assert "disagrees with recomputation without a cache, first at step 1" in w.learner_message
    assert "disagrees with recomputation" in w.readout.value


@pytest.mark.parametrize("step", ["right", "decoder_block_step_mask_top_left"])
def test_a_run_compares_every_step_as_stepping_one_at_a_time_does(step, learner, gpt, date_task, no_figures):
    """Run to <eos> recomputes the whole text once (the model is causal) rather than once a step: it finds the
    same tokens and the same verdict at every step as Step clicked again and again, and the work panels' span
    set at the prompt (the ready-made cache's run) is the run's length when the learner's step is right."""
    from learner.widgets import kv_cache as K
    fn = learner["decoder_block_step"] if step == "right" else _mistake(step)
    setup = K.Setup.of(fn, gpt, date_task)
    gen = K.start(setup, PROMPT)
    run = K.advance(setup, gen, None)
    one, verdicts = gen, []
    while not one.finished and one.T + 1 <= setup.max_len:
        one = K.advance(setup, one, 1)
        verdicts.append((one.compared["token"], one.compared["reference_token"], one.compared["agrees"]))
    assert one.ids == run.ids and one.first_disagreement == run.first_disagreement
    assert verdicts[-1] == (run.compared["token"], run.compared["reference_token"], run.compared["agrees"])
    assert run.compared["max_abs_diff"] == pytest.approx(one.compared["max_abs_diff"], abs=1e-5)
    if step == "right":
        assert all(agrees for *_, agrees in verdicts) and len(run.steps) - 1 == gen.horizon
    else:
        assert run.first_disagreement == 1 and not all(agrees for *_, agrees in verdicts)


def test_the_stepper_is_one_container_with_exactly_one_plot_image_and_no_pyplot_figure(stepper):
    before = plt.get_fignums()
    stepper.step_button.click()
    assert isinstance(stepper.ui, ipywidgets.VBox) and images_in(stepper.ui) == [stepper.image]
    assert "ck-kv-stepper" in stepper.ui._dom_classes and "ck-plot" in stepper.image._dom_classes
    assert "ck-readout" in stepper.readout._dom_classes and stepper.image.value == stepper.png
    assert plt.get_fignums() == before


# ====================================================================== the reference sides are PyTorch's built-ins
# The hand-written references the widgets had before they used torch's softmax and scaled_dot_product_attention,
# kept verbatim as the oracle that the new reference sides must agree with.
def _old_reference_softmax(x, temperature):
    z = x.to(torch.float64) / temperature
    if z.numel() == 0 or bool((z == -math.inf).all()):
        return torch.zeros_like(z)
    return torch.softmax(z, dim=-1)


def _old_reference_attention(Q, K, V, mask, scale=True, dim=-1):
    scores = Q.to(torch.float64) @ K.to(torch.float64).T
    if scale:
        scores = scores / math.sqrt(Q.shape[-1])
    scores = scores.masked_fill(~mask, -math.inf)
    dead = (~mask).all(dim=dim, keepdim=True)
    weights = torch.softmax(scores.masked_fill(dead, 0.0), dim=dim).masked_fill(dead, 0.0)
    return weights @ V.to(torch.float64), weights


EXTRA_LOGITS = [[-math.inf, -math.inf], [-math.inf], [0.0], [-math.inf, 5.0, -math.inf], [-1e4, 1e4, 0.0],
                [float(v) for v in range(-6, 6)]]


@pytest.mark.parametrize("tau", [1e-6, widgets.temperature.TAU_MIN, 0.1, 0.5, 1.0, 3.0, widgets.temperature.TAU_MAX,
                                 1e6])
def test_the_reference_softmax_agrees_with_the_hand_written_one(tau):
    """torch.softmax(x / τ) with the all -inf rule gives what the old hand-written softmax gave: on every preset,
    blocked entries, rows with nothing allowed, huge logits, and the extreme temperatures."""
    from learner.widgets.builtin import reference_probabilities
    for values in [v for _, v in widgets.PRESETS.values()] + EXTRA_LOGITS:
        x = torch.tensor(values, dtype=torch.float32)
        new, old = reference_probabilities(x, tau), _old_reference_softmax(x, tau)
        assert new.dtype == torch.float64 and not bool(new.isnan().any())
        assert torch.allclose(new, old, rtol=0, atol=1e-12), (values, new, old)
    blocked_rows = torch.tensor([[1.0, 2.0], [-math.inf, -math.inf]])  # a batch: only the dead row becomes zeros
    assert reference_probabilities(blocked_rows, tau)[1].tolist() == [0.0, 0.0]
    assert torch.allclose(reference_probabilities(blocked_rows, tau)[0], _old_reference_softmax(blocked_rows[0], tau))


def _widget_inputs():
    """(Q, K, V, mask) exactly as the mask explorer passes them to the learner, for every kind and padding."""
    seen = []

    def spy(Q, K, V, mask=None):
        seen.append((Q, K, V, mask))
        raise NotImplementedError()

    w = widgets.mask_explorer(spy, sentence="the cat sat on the mat", source="le chat est", kind="causal")
    for kind in widgets.KINDS:
        for padding in (0, 2):
            w.padding.value = padding
            w.kind.value = kind
    return seen


def test_the_reference_attention_agrees_with_the_hand_written_one():
    """scaled_dot_product_attention (out) and torch.softmax of the masked scaled scores (weights) give what the old
    hand-written attention gave on the widget's inputs, with fully masked rows giving zeros, never NaN; the known
    mistakes the widget names (no √d_k, softmax over the queries, zeroing after the softmax) agree too."""
    from learner.widgets.builtin import attention_weights, reference_masked_attention
    inputs = _widget_inputs()
    assert len({tuple(m.shape) for *_, m in inputs}) > 3  # every kind, with and without padding
    for Q, K, V, mask in inputs:
        dead = mask.clone()
        dead[0] = False   # a query that may attend to nothing
        dead[-1] = False
        for m in (mask, dead, torch.zeros_like(mask)):
            out, weights = reference_masked_attention(Q, K, V, m)
            old_out, old_weights = _old_reference_attention(Q, K, V, m)
            assert not bool(out.isnan().any()) and not bool(weights.isnan().any())
            assert torch.allclose(weights, old_weights, rtol=0, atol=1e-12)
            assert torch.allclose(out, old_out, rtol=0, atol=1e-12)
            assert out[~m.any(-1)].abs().sum() == 0 and weights[~m.any(-1)].abs().sum() == 0
            assert torch.allclose(attention_weights(Q, K, m, scale=False), _old_reference_attention(
                Q, K, V, m, scale=False)[1], rtol=0, atol=1e-12)
            assert torch.allclose(attention_weights(Q, K, m, dim=-2), _old_reference_attention(Q, K, V, m, dim=-2)[1],
                                  rtol=0, atol=1e-12)


def test_the_old_hand_written_references_are_gone():
    from learner.widgets import builtin, masks, temperature
    for module in (widgets, masks, builtin, temperature):
        assert not hasattr(module, "reference_softmax") and not hasattr(module, "reference_attention")


def test_the_widgets_call_the_learner_through_the_graders_public_call_only():
    """One guarded call of learner code (learner.check.call_learner) serves the checks and the widgets; the widgets use
    nothing of the grader but its public names (the guarded call, and the notebook's own check with its failure
    and its cells), and a hanging function is stopped in the widgets' words."""
    import ast
    import glob

    import learner.check
    from learner import widgets
    used = set()
    for path in glob.glob(os.path.join(os.path.dirname(widgets.__file__), "*.py")):
        tree = ast.parse(open(path).read())
        used |= {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "learner.check"
                 for a in n.names}
        used |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Attribute)
                 and n.value.attr == "check" and isinstance(n.value.value, ast.Name) and n.value.value.id == "learner"}
        assert not [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and (n.module or "") != "learner.check"
                    and (n.module or "").startswith("learner.check")], path
    assert used == {"call_learner", "check", "CheckFailed", "cells_of", "timeout_text"} and \
        used <= set(learner.check.__all__), used

    def forever(x, dim=-1, temperature=1.0):
        while True:
            pass
    value, message = widgets.base.call_for_widget(forever, "softmax", (torch.zeros(3),), time_limit=0.3)
    assert value is None and "did not finish within 0.3 s of computing and was stopped" in message


# ====================================================================== compute + readout, without a figure
@pytest.fixture
def no_figures(monkeypatch):
    """Any matplotlib Figure made during the test fails it: compute and readout must not draw."""
    from matplotlib.figure import Figure

    def refuse(*args, **kwargs):
        raise AssertionError("a figure was made")
    monkeypatch.setattr(Figure, "__init__", refuse)


def test_temperature_compute_and_readout(learner, no_figures):
    from learner.widgets import temperature as T
    words, values = T.PRESETS["next word (notebook 03, §5)"]
    rec = T.compute(learner["softmax"], values, words, 0.5)
    page = T.readout(rec)
    assert rec.learner_message == "" and rec.readouts["max_abs_diff"] < 1e-6
    assert "<b>τ = 0.5</b>" in page and "Your softmax matches the reference" in page
    assert f"log 5 = {math.log(5):.3f} (uniform)" in page and "1/5 = 0.200 (uniform) … 1 (argmax)" in page
    assert f"<b>{rec.readouts['entropy']:.3f}</b>" in page  # the learner's entropy, equal to the reference's

    rec = T.compute(stub, [-math.inf, -math.inf], ["a", "b"], 1.0)
    page = T.readout(rec)
    assert rec.learner is None and "not implemented yet" in rec.learner_message
    assert "<b>—</b>" in page and "matches" not in page and "no allowed entry: all zeros" in page

    _, _, (old, new) = ONE_BUG["03_softmax"]
    wrong = as_learner({"softmax": edited_source("softmax", old, new)})["softmax"]
    rec = T.compute(wrong, values, words, 2.0)
    assert "multiply by τ" in rec.learner_message and "matches" not in T.readout(rec)
    assert "Your function:</b> Your bars differ" in widgets.base.notice_html("", rec.learner_message)


@pytest.mark.parametrize("parse, typed, says", [
    ("parse_temperature", "0", "τ = 0 is not allowed"), ("parse_temperature", "-1", "must be positive"),
    ("parse_temperature", "100", "outside what this explorer draws"), ("parse_logits", "", "Type between 1 and 12"),
    ("parse_logits", "1, inf", "cannot be a logit"), ("parse_logits", "1, x", "'x' is not a number")])
def test_temperature_bad_input_says_what_is_allowed(parse, typed, says):
    from learner.widgets import temperature as T
    with pytest.raises(widgets.BadInput, match=re.escape(says)) as bad:
        getattr(T, parse)(typed)
    notice = widgets.base.notice_html(str(bad.value), "")
    assert "Input not used:</b>" in notice and says.replace("'", "&#x27;") in notice


def test_mask_compute_and_readout(learner, no_figures):
    from learner.widgets import masks as M
    W_ = M.make_projections(8, 0)
    rec = M.compute(learner["masked_attention"], W_, "causal", "a b c d", "x y z", 1, 3)
    page = M.readout(rec)
    assert rec.learner_message == "" and rec.readouts["blocked_pairs"] == 10
    assert "<b>blocked pairs: 10 of 25</b>" in page and "query i = 3 (d) may attend to 4 of 5 keys." in page
    assert "the causal rule already keeps every real query off the 1 pad keys" in page
    assert "Your masked_attention matches the reference" in page
    assert f"weights, reference: a {rec.reference[3, 0]:.2f}, b" in page

    rec = M.compute(stub, W_, "cross", "a b", "x y z", 2, 0)
    page = M.readout(rec)
    assert rec.learner is None and "not implemented yet" in rec.learner_message
    assert "weights, yours: <b>—</b>" in page and "Padding goes on the source here" in page
    assert "<b>blocked pairs: 4 of 10</b>" in page and "matches" not in page
    assert rec.reference_out.shape == (2, 8) and rec.reference[:, 3:].abs().sum() == 0


@pytest.mark.parametrize("kind, sentence, source, padding, says", [
    ("causal", "  ", "x", 0, "The sentence is empty"),
    ("cross", "a b", "", 0, "The source is empty"),
    ("prefix", "a b c d e f g h i j", "x y z", 0, "at most 12 positions per axis, and this gives 13"),
    ("padding", "a b c d e f g h i j", "", 3, "10 words + 3 pads")])
def test_mask_bad_input_says_what_is_allowed(kind, sentence, source, padding, says):
    from learner.widgets import masks as M
    with pytest.raises(widgets.BadInput, match=re.escape(says)):
        M.compute(stub, M.make_projections(8, 0), kind, sentence, source, padding, 0)


def test_cross_attention_compute_and_readout(date_task, no_figures):
    from learner.widgets import cross_attention as C
    model = _translator(date_task)
    rec = C.compute(model, date_task, "the 1st of february 2014", 1, -1)
    page = C.readout(rec)
    assert rec.problem == "" and rec.weights.shape == (rec.readouts["T_y"], 9)
    assert f"<b>translation:</b> {rec.translation} &nbsp; (T_x = 9, T_y = {rec.readouts['T_y']})" in page
    assert f"{rec.written[0]}→{rec.readouts['strongest'][0]}" in page
    with pytest.raises(widgets.BadInput, match="never seen 'zebra'"):
        C.compute(model, date_task, "the zebra of may", 1, -1)
    with pytest.raises(widgets.BadInput, match="type a date"):
        C.compute(model, date_task, "", 1, -1)
    rec = C.compute(_translator(date_task, decoder_block=stub), date_task, "07/27/2013", 1, -1)
    assert "not implemented yet" in rec.problem and rec.weights is None


def test_kv_cache_compute_and_readout(learner, gpt, date_task, no_figures):
    from learner.widgets import kv_cache as K
    from learner.widgets.kv_cache_view import learner_words, readout
    setup = K.Setup.of(learner["decoder_block_step"], gpt, date_task)
    gen = K.start(setup, PROMPT)
    readouts, page = readout(setup, gen, 0)
    assert (readouts["step"], readouts["T"], readouts["agrees"]) == (0, 11, True) and learner_words(setup, gen) == ""
    assert "<b>step 0</b> (the prompt, fed at once)" in page and "tokens fed this step: 11" in page
    assert "Your cached step agrees with recomputation" in page
    later = K.advance(setup, gen, 2)
    readouts, page = readout(setup, later, 1)
    assert gen.T == 11 and later.T == 13  # stepping makes a new record; the old one is unchanged
    assert "<b>step 2</b> (the newest token)" in page and "cache: T = 13 positions" in page
    assert "layer 1's K is (1, 2, 13, 16)" in page and readouts["dots_cached_total"] == 66 + 12 + 13

    with pytest.raises(widgets.BadInput, match="the prompt is empty"):
        K.start(setup, "")
    with pytest.raises(widgets.BadInput, match="never seen 'zebra'"):
        K.start(setup, "the zebra of may =")

    setup = K.Setup.of(stub, gpt, date_task)
    gen = K.start(setup, "07/27/2013")
    readouts, page = readout(setup, gen, 0)
    assert "not implemented yet" in learner_words(setup, gen) and "ready-made decoder_block_step" in gen.problem
    assert "Your decoder_block_step is not used" in page and not readouts["yours"]
    assert "The prompt does not end with '='" in page


# ====================================================================== sampling explorer (notebook 07)
@pytest.fixture
def sampler(learner, gpt, date_task):
    return widgets.sampling_explorer(learner["sample_next"], gpt, date_task, top_k_filter=learner["top_k_filter"],
                                     top_p_filter=learner["top_p_filter"])


def test_the_sampling_explorer_draws_eight_continuations_and_counts_the_iso_dates(sampler):
    r = sampler.readouts
    assert r["drawn"] == 8 and len(sampler.record.texts) == 8 and sampler.learner_message == ""
    assert r["valid_dates"] == sum(data.is_iso_date(t) for t in sampler.record.texts)
    assert abs(float(sampler.record.probs.sum()) - 1) < 1e-9 and r["kept"] == sampler.record.probs.numel()
    assert "valid ISO dates" in sampler.readout.value and len(images_in(sampler.ui)) == 1 and sampler.png


def test_top_k_1_makes_every_continuation_the_greedy_one_whatever_the_temperature(sampler):
    sampler.slider.value = 4.0
    sampler.top_k.value = 1
    r = sampler.readouts
    assert r["top_k"] == 1 and r["greedy_matches"] == 8 and r["kept"] == 1, sampler.record.texts
    assert all(t == sampler.record.greedy for t in sampler.record.texts)


def test_temperature_top_p_the_step_and_draw_again_each_change_what_is_shown(sampler):
    seen = {(sampler.png, sampler.readout.value)}
    sampler.slider.value = 0.2
    low = sampler.readouts["entropy"]
    seen.add((sampler.png, sampler.readout.value))
    sampler.slider.value = 4.0
    assert sampler.readouts["entropy"] > low  # a flatter distribution at the same step
    seen.add((sampler.png, sampler.readout.value))
    sampler.top_p.value = 0.5
    assert sampler.readouts["top_p"] == 0.5 and sampler.readouts["kept"] < sampler.record.probs.numel()
    seen.add((sampler.png, sampler.readout.value))
    sampler.step.value = 2
    assert sampler.readouts["step"] == 2
    seen.add((sampler.png, sampler.readout.value))
    texts = sampler.record.texts
    sampler.again.click()
    assert sampler.readouts["seed"] == 1 and sampler.record.texts != texts
    seen.add((sampler.png, sampler.readout.value))
    assert len(seen) == 6


@pytest.mark.parametrize("typed, says", [("the zebra of may", "never seen"), ("", "type a date")])
def test_a_bad_sampling_prompt_says_what_is_allowed_and_keeps_the_last_good_state(sampler, typed, says):
    before = (sampler.png, sampler.readout.value, sampler.record)
    sampler.source_box.value = typed
    assert says in sampler.message and (sampler.png, sampler.readout.value, sampler.record) == before


@pytest.mark.parametrize("fn, says", [(stub, "not implemented yet"),
                                      (lambda logits, seed, **kw: logits.argmax(-1).float(), "LongTensor"),
                                      (lambda logits, seed, **kw: logits.argmax(-1) + 10_000, "outside")])
def test_a_stub_or_garbage_sample_next_gets_a_message_and_draws_nothing(gpt, date_task, fn, says):
    w = widgets.sampling_explorer(fn, gpt, date_task)
    assert says in w.learner_message and w.record.texts == [] and w.readouts["drawn"] == 0
    assert "No continuation drawn" in w.readout.value and w.png


def test_the_iso_date_rule_needs_a_real_calendar_day():
    is_iso = data.is_iso_date
    assert is_iso("2014-02-01") and is_iso("2000-02-29")
    assert not any(map(is_iso, ["2014-02-30", "2001-02-29", "2014-2-01", "2014-02-01 ", "14-02-01", ""]))


# ====================================================================== never reassure wrongly (issue 25)
# Each widget shows the learner's function on a few inputs of its own (one 1-D row of logits, one (T_q, d_k)
# sentence, one text with B = 1). A function can be right there and wrong where the notebook's checks look
# (batches, other `dim` values, padding, float64). Before a widget says "matches" (or stays silent), it runs the
# notebook's visible checks; a function they fail gets the check's own message, and never "matches".
def _check_message(name, fn):
    """What the notebook's visible check cells say of ``fn`` (the first failing one's message)."""
    import learner.check
    for part in [c for c in learner.check.cells_of(name) if c in ("basic", "edge")]:
        try:
            learner.check.check(name, fn, part)
        except learner.check.CheckFailed as exc:
            return str(exc)
    raise AssertionError(f"the checks pass this {name}: it is not a wrong function")


def _softmax_over_dim_0(x, dim=-1, temperature=1.0):
    """Sums over dim 0 whatever `dim` says: on the explorer's 1-D logits it is right."""
    z = x / temperature
    e = torch.exp(z - z.max(dim=0, keepdim=True).values)
    return e / e.sum(dim=0, keepdim=True)


def test_a_softmax_over_dim_0_is_not_reported_as_matching_and_the_check_says_why(learner):
    w = widgets.temperature_explorer(_softmax_over_dim_0)
    assert w.learner is not None and w.readouts["max_abs_diff"] < 1e-6  # its bars are the reference's here
    assert "matches the reference" not in w.readout.value and "Your bars match here" in w.readout.value
    said = _check_message("softmax", _softmax_over_dim_0)
    assert "the softmax ran over the wrong axis" in said
    assert said in w.learner_message and "Your function" in w.notice.value  # the check's words, all of them
    w.slider.value = 0.3  # every move keeps saying it
    assert said in w.learner_message and "matches the reference" not in w.readout.value
    right = widgets.temperature_explorer(learner["softmax"])
    assert right.learner_message == "" and "matches the reference" in right.readout.value
    assert "passes the notebook's checks of its values" in right.readout.value


def _attention_2d_only(Q, K, V, mask=None):
    """K.T instead of K.transpose(-2, -1): right on one (T, d_k) sentence, wrong on the checks' batches."""
    scores = Q @ K.T / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return w @ V, w


def test_a_masked_attention_for_one_sentence_only_is_not_reported_as_matching(learner):
    w = widgets.mask_explorer(_attention_2d_only)
    assert w.learner is not None and w.readouts["max_abs_diff"] < 1e-6
    assert "matches the reference" not in w.readout.value and "Your weights match here" in w.readout.value
    assert _check_message("masked_attention", _attention_2d_only) in w.learner_message
    w.kind.value = "padding"
    assert "the notebook's check fails your `masked_attention`" in w.learner_message
    right = widgets.mask_explorer(learner["masked_attention"])
    assert right.learner_message == "" and "matches the reference" in right.readout.value


def test_a_sample_next_that_ignores_top_k_and_top_p_is_not_passed_in_silence(learner, gpt, date_task):
    def no_filters(logits, seed, temperature=1.0, top_k=None, top_p=None):
        g = torch.Generator(device=logits.device).manual_seed(seed)
        return torch.multinomial(torch.softmax(logits / temperature, -1), 1, generator=g)[:, 0]

    w = widgets.sampling_explorer(no_filters, gpt, date_task)
    assert w.readouts["drawn"] == 8  # the explorer can draw with it (filters off): it was silent before
    assert _check_message("sample_next", no_filters) in w.learner_message
    w.step.value = 1
    assert "the notebook's check fails your `sample_next`" in w.learner_message
    right = widgets.sampling_explorer(learner["sample_next"], gpt, date_task)
    assert right.learner_message == ""


def test_a_decoder_block_that_ignores_source_padding_is_not_passed_in_silence(learner, date_task):
    block = learner["encdec_decoder_block"]

    def no_source_padding(y, memory, tgt_valid, src_valid, params, n_heads):
        return block(y, memory, tgt_valid, None if src_valid is None else torch.ones_like(src_valid), params,
                     n_heads)

    v = widgets.cross_attention_viewer(_translator(date_task, decoder_block=no_source_padding), date_task)
    assert v.png and v.readouts["T_x"] == 9  # it translates the unpadded date the viewer feeds
    assert _check_message("encdec_decoder_block", no_source_padding) in v.learner_message
    v.head.value = 0
    assert "the notebook's check fails your `encdec_decoder_block`" in v.learner_message
    right = widgets.cross_attention_viewer(_translator(date_task, decoder_block=block), date_task)
    assert right.learner_message == ""


def test_a_cached_step_for_one_text_only_is_not_reported_as_agreeing_in_silence(learner, gpt, date_task):
    step = learner["decoder_block_step"]

    def first_row_only(x_new, params, n_heads, cache=None):
        """Computes row 0 of the batch and copies it: right for the stepper's one text (B = 1)."""
        B = x_new.shape[0]
        out, (K, V) = step(x_new[:1], params, n_heads, None if cache is None else (cache[0][:1], cache[1][:1]))
        return out.expand(B, -1, -1), (K.expand(B, -1, -1, -1), V.expand(B, -1, -1, -1))

    w = widgets.kv_cache_stepper(first_row_only, gpt, date_task, PROMPT)
    w.step_button.click()
    assert w.readouts["yours"] and w.readouts["agrees"] is True  # it agrees with recomputation on this text
    assert _check_message("decoder_block_step", first_row_only) in w.learner_message
    assert "but the notebook's check fails your decoder_block_step" in w.readout.value
    right = widgets.kv_cache_stepper(step, gpt, date_task, PROMPT)
    assert right.learner_message == "" and "agrees with recomputation without a cache" in right.readout.value


def test_the_check_runs_once_per_function_not_on_every_move(learner, monkeypatch):
    import importlib
    checks = importlib.import_module("learner.check")  # (``learner`` here is the notebook's namespace)
    calls = []
    real = checks.check
    monkeypatch.setattr(checks, "check", lambda *a, **k: calls.append(a[0]) or real(*a, **k))

    def fresh(x, dim=-1, temperature=1.0):  # a function the widgets have not checked yet
        return _softmax_over_dim_0(x, dim, temperature)
    w = widgets.temperature_explorer(fresh, temperature=0.7)
    n = len(calls)
    for tau in (0.2, 0.5, 2.0):
        w.slider.value = tau
    assert 1 <= n <= 2 and len(calls) == n and "wrong axis" in w.learner_message
