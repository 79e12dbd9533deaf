"""What the KV-cache stepper shows of a ``kv_cache.Generation``: the readout (numbers and HTML), the message
about the learner's step, and the picture (one layer's cached K and V, and the work counted).

Each function takes the stepper's ``Setup`` (the model's sizes, its vocabulary), a generation and the layer
shown; none changes them.
"""
import html
import itertools

import torch
from matplotlib.patches import Rectangle
from matplotlib.transforms import ScaledTranslation, blended_transform_factory

from .. import data
from .base import BLUE, GREY, Canvas, label, new_figure

STEP_HINT = ("a cached step must give what the decoder block gives on the whole text: check that the new query "
             "reads the cached keys and values as well as its own, and that the causal mask is shifted by T_past")


# ====================================================================== readout
def learner_words(setup, gen):
    """The message about the learner's decoder_block_step ("" while it agrees with recomputation)."""
    if not gen.yours:
        return gen.problem
    c = gen.compared
    if gen.first_disagreement is None:
        return ""
    now = "" if c["agrees"] else f" At step {c['step']} {_difference(setup, c)}."
    return (f"your `decoder_block_step` disagrees with recomputation without a cache, first at step "
            f"{gen.first_disagreement}.{now} {STEP_HINT[0].upper()}{STEP_HINT[1:]}.")


def _difference(setup, c):
    """How the learner's last step differs from recomputation (``c``: the generation's ``compared``)."""
    yours, ref = setup.inv[c["token"]], setup.inv[c["reference_token"]]
    return (f"your logits differ from recomputation's by up to {c['max_abs_diff']:.3g}: "
            + (f"your next token is {yours!r}, recomputation's {ref!r}" if yours != ref else
               f"the next token is the same ({yours!r}) this time"))


def numbers(setup, gen, layer):
    """The readouts: step, positions, cache size, dot products (this step and so far), tokens, agreement."""
    cache = gen.shown_cache
    last, c, T = gen.steps[-1], gen.compared, gen.T
    n_numbers = 2 * setup.n_layers * 1 * setup.n_heads * T * setup.d_k  # K and V per layer, head, position; B = 1
    totals = {k: sum(s[k] for s in gen.steps) for k in ("dots_cached", "dots_recomputed")}
    return {"step": len(gen.steps) - 1, "fed": last["fed"], "T": T, "layer": layer,
            "cache_numbers": n_numbers, "cache_bytes": n_numbers * cache[0][0].element_size(),
            "cache_shape": tuple(cache[layer][0].shape),
            "dots_cached": last["dots_cached"], "dots_recomputed": last["dots_recomputed"],
            "dots_cached_total": totals["dots_cached"], "dots_recomputed_total": totals["dots_recomputed"],
            "kv_cached": last["kv_cached"], "kv_recomputed": last["kv_recomputed"],
            "tokens": [setup.inv[i] for i in gen.ids], "newest": setup.inv[gen.ids[-1]],
            "text": data.to_text(gen.ids[gen.n_prompt:], setup.vocab), "finished": gen.finished, "yours": gen.yours,
            "next_token": setup.inv[gen.ids[-1]], "reference_token": setup.inv[c["reference_token"]],
            "max_abs_diff": c["max_abs_diff"], "agrees": c["agrees"]}


def readout(setup, gen, layer, check=""):
    """(the readouts, the HTML under the plot): the text so far, the step, the cache's size, the work with and
    without the cache, and whether the learner's cached step agrees with recomputation (``check``: what the
    notebook's visible checks say of it, "" when they pass)."""
    r = numbers(setup, gen, layer)
    last, c, T = gen.steps[-1], gen.compared, gen.T
    L, H, d_k = setup.n_layers, setup.n_heads, setup.d_k
    kind = str(gen.shown_cache[0][0].dtype).replace("torch.", "")

    def tok(i, t):
        word = html.escape(t)
        if i == len(gen.ids) - 1:
            return f'<span style="background:#ffe08a;font-weight:bold;padding:0 2px">{word}</span>'
        return f'<span style="color:#777">{word}</span>' if i < gen.n_prompt else f"<b>{word}</b>"

    step = r["step"]
    lines = [" ".join(tok(i, t) for i, t in enumerate(r["tokens"]))
             + (f" &nbsp; → <b>{html.escape(r['text'])}</b>" if r["text"] else ""),
             f"<b>step {step}</b> ({'the prompt, fed at once' if step == 0 else 'the newest token'}): "
             f"<b>tokens fed this step: {last['fed']}</b>; the highlighted token is fed at the next step.",
             f"<b>cache: T = {T} positions</b>: {L} layers × 2 (K and V) × {H} heads × {T} positions × "
             f"d_k {d_k} = <b>{r['cache_numbers']:,} numbers = {r['cache_bytes']:,} bytes</b> ({kind}); layer "
             f"{layer}'s K is {tuple(r['cache_shape'])}.",
             f"<b>query–key dot products</b> (per head and layer; × {L * H} in the model): this step "
             f"<b>{last['dots_cached']:,} with the cache</b> vs {last['dots_recomputed']:,} recomputing "
             f"everything; so far <b>{r['dots_cached_total']:,}</b> vs {r['dots_recomputed_total']:,}. "
             f"Keys and values projected this step: {last['kv_cached']} vs {last['kv_recomputed']} positions."]
    if c["agrees"] and check:
        lines.append(f'<span style="color:#7a1f1f">Your cached step agrees with recomputation on this text (the '
                     f'same next token {html.escape(repr(r["next_token"]))}, max |Δ logits| = '
                     f'{c["max_abs_diff"]:.1e}), but the notebook\'s check fails your decoder_block_step (see the '
                     f'message above).</span>')
    elif c["agrees"]:
        lines.append(f'<span style="color:#1a6b1a">Your cached step agrees with recomputation without a '
                     f'cache: the same next token {html.escape(repr(r["next_token"]))}, max |Δ logits| = '
                     f'{c["max_abs_diff"]:.1e}.</span>')
    elif c["agrees"] is False:
        lines.append(f'<span style="color:#7a1f1f">Your cached step disagrees with recomputation without a '
                     f'cache: {html.escape(_difference(setup, c))}.</span>')
    else:
        lines.append("Your decoder_block_step is not used (see the message above): the cache is the ready-made "
                     "one's.")
    if gen.finished:
        lines.append("The model wrote &lt;eos&gt;: the text is finished. Reset, or type a new prompt.")
    elif T + 1 > setup.max_len:
        lines.append(f"The positional table ends at {setup.max_len} positions: Reset to start again.")
    if data.tokenize(gen.prompt)[-1] != data.SEP:
        lines.append("The prompt does not end with '=': the model continues the date rather than translating "
                     "it.")
    return r, '<div class="ck-readout-body">' + "<br>".join(lines) + "</div>"


# ====================================================================== draw
class KVPlot:
    """The stepper's figure, kept for its life. Left: layer ``layer``'s cached K and V, one column of H × d_k
    numbers per position, the columns fed this step in red, the tokens under V. Right: the query–key dot products
    per step and so far, with and without the cache.

    Everything a step changes (the heatmaps, the tokens, the curves and their end numbers, the titles) is drawn
    over a kept background, so a Step or a Run draws those alone. The work panels' axes span the steps the model
    takes to finish the prompt with the ready-made cache (``Generation.horizon``), or every step the positional
    table leaves once a text runs past them (a learner's step that disagrees); only a new span draws the whole
    figure again."""

    def __init__(self, setup):
        self.setup = setup
        H, d_k, max_len = setup.n_heads, setup.d_k, setup.max_len
        fig = new_figure(13.0, 6.2, dpi=80)
        gs = fig.add_gridspec(2, 2, width_ratios=[1.75, 1.0], hspace=0.42, wspace=0.2, left=0.06, right=0.97,
                              top=0.92, bottom=0.13)
        self.canvas = canvas = Canvas(fig)
        self.cache_axes, self.images, self.boxes, self.T_texts = [], [], [], []
        for row in range(2):
            ax = fig.add_subplot(gs[row, 0])
            ax.set_facecolor("0.93")  # the positions the table still has room for
            empty = torch.full((H * d_k, max_len), float("nan")).numpy()
            self.images.append(ax.imshow(empty, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto",
                                         interpolation="nearest", extent=(-0.5, max_len - 0.5, H * d_k - 0.5, -0.5)))
            self.boxes.append(ax.add_patch(Rectangle((-0.5, -0.5), 1, H * d_k, fill=False, edgecolor="red",
                                                     lw=2.0)))
            separators = [ax.axhline(h * d_k - 0.5, color="0.3", lw=0.6) for h in range(1, H)]
            ax.set_xlim(-0.5, max_len - 0.5)
            ax.set_ylim(H * d_k - 0.5, -0.5)
            ax.set_xticks([])  # the tokens are written under V (self.tokens)
            ax.set_yticks([h * d_k + d_k / 2 - 0.5 for h in range(H)])
            ax.set_yticklabels([f"head {h}" for h in range(H)], fontsize=8)
            self.T_texts.append(ax.text(0, H * d_k / 2, "", va="center", fontsize=9, color="0.3"))
            canvas.animate(self.images[-1], *separators, self.boxes[-1], self.T_texts[-1], ax.title)
            self.cache_axes.append(ax)
        # the tokens, once, under V: where tick labels would be, one text per position of the table
        under = blended_transform_factory(ax.transData, ax.transAxes) + ScaledTranslation(0, -6 / 72,
                                                                                           fig.dpi_scale_trans)
        self.tokens = [canvas.animate(ax.text(i, 0, "", rotation=90, fontsize=7, ha="center", va="top",
                                              transform=under, clip_on=False)) for i in range(max_len)]
        self.work_axes, self.lines, self.ends = [], [], []
        for row, title in enumerate(("query–key dot products this step\n(per head and layer)",
                                     "so far (cumulative)")):
            ax = fig.add_subplot(gs[row, 1])
            recomputed, = ax.plot([], [], "s-", color=GREY, ms=4, label="recomputing everything: T(T+1)/2 a step")
            cached, = ax.plot([], [], "o-", color=BLUE, ms=4, label="with the cache: T a step")
            self.lines.append(canvas.animate(cached, recomputed))
            self.ends.append(canvas.animate(
                ax.annotate("", (0, 0), textcoords="offset points", xytext=(4, 0), fontsize=8, va="center",
                            color=BLUE),
                ax.annotate("", (0, 0), textcoords="offset points", xytext=(4, 0), fontsize=8, va="center",
                            color="0.35")))
            ax.xaxis.get_major_locator().set_params(integer=True)
            ax.set_title(title, fontsize=9)
            ax.set_xlabel("step (0 = the prompt)", fontsize=8)
            ax.tick_params(labelsize=8)
            if row == 0:
                ax.legend(loc="upper left", fontsize=7, frameon=False)
            self.work_axes.append(ax)
        self.horizon = None

    def render(self, gen, layer):
        """The ``Canvas`` showing ``gen``'s cache of ``layer``."""
        self._horizon(gen)
        self._work(gen)
        self._cache(gen, layer)
        return self.canvas

    def _horizon(self, gen):
        """The work panels' limits: for the prompt's length and the steps it may take (see the class)."""
        n, room = gen.n_prompt, self.setup.max_len - gen.n_prompt
        steps = gen.horizon if len(gen.steps) - 1 <= gen.horizon else room
        if self.horizon == (n, steps):
            return
        self.horizon = (n, steps)
        per_step = [(n + k) * (n + k + 1) // 2 for k in range(steps + 1)]  # recomputing everything, T = n + k
        for ax, top in zip(self.work_axes, (max(per_step), sum(per_step))):
            ax.set_xlim(-0.5, max(steps, 4) * 1.2 + 1)  # room for the numbers at the ends
            ax.set_ylim(0, top * 1.4 + 1)  # the top stays free for the legend
        self.canvas.invalidate()

    def _cache(self, gen, layer):
        setup = self.setup
        whose = "your" if gen.yours else "ready-made"
        H, d_k, T, max_len = setup.n_heads, setup.d_k, gen.T, setup.max_len
        T_new = gen.steps[-1]["fed"]
        for i, text in enumerate(self.tokens):
            text.set_text(label(setup.inv[gen.ids[i]], 6) if i < T else "")
        k_max, v_max = gen.scale.get(layer, (1.0, 1.0))
        K, V = gen.shown_cache[layer]  # each (1, H, T, d_k)
        for row, (name, t, top) in enumerate((("keys K", K, k_max), ("values V", V, v_max))):
            ax, image = self.cache_axes[row], self.images[row]
            grid = torch.full((H * d_k, max_len), float("nan"), dtype=torch.float64)
            grid[:, :T] = t[0].detach().to("cpu", torch.float64).permute(0, 2, 1).reshape(H * d_k, T)  # (H d_k, T)
            image.set_data(grid.numpy())
            image.set_clim(-top, top)
            self.boxes[row].set_x(T - T_new - 0.5)
            self.boxes[row].set_width(T_new)
            room = T < max_len - 4  # T written right of the cache, or left of the red box near the end
            text = self.T_texts[row]
            text.set_text(f"T = {T}")
            text.set_x(T - 0.3 if room else T - T_new - 0.7)
            text.set_horizontalalignment("left" if room else "right")
            ax.set_title(f"{whose} cache, layer {layer}: {name}, one column of {H} × {d_k} numbers per position "
                         f"(red: fed at step {len(gen.steps) - 1})", fontsize=9)

    def _work(self, gen):
        """Query–key dot products per step (top) and cumulated (bottom): with the cache and recomputing."""
        steps = list(range(len(gen.steps)))
        cached = [s["dots_cached"] for s in gen.steps]
        recomputed = [s["dots_recomputed"] for s in gen.steps]
        for (line_a, line_b), (end_a, end_b), (a, b) in zip(
                self.lines, self.ends,
                ((cached, recomputed), (list(itertools.accumulate(cached)), list(itertools.accumulate(recomputed))))):
            line_a.set_data(steps, a)
            line_b.set_data(steps, b)
            for end, values in ((end_a, a), (end_b, b)):
                end.xy = (steps[-1], values[-1])
                end.set_text(f"{values[-1]:,}")


def draw(setup, gen, layer):
    """The stepper's picture of ``gen`` and ``layer`` as a new Figure."""
    return KVPlot(setup).render(gen, layer).fig
