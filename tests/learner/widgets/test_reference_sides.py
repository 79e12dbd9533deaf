"""What the explorers say of the learner's function next to the reference, and what they draw for it (issue 62).

The sampling explorer (notebook 07) compares the learner's ``top_k_filter`` and ``top_p_filter`` with the
reference's rule (``learner.widgets.builtin``, PyTorch's built-ins) on the logits it draws, and names the wrong
function, its setting and the tokens, while it still shows what the learner's filters keep. The temperature
explorer (notebook 03) says *custom* once the logits typed are no preset's, and its uniform line, its legend and
its readout all count the finite logits, as the notebook's text says. Driven from Python, as a browser would.
"""
import json
import os
import re

import pytest
import torch

from coursekit import ROOT
from helpers import mistakes_as_learner
from learner import data, widgets
from learner.widgets import sampling as S
from learner.widgets import temperature as T

RED = "#7a1f1f"  # the colour of the message about the learner's function (base.notice_html)


# ====================================================================== the sampling explorer's filters
@pytest.fixture(scope="module")
def date_task():
    return data.make_date_task(seed=0)


@pytest.fixture(scope="module")
def gpt(date_task):
    """A small DecoderLM on the date task's vocabulary with seeded random weights (an untrained model: its
    next-token distributions are flat enough that top-k and top-p keep several tokens)."""
    from learner import blocks, transformer
    cfg = transformer.TransformerConfig(vocab_size=len(data.lm_vocab(date_task)), d_model=32, n_heads=2, d_ff=64,
                                        n_layers=2, max_len=48)
    return transformer.DecoderLM(cfg, blocks.decoder_block, blocks.embed_with_positions, seed=1)


def explorer(learner, gpt, task, top_k_filter=None, top_p_filter=None):
    return widgets.sampling_explorer(learner["sample_next"], gpt, task,
                                     top_k_filter=top_k_filter or learner["top_k_filter"],
                                     top_p_filter=top_p_filter or learner["top_p_filter"])


def step_logits(w):
    """The logits / τ the explorer shows (continuation 1 at its step), up to a constant, which neither filter
    sees: the log of the probabilities it drew."""
    return w.record.probs.log()


def finite(out):
    return int(torch.isfinite(out).sum())


def test_a_wrong_top_p_filter_is_named_with_its_setting_and_both_counts_and_its_output_still_drawn(
        learner, gpt, date_task):
    """The message says which function, how many tokens it keeps, how many the reference keeps, and at which p;
    the bars still show the learner's filter, with a red edge where the reference decides otherwise."""
    from solutions.decoder import top_p_filter as course_top_p
    wrong = mistakes_as_learner("decoder")["top_p_filter_drops_the_crossing_token"]
    w = explorer(learner, gpt, date_task, top_p_filter=wrong)
    w.top_p.value = 0.5
    z = step_logits(w)[None]
    yours, ref = finite(wrong(z, 0.5)), finite(course_top_p(z, 0.5))
    assert yours != ref  # the case shows the mistake
    said = (f"your `top_p_filter` keeps {yours} token{'s' * (yours != 1)} where the reference keeps {ref} at "
            f"p = 0.5")
    assert said in w.learner_message and "the token that crosses p was removed" in w.learner_message
    assert "top_k_filter" not in w.learner_message  # top-k is off: only the wrong function is named
    assert "Your function:" in w.notice.value and RED in w.notice.value and said in w.notice.value  # in red
    assert w.readouts["kept"] == yours and w.readouts["reference_kept"] == ref  # the learner's output is shown
    assert f"{yours} token{'s' * (yours != 1)} kept by the filters (the reference keeps {ref})" in w.readout.value
    assert "does not do what the reference does" in w.readout.value and "keeps what the reference" not in \
        w.readout.value
    assert w.readouts["drawn"] == 8 and w.png  # the continuations are still drawn
    edged = [bar for bar in w.plot.bars if bar.get_linewidth() > 0]
    assert edged and all(bar.get_edgecolor()[:3] == pytest.approx((0.753, 0.224, 0.169), abs=0.01) for bar in edged)
    assert "red edge" in " ".join(t.get_text() for t in w.plot.ax.get_legend().get_texts())


def test_a_wrong_top_k_filter_is_named_and_the_right_top_p_after_it_is_not_blamed(learner, gpt, date_task):
    """With both filters on, each is compared on the input it was given: a top-k that keeps k + 1 tokens is named,
    with the token it should have removed, and the top-p that follows it is not."""
    from solutions.decoder import top_k_filter as course_top_k
    wrong = mistakes_as_learner("decoder")["top_k_filter_one_too_many"]
    w = explorer(learner, gpt, date_task, top_k_filter=wrong)
    w.top_p.value = 0.95
    w.top_k.value = 3
    z = step_logits(w)[None]
    extra = (torch.isfinite(wrong(z, 3)) & ~torch.isfinite(course_top_k(z, 3)))[0].nonzero()[:, 0].tolist()
    assert len(extra) == 1
    said = (f"your `top_k_filter` keeps 4 tokens where the reference keeps 3 at k = 3: it keeps "
            f"{w.setup.inv[extra[0]]!r}, which the reference removes (it looks like k + 1 tokens were kept)")
    assert said in w.learner_message and "top_p_filter" not in w.learner_message
    w.top_k.value = 0  # top-k off: nothing is wrong any more
    assert w.learner_message == "" and "Your top_p_filter keeps what the reference keeps" in w.readout.value


def test_a_top_k_filter_that_sets_the_removed_logits_to_zero_is_told_so(learner, gpt, date_task):
    wrong = mistakes_as_learner("decoder")["top_k_filter_zero_not_inf"]
    w = explorer(learner, gpt, date_task, top_k_filter=wrong)
    w.top_k.value = 5
    V = w.record.probs.numel()
    assert f"your `top_k_filter` keeps {V} tokens where the reference keeps 5 at k = 5" in w.learner_message
    assert "the removed logits were set to 0 instead of -inf" in w.learner_message


def test_a_filter_that_keeps_the_right_tokens_but_changes_their_logits_is_told_so(learner, gpt, date_task):
    """Kept tokens must keep their logits (sample_next takes the softmax of what the filters return)."""
    from solutions.decoder import top_p_filter as course_top_p

    def halves(logits, p):
        return course_top_p(logits, p) / 2

    w = explorer(learner, gpt, date_task, top_p_filter=halves)
    w.top_p.value = 0.9
    assert "your `top_p_filter` keeps the tokens the reference keeps at p = 0.9, but changes their logits" in \
        w.learner_message
    assert w.readouts["kept"] == w.readouts["reference_kept"] and "does not do what the reference does" in \
        w.readout.value


def test_right_filters_are_said_to_keep_what_the_reference_keeps(learner, gpt, date_task):
    w = explorer(learner, gpt, date_task)
    w.top_k.value = 4
    w.top_p.value = 0.6
    assert w.learner_message == "" and w.readouts["kept"] == w.readouts["reference_kept"] >= 1
    assert torch.equal(w.record.kept, w.record.reference_kept)
    assert ("Your top_k_filter and top_p_filter keep what the reference keeps and pass the notebook's checks of their "
            "values" in w.readout.value)
    assert all(bar.get_linewidth() == 0 for bar in w.plot.bars)
    assert "red edge" not in " ".join(t.get_text() for t in w.plot.ax.get_legend().get_texts())


def test_the_reference_filters_keep_what_the_course_reference_keeps():
    """builtin.reference_top_k / reference_top_p (torch.topk, torch.sort) keep exactly the tokens the course's
    reference functions keep: ties at the k-th logit, equal probabilities, a row with -inf, k >= V, p = 1."""
    from learner.widgets.builtin import reference_top_k, reference_top_p
    from solutions.decoder import top_k_filter, top_p_filter
    g = torch.Generator().manual_seed(0)
    rows = [torch.randn(6, 11, generator=g, dtype=torch.float64),
            torch.randint(-2, 3, (6, 11), generator=g).double(),  # many ties
            torch.tensor([[1.0, float("-inf"), 1.0, 0.5, float("-inf"), 2.0]], dtype=torch.float64)]
    for z in rows:
        V = z.shape[-1]
        for k in (1, 2, 3, V - 1, V, V + 3):
            assert torch.equal(reference_top_k(z, k), torch.isfinite(top_k_filter(z, k))), (z, k)
        for p in (0.05, 0.3, 0.5, 0.75, 0.9, 0.999, 1.0):
            assert torch.equal(reference_top_p(z, p), torch.isfinite(top_p_filter(z, p))), (z, p)


# ====================================================================== the temperature explorer
@pytest.fixture
def temp(learner):
    return widgets.temperature_explorer(learner["softmax"])


def test_typed_logits_turn_the_preset_menu_to_custom_and_a_preset_brings_its_name_back(learner, temp):
    def custom(menu):
        return menu.label.startswith("custom") and not any(name in menu.label for name in widgets.PRESETS)

    first = temp.preset.value
    assert temp.preset.label == first in widgets.PRESETS
    temp.logits_box.value = "5, -inf, 1"
    assert temp.logits == [5.0, float("-inf"), 1.0] and custom(temp.preset)
    temp.preset.value = temp.preset.label  # choosing custom from the menu keeps the logits typed
    assert temp.logits == [5.0, float("-inf"), 1.0] and temp.message == ""
    temp.preset.value = "a close race"
    assert temp.preset.label == "a close race" and temp.logits == [1.0, 0.9, -0.5]
    temp.logits_box.value = "1, 0.9, -0.5"  # the preset's own logits typed again: still that preset
    assert temp.preset.label == "a close race"
    temp.logits_box.value = "1, 0.9, 0.5"  # the same words, other logits: custom
    assert custom(temp.preset) and temp.labels == ["yes", "no", "maybe"]
    temp.logits_box.value = "1, 2, x"  # refused: the menu stays as it was
    assert temp.message and custom(temp.preset) and temp.logits == [1.0, 0.9, 0.5]
    given = widgets.temperature_explorer(learner["softmax"], logits=[2.0, 1.0])
    assert custom(given.preset)  # logits given in code are no preset's either


def _dashed_line_and_its_words(rec):
    fig = T.draw(rec)
    ax = fig.axes[0]
    dashed = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    words = [t.get_text() for t in ax.get_legend().get_texts() if t.get_text().startswith("τ → ∞")]
    assert len(dashed) == 1 and len(words) == 1
    return set(dashed[0].get_ydata()), words[0]


@pytest.mark.parametrize("typed, n, k", [("3, 2, 1, 0.5, -1", 5, 5), ("1.2, -inf, 2, -inf, 0.3", 5, 3),
                                         ("-inf, 4, -inf, -inf", 4, 1)])
def test_the_uniform_line_its_legend_and_the_readout_count_the_finite_logits(temp, typed, n, k):
    """-inf stays -inf after dividing by τ, so it keeps probability 0 and τ → ∞ spreads the mass over the k finite
    logits: the line is at 1/k, and every word about it says 1/k and, with blocked entries, 'finite'."""
    temp.logits_box.value = typed
    height, words = _dashed_line_and_its_words(temp.record)
    assert len(height) == 1 and height.pop() == pytest.approx(1 / k)
    assert f"1/{k}" in words and re.search(r"1/\d+", words).group() == f"1/{k}"
    if k < n:
        assert f"{k} finite logit" in " ".join(words.split()) and "−∞ stays 0" in words
        assert f"1/{k} = {1 / k:.3f} (uniform over the {k} finite logit" in temp.readout.value
        assert f"log {k} = " in temp.readout.value and f"1/{n}" not in temp.readout.value
    else:
        assert words == f"τ → ∞: uniform, 1/{n}" and f"1/{n} = {1 / n:.3f} (uniform)" in temp.readout.value
    temp.tau_box.value = "20"  # the hottest τ drawn: the finite bars are near the line, the blocked ones at 0
    blocked = [v == float("-inf") for v in temp.logits]
    assert all(float(p) == 0 for p, b in zip(temp.reference, blocked) if b)
    assert all(abs(float(p) - 1 / k) < 0.1 for p, b in zip(temp.reference, blocked) if not b)


# ====================================================================== what the notebooks say of them
def _markdown(folder):
    nb = json.load(open(os.path.join(ROOT, "course", "source", folder, f"{folder}.ipynb")))
    return [" ".join("".join(c["source"]).split()) for c in nb["cells"] if c["cell_type"] == "markdown"]


def test_notebook_03_says_what_the_temperature_explorer_draws():
    text = next(t for t in _markdown("03_softmax") if t.startswith("### Try it: the temperature explorer"))
    assert "one over the number of *finite* logits" in text and "its legend says so" in text
    assert "preset menu then says *custom*" in text and T.CUSTOM.startswith("custom")  # the menu's own word
    assert "counted over the finite logits" in text


def test_notebook_07_says_what_the_sampling_explorer_compares():
    text = next(t for t in _markdown("07_decoder") if "The explorer below does the same" in t)
    assert "runs the reference's top-k and top-p on the same logits" in text
    assert "names the function, the setting and the tokens" in text and "a red edge marks each bar" in text
