"""The KV-cache stepper (notebook 09): generate with a KV cache one step at a time; the cache grows one column
per step and the work is counted. Every step is checked against recomputation without a cache.

compute → draw → readout:

* ``start(setup, prompt)`` and ``advance(setup, generation, n_steps)`` -> a new ``Generation`` (raise
  ``BadInput`` for a prompt or a step the stepper cannot take)
* ``kv_cache_view.draw(setup, generation, layer)`` -> a matplotlib Figure
* ``kv_cache_view.readout(setup, generation, layer, check)`` -> (readouts, the HTML under the plot)

A learner's step that agrees with recomputation on the one text shown (B = 1, no padding) is also run through
the notebook's visible checks of ``decoder_block_step`` (``base.check_words``) before the stepper stays silent;
the widget keeps one ``KVPlot`` (``kv_cache_view``) and changes its artists in place.
"""
from dataclasses import dataclass

import ipywidgets as W
import torch

from .. import blocks, data
from .base import BadInput, Explorer, call_for_widget, check_words, one_thread
from .kv_cache_view import KVPlot, learner_words, readout

MAX_PROMPT_TOKENS = 30
AGREE_TOLERANCE = 1e-3  # max |Δ logits| (float32) under which a cached step agrees with recomputation
FALLBACK = " The stepper goes on with the course's ready-made decoder_block_step (learner.blocks)."


# ====================================================================== the record
@dataclass
class Setup:
    """What stays fixed while stepping: the model, the learner's function and the model's sizes."""
    model: object
    fn: object          # the learner's decoder_block_step(x_new, params, n_heads, cache=None)
    vocab: dict         # token -> id
    inv: dict           # id -> token
    n_layers: int
    n_heads: int
    d_k: int
    max_len: int        # positions in the positional table

    @classmethod
    def of(cls, decoder_block_step, model, task):
        vocab = data.lm_vocab(task)
        cfg = model.cfg
        if len(vocab) != cfg.vocab_size:
            raise ValueError(f"the model has {cfg.vocab_size} tokens but the date task's vocabulary has "
                             f"{len(vocab)}: build it with vocab_size=len(data.lm_vocab(task))")
        return cls(model, decoder_block_step, vocab, {i: t for t, i in vocab.items()}, cfg.n_layers, cfg.n_heads,
                   cfg.d_model // cfg.n_heads, cfg.max_len)


class Generation:
    """One generated text and its caches: what the stepper shows, replaced whole after each good step.

    A cache is a list over layers of (K, V), each (1, H, T, d_k).
    """

    def __init__(self, prompt, n_prompt):
        self.prompt, self.n_prompt = prompt, n_prompt
        self.ids = []              # <bos>, the prompt, then the generated tokens; the last one is not fed yet
        self.cache = None          # the learner's per-layer [(K, V)], None when their function cannot be used
        self.ref_cache = None      # the same made by learner.blocks.decoder_block_step
        self.yours = True          # the learner's cache is the one stepping
        self.problem = ""          # why it is not (when it is not)
        self.steps = []            # per step: fed, T, dot products and projections with and without a cache
        self.compared = None       # the last step's comparison with recomputation without a cache
        self.first_disagreement = None
        self.scale = {}            # layer -> (|K| max, |V| max) at the prompt: one colour scale per text
        self.horizon = 0           # the steps after the prompt the ready-made cache takes to finish the text

    @property
    def T(self):
        """Positions in the cache: every token but the newest, which the next step feeds."""
        return len(self.ids) - 1

    @property
    def finished(self):
        return bool(self.ids) and len(self.ids) > self.n_prompt and self.ids[-1] == data.EOS_ID

    @property
    def shown_cache(self):
        """The cache drawn: the learner's, or the ready-made one when theirs cannot be used."""
        return self.cache if self.yours else self.ref_cache

    def copy(self):
        new = Generation(self.prompt, self.n_prompt)
        new.__dict__.update({k: (list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else v)
                             for k, v in self.__dict__.items()})
        return new


# ====================================================================== checking the learner's step
class _NotACacheStep(Exception):
    """What the learner's decoder_block_step returned cannot be used as (out, (K, V))."""


def _shape_or_type(t):
    return tuple(t.shape) if torch.is_tensor(t) else type(t).__name__


def step_problem(value, out_shape, cache_shape):
    """What is wrong with one return value of a decoder_block_step, in words, or ""."""
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        return (f"your `decoder_block_step` returned a {type(value).__name__}; it must return the pair "
                f"(out, (K, V))")
    out, cache = value
    if not torch.is_tensor(out) or tuple(out.shape) != out_shape:
        return f"your out should be a tensor of shape (B, T_new, D) = {out_shape}, got {_shape_or_type(out)}"
    if not isinstance(cache, (tuple, list)) or len(cache) != 2:
        what = f"a {type(cache).__name__} of {len(cache)}" if isinstance(cache, (tuple, list)) \
            else f"a {type(cache).__name__}"
        return f"your grown cache should be the pair (K, V), got {what}"
    for name, t in zip("KV", cache):
        if torch.is_tensor(t) and t.dim() == 4 and tuple(t.shape[:2]) + tuple(t.shape[3:]) == \
                cache_shape[:2] + cache_shape[3:] and t.shape[2] != cache_shape[2]:
            return (f"your cache's {name} holds {t.shape[2]} position{'s' * (t.shape[2] != 1)}, but the grown "
                    f"cache must hold the T_past cached ones and the T_new new ones: {cache_shape[2]}")
        if not torch.is_tensor(t) or tuple(t.shape) != cache_shape:
            return (f"your cache's {name} should be a tensor of shape (B, H, T_past + T_new, d_k) = {cache_shape}, "
                    f"got {_shape_or_type(t)}")
    for name, t in (("out", out), ("K", cache[0]), ("V", cache[1])):
        if not t.is_floating_point():
            return f"your {name} is {t.dtype}, not floats"
        if not bool(torch.isfinite(t).all()):
            bad = t[~torch.isfinite(t)].flatten()[0].item()
            return f"your {name} holds {bad}"
    return ""


def _checked(setup, problems):
    """The learner's function, with each layer's return value checked before the model uses it; a problem
    is appended to ``problems`` as (sentence, layer)."""
    fn, H, d_k = setup.fn, setup.n_heads, setup.d_k
    layer = [0]

    def step(x_new, params, n_heads, cache=None):
        B, T_new, D = x_new.shape
        T_past = 0 if cache is None else cache[0].shape[-2]
        value = fn(x_new, params, n_heads, cache)
        problem = step_problem(value, (B, T_new, D), (B, H, T_past + T_new, d_k))
        layer[0] += 1
        if problem:
            problems.append((problem, layer[0] - 1))
            raise _NotACacheStep(problem)
        return value[0], (value[1][0], value[1][1])
    return step


# ====================================================================== compute
def prompt_ids(setup, prompt):
    """<bos> and the prompt's token ids, or BadInput saying what is allowed."""
    words = data.tokenize(prompt)
    if not words:
        raise BadInput("the prompt is empty: type a date and '=', for example 'the 1st of february 2014 ='")
    if len(words) > MAX_PROMPT_TOKENS:
        raise BadInput(f"that prompt is {len(words)} tokens; the stepper draws prompts of at most "
                       f"{MAX_PROMPT_TOKENS}")
    if len(words) + 1 > setup.max_len:
        raise BadInput(f"that prompt needs {len(words) + 1} positions with <bos>, but the positional table "
                       f"ends at {setup.max_len}")
    unknown = sorted({w for w in words if w not in setup.vocab})
    if unknown:
        raise BadInput(f"the model has never seen {', '.join(repr(w) for w in unknown)}: use digits, "
                       f"punctuation, English month and weekday names, 'the', 'of', 'a', st/nd/rd/th, "
                       f"and '=' where the answer starts")
    return [data.BOS_ID] + [setup.vocab[w] for w in words]


def start(setup, prompt):
    """A new generation with empty caches, the prompt fed (step 0, the prefill)."""
    ids = prompt_ids(setup, prompt)
    gen = Generation(prompt, len(ids))
    gen.ids = ids
    _compare(setup, gen, [_feed(setup, gen, 0)])
    gen.horizon = _reference_steps(setup, gen)
    return gen


def _reference_steps(setup, gen):
    """How many steps after the prompt the model takes to finish ``gen`` greedily with the ready-made cache (to
    <eos> or the end of the positional table): what the picture's work panels span from the prompt on."""
    model, cache, token, T, steps = setup.model, gen.ref_cache, gen.ids[-1], gen.T, 0
    device = model.embed.E.device
    with torch.no_grad():
        while token != data.EOS_ID and T + 1 <= setup.max_len:
            logits, cache = _run_step(model, blocks.decoder_block_step, torch.tensor([[token]], device=device), cache)
            token, T, steps = int(logits[0, -1].argmax()), T + 1, steps + 1
    return steps


def advance(setup, gen, n_steps):
    """A copy of ``gen`` with the newest token fed ``n_steps`` times (None: until <eos> or the end of the
    positional table)."""
    if gen.finished:
        raise BadInput("the text is finished: the model wrote <eos>. Reset, or type a new prompt, to start "
                       "again")
    if gen.T + 1 > setup.max_len:
        raise BadInput(f"the positional table ends at {setup.max_len} positions: Reset to start again")
    gen = gen.copy()
    fed = []
    while (n_steps is None or len(fed) < n_steps) and not gen.finished and gen.T + 1 <= setup.max_len:
        fed.append(_feed(setup, gen, gen.T))
    _compare(setup, gen, fed)
    return gen


def _run_step(model, block_step, x, cache):
    """``model.step`` with ``block_step`` in the model's place for this call only."""
    kept = model.block_step
    model.block_step = block_step
    try:
        return model.step(x, cache)
    finally:
        model.block_step = kept


def _learner_step(setup, gen, x, step):
    """The learner's cached step on ``x`` (1, T_new): its logits (1, T_new, V) or None; on a problem ``gen``
    goes on with the ready-made cache and says why."""
    if not callable(setup.fn):
        _, problem = call_for_widget(setup.fn, "decoder_block_step", (), has_reference=False)
    else:
        problems = []
        value, problem = call_for_widget(_run_step, "decoder_block_step",
                                      (setup.model, _checked(setup, problems), x, gen.cache), has_reference=False)
        if problems:
            problem = f"{problems[0][0]} (layer {problems[0][1]}, step {step})."
    if problem:
        gen.yours, gen.cache = False, None
        gen.problem = problem + FALLBACK
        return None
    logits, gen.cache = value
    return logits


def _feed(setup, gen, T_past):
    """Feed positions T_past .. of ``gen.ids`` with both caches and append the next token; what the step gave,
    to compare with recomputation (``_compare``): (step, T_past, T_new, the learner's logits or None)."""
    model = setup.model
    fed = gen.ids[T_past:]
    x = torch.tensor([fed], device=model.embed.E.device)  # (1, T_new)
    ref_logits, ref_cache = _run_step(model, blocks.decoder_block_step, x, gen.ref_cache)
    step = len(gen.steps)
    yours = _learner_step(setup, gen, x, step) if gen.yours else None
    gen.ref_cache = ref_cache
    if yours is not None:
        yours = yours[0].detach().to("cpu", torch.float64)  # (T_new, V)
        token = int(yours[-1].argmax())
    else:
        token = int(ref_logits[0, -1].argmax())
    T_new, T = len(fed), len(gen.ids)
    gen.steps.append({"fed": T_new, "T": T, "dots_cached": T_new * T_past + T_new * (T_new + 1) // 2,
                      "dots_recomputed": T * (T + 1) // 2, "kv_cached": T_new, "kv_recomputed": T})
    if T_past == 0:
        gen.scale = {k: tuple(float(t.abs().max()) or 1.0 for t in kv) for k, kv in enumerate(gen.shown_cache)}
    gen.ids = gen.ids + [token]
    return step, T_past, T_new, yours


def _compare(setup, gen, fed):
    """Recompute the steps ``fed`` (``_feed``'s records) without a cache and compare: one forward of the model
    on the whole text fed, as the model is causal (its row t sees what the step that fed position t saw)."""
    if not fed:
        return
    model = setup.model
    with torch.no_grad():
        full = model(torch.tensor([gen.ids[:gen.T]], device=model.embed.E.device))[0].to("cpu", torch.float64)
    for step, T_past, T_new, yours in fed:
        rows = full[T_past:T_past + T_new]  # (T_new, V)
        reference_token = int(rows[-1].argmax())
        if yours is None:
            gen.compared = {"step": step, "max_abs_diff": None, "token": None, "reference_token": reference_token,
                            "agrees": None}
            continue
        diff = float((yours - rows).abs().max())
        token = int(yours[-1].argmax())
        agrees = diff <= AGREE_TOLERANCE and token == reference_token
        gen.compared = {"step": step, "max_abs_diff": diff, "token": token, "reference_token": reference_token,
                        "agrees": agrees}
        if not agrees and gen.first_disagreement is None:
            gen.first_disagreement = step


# ====================================================================== the widget
class KVCacheStepper(Explorer):
    """Generate with a KV cache one step at a time: the cache grows one column per step, the work is counted.

    The prompt is fed once (step 0, the prefill) through ``model.step`` with the
    learner's ``decoder_block_step``; each Step feeds only the newest token with
    the cache and appends the greedy next token. Every step is also recomputed
    without a cache (the model's own forward on the whole text), and the readout
    says whether the learner's cached step agrees. If the learner's function is
    the stub, raises or returns something that is not (out, (K, V)), the stepper
    says so and goes on with ``learner.blocks.decoder_block_step``.
    """

    name = "kv-stepper"

    def __init__(self, decoder_block_step, model, task, prompt):
        super().__init__()
        self.setup = setup = Setup.of(decoder_block_step, model, task)
        self.fn, self.model, self.task = decoder_block_step, model, task
        self.vocab = setup.vocab
        self.n_layers, self.n_heads, self.d_k, self.max_len = setup.n_layers, setup.n_heads, setup.d_k, setup.max_len

        self.text = W.Text(value=prompt, description="prompt", continuous_update=False,
                           placeholder="a date, then =", layout=W.Layout(width="420px"))
        self.text.add_class("ck-kv-text")
        self.step_button = W.Button(description="Step", button_style="primary", tooltip="feed the newest token")
        self.step_button.add_class("ck-kv-step")
        self.run_button = W.Button(description="Run to <eos>", tooltip="step until the model writes <eos>")
        self.run_button.add_class("ck-kv-run")
        self.reset_button = W.Button(description="Reset", tooltip="empty the cache and feed the prompt again")
        self.reset_button.add_class("ck-kv-reset")
        self.layer = W.Dropdown(options=[(f"layer {k}", k) for k in range(self.n_layers)], value=0,
                                description="cache of", layout=W.Layout(width="200px"))
        self.layer.add_class("ck-kv-layer")
        self._assemble(W.HBox([self.text, self.layer]), W.HBox([self.step_button, self.run_button,
                                                               self.reset_button]))

        self.gen = None
        self.plot = KVPlot(setup)
        with one_thread():
            self._start(prompt)  # a bad prompt raises BadInput, a ValueError
        self._watch(self.text, lambda v: self._start(v, revert=True))
        self._click(self.step_button, lambda: self._commit(advance(self.setup, self.gen, 1), self.layer.value))
        self._click(self.run_button, lambda: self._commit(advance(self.setup, self.gen, None), self.layer.value))
        self._click(self.reset_button, lambda: self._start(self.gen.prompt))
        self._watch(self.layer, lambda v: self._commit(self.gen, v))

    def _click(self, button, handler):
        button.on_click(lambda _: self._on_change(lambda _value: handler(), None))

    def _start(self, prompt, revert=False):
        """Empty the caches and feed the prompt (step 0, the prefill)."""
        try:
            gen = start(self.setup, prompt)
        except BadInput:
            if revert and self.gen is not None:  # the box goes back to the prompt that is drawn
                self._set(self.text, self.gen.prompt)
            raise
        self._commit(gen, self.layer.value)

    def _commit(self, gen, layer):
        """draw and readout of ``gen``; only then make it the stepper's state."""
        fig = self.plot.render(gen, layer)
        # agreeing with recomputation on this one text (B = 1): does it pass the checks' batches and masks too?
        check = check_words("decoder_block_step", self.fn) if gen.yours and gen.first_disagreement is None else ""
        readouts, readout_html = readout(self.setup, gen, layer, check)
        self.learner_message = learner_words(self.setup, gen) or check
        self._show(fig, readout_html)
        self.gen, self.readouts = gen, readouts
        if self.text.value != gen.prompt:
            self._set(self.text, gen.prompt)


def kv_cache_stepper(decoder_block_step, model, task, prompt="the 1st of february 2014 ="):
    """Step through greedy generation with a KV cache and watch the cache grow (notebook 09).

    Step 0 feeds the prompt at once (the prefill); each Step feeds only the newest
    token with the cache and appends the model's greedy next token. The picture
    shows one layer's cached keys and values (one column per position) and the
    query–key dot products each step costs with the cache (T) and recomputing
    everything (T(T+1)/2). Every step is checked against the model's own forward
    without a cache.

    Args:
        decoder_block_step: the learner's ``decoder_block_step(x_new, params, n_heads, cache=None)``.
        model: a trained ``learner.transformer.DecoderLM`` on the date task.
        task: the date task (``learner.data.make_date_task``), for its vocabulary (``data.lm_vocab``).
        prompt: the first text fed, e.g. a date followed by ``=``.
    """
    return KVCacheStepper(decoder_block_step, model, task, prompt)
