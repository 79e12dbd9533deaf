"""Pictures of the course's architectures, drawn with matplotlib from the sizes a notebook trains with.

Each function draws one architecture into a new figure and returns it; a notebook calls it in a read-only cell
before the equations, with the same sizes (T_x, T_y, D, d_h, H, d_k, d_ff) its models use, so a changed size shows
in the picture. The symbols are those of the notation page (``course/source/notation.md``): x_t and y_t tokens,
h_t an RNN's state, r a transformer's vectors, c the context, c_t a context per step, alpha_tj a weight, M the mask,
Q, K, V, D the width, H the heads, d_k a head's width, d_ff the feed-forward width. Nothing is downloaded and
nothing is computed here that a learner writes: these are pictures of the computations, not the computations.

* ``two_lengths``           the notes' 3 in, 2 out: a source and a target of different lengths (05)
* ``rnn_encoder_decoder``   the unrolled RNN encoder-decoder with one context c (05), or a context c_t per step (05b)
* ``transformer_block``     an encoder block with the bidirectional mask (06), a decoder block with the causal mask (07)
* ``encoder_decoder``       two stacks joined by cross-attention: Q from the decoder, K and V from the encoder (08)
* ``rope_rotation``         RoPE's rotation of one pair of coordinates by the position (07)
* ``kv_cache``              the cache growing by one position per generation step (09)
"""
import math

SRC = "#3aa6c2"      # the source side, the input (the notes' cyan)
TGT = "#e39b2d"      # the target side, the output (the notes' amber)
STATE = "#dcebf2"    # states and vectors
ATTN = "#8a63c0"     # attention
NORM = "#ececec"     # add & layer norm
FFN = "#cfe6c6"      # the feed-forward network
BLOCKED = "#bdbdbd"  # a blocked pair of a mask
INK = "#333333"


def _plt():
    import matplotlib.pyplot as plt
    return plt


def _show(fig):
    """Lay the figure out and, inside a notebook, show it as one PNG output: drawn here, so that it shows whatever
    matplotlib's backend is (grading runs a notebook with the Agg backend, which displays nothing by itself, and
    the feedback page keeps a cell's PNG outputs), and the figure is closed so that the inline backend does not show
    it a second time. Returns the figure."""
    fig.tight_layout()
    try:
        from IPython import get_ipython
    except ImportError:
        return fig
    shell = get_ipython()
    if shell is None or not hasattr(shell, "kernel"):
        return fig
    import io

    from IPython.display import Image, display
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    display(Image(data=buffer.getvalue(), format="png"))
    _plt().close(fig)
    return fig


def _canvas(width, height, xlim, ylim):
    fig, ax = _plt().subplots(figsize=(width, height))
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_axis_off()
    return fig, ax


def _box(ax, x, y, w, h, text, color, fontsize=10, text_color=INK, round_=True, lw=1.0, edge=INK, alpha=1.0):
    """A box centred on (x, y)."""
    from matplotlib.patches import FancyBboxPatch
    style = "round,pad=0.02,rounding_size=0.12" if round_ else "square,pad=0.0"
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle=style, facecolor=color, edgecolor=edge,
                                linewidth=lw, alpha=alpha))
    if text:
        ax.text(x, y, text, ha="center", va="center", fontsize=fontsize, color=text_color)


def _circle(ax, x, y, r, text, color, fontsize=10):
    from matplotlib.patches import Circle
    ax.add_patch(Circle((x, y), r, facecolor=color, edgecolor=INK, linewidth=1.0))
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize, color=INK)


def _arrow(ax, x0, y0, x1, y1, color=INK, lw=1.2, text=None, fontsize=9, style="-|>", alpha=1.0, rad=0.0,
           text_offset=(0.0, 0.0), ha="center", linestyle="-"):
    ax.annotate("", xy=(x1, y1), xytext=(x0, y0),
                arrowprops=dict(arrowstyle=style, color=color, lw=lw, alpha=alpha, shrinkA=0, shrinkB=0,
                                connectionstyle=f"arc3,rad={rad}", linestyle=linestyle))
    if text:
        ax.text((x0 + x1) / 2 + text_offset[0], (y0 + y1) / 2 + text_offset[1], text, fontsize=fontsize,
                color=color, ha=ha, va="center")


def _mask_grid(ax, x0, y0, cell, allowed, row_labels, col_labels, title, fontsize=8, rotate=0):
    """A T_q x T_k grid at (x0, y0) (top left): filled where a query (row) may attend to a key (column), a grey x
    where the pair is blocked."""
    from matplotlib.patches import Rectangle
    for i, row in enumerate(allowed):
        for j, ok in enumerate(row):
            x, y = x0 + j * cell, y0 - (i + 1) * cell
            ax.add_patch(Rectangle((x, y), cell, cell, facecolor=ATTN if ok else "white", alpha=0.55 if ok else 1,
                                   edgecolor="white" if ok else BLOCKED, linewidth=0.8))
            if not ok:
                ax.text(x + cell / 2, y + cell / 2, "x", ha="center", va="center", color=BLOCKED, fontsize=fontsize)
    for i, label in enumerate(row_labels):
        ax.text(x0 - 0.08, y0 - (i + 0.5) * cell, label, ha="right", va="center", fontsize=fontsize)
    for j, label in enumerate(col_labels):
        ax.text(x0 + (j + 0.5) * cell, y0 + 0.08, label, ha="center" if rotate in (0, 90) else "left", va="bottom",
                fontsize=fontsize, rotation=rotate)
    lift = 0.55 + (0.12 * max(len(str(c)) for c in col_labels) if rotate else 0.0)
    ax.text(x0 + len(col_labels) * cell / 2, y0 + lift, title, ha="center", va="bottom", fontsize=fontsize + 1)


def _check_sizes(**sizes):
    for name, value in sizes.items():
        if not (isinstance(value, int) and value >= 1):
            raise ValueError(f"{name} must be a whole number >= 1 to be drawn, got {value!r}")


# ------------------------------------------------------------------ 05: 3 in, 2 out
def two_lengths(source=("I", "love", "AI"), target=("J'aime", "l'IA"), title=None):
    """The notes' first picture: a source of T_x tokens in, a target of T_y tokens out, T_x != T_y in general.

    Args:
        source, target: the tokens of each row, in order (the notes' "I love AI" -> "J'aime l'IA" by default).
    """
    source, target = list(source), list(target)
    if not source or not target:
        raise ValueError("two_lengths draws a source and a target of at least one token each")
    n = max(len(source), len(target))
    w = 1.25
    fig, ax = _canvas(1.0 + 1.45 * n, 3.0, (-0.9, n * 1.45), (-0.3, 3.0))
    for row, tokens, color, symbol, y in ((0, source, SRC, "x", 2.2), (1, target, TGT, "y", 0.55)):
        for t, token in enumerate(tokens, start=1):
            x = (t - 1) * 1.45 + 0.6
            _box(ax, x, y, w, 0.6, token, color, fontsize=11, text_color="white")
            ax.text(x, y - 0.45 if row == 0 else y - 0.45, f"${symbol}_{{{t}}}$", ha="center", va="center",
                    fontsize=11)
    ax.text(-0.55, 2.2, "source", ha="right", va="center", fontsize=10, color=SRC)
    ax.text(-0.55, 0.55, "target", ha="right", va="center", fontsize=10, color=TGT)
    ax.annotate("", xy=(n * 1.45 - 0.6, 0.95), xytext=(n * 1.45 - 0.6, 1.8),
                arrowprops=dict(arrowstyle="-|>", color=INK, lw=2))
    ax.text(n * 1.45 - 0.5, 1.37, f"$T_x = {len(source)}$ in\n$T_y = {len(target)}$ out", ha="left", va="center",
            fontsize=11)
    ax.set_title(title or f"{len(source)} in, {len(target)} out: the two sequences need not have one length",
                 fontsize=11)
    return _show(fig)


# ------------------------------------------------------------------ 05 and 05b: the unrolled RNN
def rnn_encoder_decoder(source, target, D, d_h, attention=False, step=None, weights=None, title=None):
    """The RNN encoder-decoder unrolled over one sentence pair.

    The encoder reads x_1 .. x_{T_x} (embedded in D numbers) into states h_1 .. h_{T_x} of d_h numbers, one rule
    reused at every step. Without attention (notebook 05) its last state is the one context c = h_{T_x}, the
    decoder's first state; with ``attention`` (notebook 05b) the decoder blends every h_j into a context c_t of its
    own at each step t, with weights alpha_tj: lines from every encoder state to the context of output step
    ``step`` (default the middle one), as thick as ``weights`` (T_x numbers) say, even when not given.

    Args:
        source: the source tokens x_1 .. x_{T_x}.
        target: the target tokens y_1 .. y_{T_y} (the last usually <eos>).
        D, d_h: the embedding width and the hidden width the notebook trains with.
    """
    source, target = list(source), list(target)
    _check_sizes(D=D, d_h=d_h, T_x=len(source), T_y=len(target))
    T_x, T_y = len(source), len(target)
    gap = 1.2
    xs_enc = [k * gap for k in range(T_x)]
    x_c = xs_enc[-1] + gap * (1.1 if not attention else 0.6)
    xs_dec = [x_c + (0.0 if attention else gap * 0.9) + (k + 1) * gap for k in range(T_y)]
    right = xs_dec[-1] + 0.9
    top = 4.9 if attention else 3.9
    fig, ax = _canvas(min(1.3 + 0.95 * (right + 1.0), 17), 4.7 if attention else 3.8, (-1.0, right), (-1.0, top))
    y_tok, y_state, y_out = 0.0, 1.7, (4.35 if attention else 3.35)
    r = 0.38
    # encoder
    for t, (x, token) in enumerate(zip(xs_enc, source), start=1):
        _box(ax, x, y_tok, 1.0, 0.5, token, SRC, fontsize=9, text_color="white")
        _arrow(ax, x, y_tok + 0.28, x, y_state - r - 0.02, text=f"$e(x_{{{t}}})$" if t == 1 else None,
               text_offset=(0.08, 0), ha="left")
        _circle(ax, x, y_state, r, f"$h_{{{t}}}$", STATE)
        if t > 1:
            _arrow(ax, xs_enc[t - 2] + r, y_state, x - r, y_state)
    ax.text(xs_enc[0] - r - 0.12, y_state + 0.05, "$h_0 = 0$", ha="right", va="center", fontsize=9)
    ax.text((xs_enc[0] + xs_enc[-1]) / 2, y_tok - 0.45, "encoder: $h_t = \\tanh(W_h h_{t-1} + W_x e(x_t) + b)$",
            ha="center", va="top", fontsize=9, color=SRC)
    # decoder: reads <bos>, y_1 .. y_{T_y - 1}; writes y_1 .. y_{T_y}
    reads = ["<bos>"] + target[:-1]
    for t, (x, read, write) in enumerate(zip(xs_dec, reads, target), start=1):
        _box(ax, x, y_tok, 1.0, 0.5, read, TGT, fontsize=9, text_color="white")
        _arrow(ax, x, y_tok + 0.28, x, y_state - r - 0.02)
        _circle(ax, x, y_state, r, f"$h^{{dec}}_{{{t}}}$", STATE, fontsize=9)
        _arrow(ax, x, y_state + r + 0.02, x, y_out - 0.27, text="softmax" if t == 1 and not attention else None,
               text_offset=(-0.08, 0), fontsize=8, ha="right")
        _box(ax, x, y_out, 1.0, 0.5, write, TGT, fontsize=9, text_color="white", alpha=0.85)
        if t > 1:
            _arrow(ax, xs_dec[t - 2] + r, y_state, x - r, y_state)
            if not attention:  # with attention the gap holds the step's context (the caption says it reads y_t back)
                _arrow(ax, xs_dec[t - 2] + 0.3, y_out - 0.25, x - 0.45, y_tok + 0.25, color=TGT, lw=0.8,
                       alpha=0.6, style="-|>", rad=0.0)
    ax.text((xs_dec[0] + xs_dec[-1]) / 2, y_tok - 0.45, "decoder: writes $y_t$ (top), reads it back at step $t+1$",
            ha="center", va="top", fontsize=9, color=TGT)
    if not attention:
        _box(ax, x_c, y_state, 0.75, 0.5, "$\\mathbf{c}$", TGT, fontsize=12)
        _arrow(ax, xs_enc[-1] + r, y_state, x_c - 0.38, y_state, color=TGT, lw=2)
        _arrow(ax, x_c + 0.38, y_state, xs_dec[0] - r, y_state, color=TGT, lw=2)
        ax.text(x_c, y_state - 0.55, f"$\\mathbf{{c}} = h_{{{T_x}}}$\n$\\in \\mathbb{{R}}^{{{d_h}}}$", ha="center",
                va="top", fontsize=9)
        ax.text((x_c + xs_dec[0]) / 2, y_state + 0.18, "$h^{dec}_0 = \\mathbf{c}$", ha="center", va="bottom",
                fontsize=8)
        what = (f"one context vector $\\mathbf{{c}}$ of $d_h = {d_h}$ numbers carries all $T_x = {T_x}$ source "
                f"tokens; tokens embedded in $D = {D}$")
    else:
        t0 = (T_y - 1) // 2 if step is None else step
        if not 0 <= t0 < T_y:
            raise ValueError(f"step must be an output step 0 .. {T_y - 1}, got {step}")
        alpha = [1.0 / T_x] * T_x if weights is None else [float(a) for a in weights]
        if len(alpha) != T_x:
            raise ValueError(f"weights must hold one alpha per source token ({T_x}), got {len(alpha)}")
        _arrow(ax, xs_enc[-1] + r, y_state, xs_dec[0] - r, y_state, color=INK, lw=1.0)
        ax.text((xs_enc[-1] + xs_dec[0]) / 2, y_state - 0.25, "$h^{dec}_0 = h_{T_x}$", ha="center", va="top",
                fontsize=8)
        y_ct = y_state + 1.15
        x_prev, y_prev = (xs_dec[t0 - 1], y_state) if t0 else (xs_enc[-1], y_state)  # h^dec_{t-1}: the query
        for t, x in enumerate(xs_dec):
            if t == t0:
                cx = x + 0.5
                _box(ax, cx, y_ct, 0.6, 0.42, f"$\\mathbf{{c}}_{{{t + 1}}}$", ATTN, fontsize=10, text_color="white")
                for j, (xe, a) in enumerate(zip(xs_enc, alpha), start=1):  # every h_j, weighted by alpha_tj
                    _arrow(ax, xe + 0.1, y_state + r, cx - 0.3, y_ct, color=ATTN, lw=0.6 + 5 * a,
                           alpha=0.35 + 0.6 * min(1.0, a * T_x / 2), rad=-0.1)
                # the previous decoder state scores every h_j: it chooses the weights
                _arrow(ax, x_prev + r * 0.7, y_prev + r * 0.7, cx - 0.1, y_ct - 0.22, color=ATTN, lw=1.4,
                       linestyle="--")
                _arrow(ax, cx - 0.15, y_ct - 0.22, x + 0.2, y_state + r * 0.8, color=ATTN, lw=1.5)  # into the update
                _arrow(ax, cx, y_ct + 0.22, x + 0.35, y_out - 0.26, color=ATTN, lw=1.5)  # and into the output layer
            else:
                ax.text(x + 0.5, y_ct + 0.55, f"$\\mathbf{{c}}_{{{t + 1}}}$", ha="center", va="center", fontsize=8,
                        color=ATTN, alpha=0.6)
        what = (f"a context per output step: $\\mathbf{{c}}_{{{t0 + 1}}} = \\sum_j \\alpha_{{{t0 + 1}j}} h_j$ over all "
                f"$T_x = {T_x}$ encoder states, weights chosen by $h^{{dec}}_{{{t0}}}$ (dashed);\n"
                f"it enters the update and the output layer; $D = {D}$, $d_h = {d_h}$")
    ax.set_title(title or what, fontsize=10)
    return _show(fig)


# ------------------------------------------------------------------ 06, 07: one transformer block and its mask
def transformer_block(kind, T, d_model, n_heads, d_ff, tokens=None, title=None, prefix=0):
    """One post-norm transformer block beside the mask of its self-attention.

    ``kind`` "encoder" (notebook 06): self-attention with the bidirectional mask, every token reads every token.
    ``kind`` "decoder" (notebook 07): the same block with the causal mask, query i reads keys j <= i.
    ``kind`` "prefix" (notebook 10): the causal mask with the first ``prefix`` keys open to every query.
    The sizes are the notebook's: D = ``d_model``, H = ``n_heads`` heads of d_k = D / H, d_ff = ``d_ff``; T the
    length of the mask drawn (``tokens`` its labels).
    """
    if kind not in ("encoder", "decoder", "prefix"):
        raise ValueError(f"kind must be 'encoder', 'decoder' or 'prefix', got {kind!r}")
    if kind == "prefix" and not 0 < prefix <= T:
        raise ValueError(f"a prefix-LM mask needs a prefix of 1 .. T={T} tokens, got {prefix}")
    _check_sizes(T=T, d_model=d_model, n_heads=n_heads, d_ff=d_ff)
    if d_model % n_heads:
        raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
    d_k = d_model // n_heads
    labels = list(tokens) if tokens is not None else [f"$x_{{{i}}}$" for i in range(T)]
    if len(labels) != T:
        raise ValueError(f"tokens must hold T={T} labels, got {len(labels)}")
    fig, ax = _canvas(10.5, 5.6, (-0.5, 10.5), (-0.4, 6.6))
    cx, w = 2.3, 3.4
    layers = [(0.55, f"input $r$: $T \\times D$ = {T} $\\times$ {d_model}", STATE),
              (1.6, f"multi-head self-attention\n$H = {n_heads}$ heads of $d_k = D / H = {d_k}$", ATTN),
              (2.6, "add & LayerNorm$_1$: $r' = \\mathrm{LN}_1(r + \\mathrm{MHA}(r))$", NORM),
              (3.65, f"feed-forward, each position alone\n$D = {d_model} \\to d_{{ff}} = {d_ff} \\to D$ (ReLU)", FFN),
              (4.65, "add & LayerNorm$_2$: $\\mathrm{LN}_2(r' + \\mathrm{FFN}(r'))$", NORM),
              (5.7, f"output: $T \\times D$ = {T} $\\times$ {d_model}", STATE)]
    for y, text, color in layers:
        _box(ax, cx, y, w, 0.62 if "\n" in text else 0.5, text, color, fontsize=8.5,
             text_color="white" if color == ATTN else INK)
    for (y0, _, _), (y1, _, _) in zip(layers, layers[1:]):
        _arrow(ax, cx, y0 + 0.31, cx, y1 - 0.31)
    # residual paths
    for y_from, y_to in ((0.55, 2.6), (2.6, 4.65)):
        ax.annotate("", xy=(cx - w / 2, y_to), xytext=(cx - w / 2, y_from),
                    arrowprops=dict(arrowstyle="-|>", color="0.45", lw=1.0, shrinkA=0, shrinkB=0,
                                    connectionstyle="bar,fraction=-0.12"))
    ax.text(cx - w / 2 - 0.45, 1.6, "residual", rotation=90, fontsize=8, color="0.45", va="center", ha="center")
    ax.text(cx - w / 2 - 0.45, 3.65, "residual", rotation=90, fontsize=8, color="0.45", va="center", ha="center")
    ax.text(cx + w / 2 + 0.1, 1.6, "$Q, K, V$ from $r$", fontsize=8, va="center", color=ATTN)
    # the mask
    allowed = [[kind == "encoder" or j <= i or j < prefix for j in range(T)] for i in range(T)]
    cell = min(0.55, 3.9 / T)
    x0 = 6.4
    name = {"encoder": "bidirectional mask: every $i$ reads every $j$",
            "decoder": "causal mask: query $i$ reads keys $j \\leq i$",
            "prefix": f"prefix-LM mask: keys $j < {prefix}$ open, then causal"}[kind]
    _mask_grid(ax, x0, 5.3, cell, allowed, labels, labels, name, rotate=90 if T > 8 else 0)
    note = "none blocked: $M_{ij} = 0$ everywhere" if kind == "encoder" else "x: blocked, $M_{ij} = -\\infty$"
    ax.text(x0 + T * cell / 2, 5.3 - T * cell - 0.45, f"rows: queries $i$; columns: keys $j$; {note}",
            ha="center", va="top", fontsize=8)
    ax.set_title(title or f"the {kind} block (post-norm), as notebook "
                 f"{ {'encoder': '06', 'decoder': '07', 'prefix': '10'}[kind]} trains it",
                 fontsize=11)
    return _show(fig)


# ------------------------------------------------------------------ 08: encoder-decoder and cross-attention
def encoder_decoder(source, target, d_model, n_heads, d_ff, n_enc_layers, n_dec_layers, title=None):
    """The transformer encoder-decoder: an encoder stack reads the source into a memory (T_x x D); every decoder
    block has causal self-attention, then cross-attention whose queries come from the decoder and whose keys and
    values come from the memory, then the feed-forward network. Beside it the cross-attention grid, T_y x T_x:
    no causal mask, every target position may read every source token.
    """
    source, target = list(source), list(target)
    _check_sizes(d_model=d_model, n_heads=n_heads, d_ff=d_ff, n_enc_layers=n_enc_layers, n_dec_layers=n_dec_layers,
                 T_x=len(source), T_y=len(target))
    T_x, T_y = len(source), len(target)
    d_k = d_model // n_heads
    fig, ax = _canvas(12.5, 6.4, (-0.6, 12.8), (-0.9, 7.2))
    ex, dx, w = 1.7, 6.1, 3.0
    # encoder stack
    _box(ax, ex, 0.0, w, 0.5, f"source $x_1 .. x_{{{T_x}}}$ + positions", SRC, fontsize=8.5, text_color="white")
    ys = [1.0 + k * 1.0 for k in range(n_enc_layers)]
    for k, y in enumerate(ys, start=1):
        _box(ax, ex, y, w, 0.62, f"encoder block {k}: self-attention (bidirectional)\n+ FFN, each add & LayerNorm",
             STATE, fontsize=8)
    for y0, y1 in zip([0.0] + ys, ys):
        _arrow(ax, ex, y0 + 0.3, ex, y1 - 0.32)
    y_mem = ys[-1] + 1.1
    _box(ax, ex, y_mem, w, 0.62, f"memory: $T_x \\times D$ = {T_x} $\\times$ {d_model}\n"
         "the $K, V$ of every cross-attention", SRC, fontsize=8.5, text_color="white")
    _arrow(ax, ex, ys[-1] + 0.32, ex, y_mem - 0.28)
    # decoder stack
    _box(ax, dx, 0.0, w + 0.6, 0.5, f"target so far: <bos> $y_1 .. y_{{{T_y - 1}}}$ + positions", TGT, fontsize=8.5,
         text_color="white")
    y = 0.65
    top_of = []
    below = 0.25  # the top of what feeds the next sub-layer: the target's box, then each sub-layer's
    for k in range(1, n_dec_layers + 1):
        parts = [("causal self-attention, $Q, K, V$ from the decoder", STATE),
                 ("cross-attention: $Q$ decoder, $K, V$ memory", ATTN),
                 (f"FFN $D \\to d_{{ff}} = {d_ff} \\to D$", FFN)]
        _box(ax, dx, y + 0.72 * len(parts) / 2 + 0.05, w + 0.9, 0.72 * len(parts) + 0.25, "", "white", lw=1.0)
        ax.text(dx + (w + 0.9) / 2 + 0.08, y + 0.72 * len(parts) / 2 + 0.05, f"decoder\nblock {k}", fontsize=8,
                va="center")
        for m, (text, color) in enumerate(parts):
            yy = y + 0.3 + 0.72 * m
            _box(ax, dx, yy, w + 0.75, 0.5, text + " + add & LN", color, fontsize=7.5,
                 text_color="white" if color == ATTN else INK)
            _arrow(ax, dx, below, dx, yy - 0.26)  # every sub-layer reads the one below it
            below = yy + 0.25
            if m == 1:
                _arrow(ax, ex + w / 2, y_mem, dx - (w + 0.6) / 2, yy, color=SRC, lw=1.6, rad=-0.15)
                top_of.append(yy)
        y += 0.72 * len(parts) + 0.45
    y_out = y + 0.1
    _box(ax, dx, y_out, w + 0.6, 0.5, f"logits: $T_y \\times V$; row $t$ predicts $y_{{t+1}}$", TGT, fontsize=8.5,
         text_color="white")
    _arrow(ax, dx, below, dx, y_out - 0.27)
    # the cross-attention grid
    cell = min(0.42, 3.0 / max(T_x, T_y))
    _mask_grid(ax, 9.6, 4.9, cell, [[True] * T_x for _ in range(T_y)], [f"$y_{{{t}}}$" for t in range(1, T_y + 1)],
               source, "cross-attention: $T_y \\times T_x$,\nno causal mask", fontsize=7, rotate=60)
    ax.set_title(title or f"two stacks joined by cross-attention: $D = {d_model}$, $H = {n_heads}$ heads of "
                 f"$d_k = {d_k}$, {n_enc_layers} encoder and {n_dec_layers} decoder blocks", fontsize=10)
    return _show(fig)


# ------------------------------------------------------------------ 07: RoPE
def rope_rotation(d_k, c=0, positions=(0, 1, 2, 3), base=10000.0, query_at=3, key_at=1, title=None):
    """RoPE on one pair of coordinates (2c, 2c+1) of a head of width d_k: the pair of the vector at position i is
    turned by the angle i * omega_c, omega_c = base^(-2c / d_k). A query at i and a key at j keep their angle
    difference (i - j) * omega_c wherever the pair sits in the text."""
    _check_sizes(d_k=d_k)
    if d_k % 2 or not 0 <= c < d_k // 2:
        raise ValueError(f"d_k must be even and c one of its pairs 0 .. {d_k // 2 - 1}, got d_k={d_k}, c={c}")
    omega = base ** (-2 * c / d_k)
    fig, ax = _canvas(6.2, 5.6, (-1.6, 1.9), (-1.75, 1.6))
    ax.set_aspect("equal")
    from matplotlib.patches import Arc, Circle
    ax.add_patch(Circle((0, 0), 1.0, fill=False, edgecolor="0.75", linestyle="--"))
    ax.axhline(0, color="0.85", lw=0.8)
    ax.axvline(0, color="0.85", lw=0.8)
    start = math.radians(15)
    for i in positions:
        a = start + i * omega
        color = SRC if i == query_at else (TGT if i == key_at else "0.55")
        _arrow(ax, 0, 0, math.cos(a), math.sin(a), color=color, lw=2.2 if i in (query_at, key_at) else 1.2)
        ax.text(1.15 * math.cos(a), 1.15 * math.sin(a), f"$i = {i}$", ha="center", va="center", fontsize=9,
                color=color)
    a_k, a_q = start + key_at * omega, start + query_at * omega
    ax.add_patch(Arc((0, 0), 0.7, 0.7, theta1=math.degrees(a_k), theta2=math.degrees(a_q), color=ATTN, lw=1.8))
    # the arc's label goes below the drawing: between the arrows it would sit on the arrow of a position between
    ax.text(-1.55, -1.2, f"pair $c = {c}$ of $d_k = {d_k}$: coordinates $(q_{{{2 * c}}}, q_{{{2 * c + 1}}})$, "
            f"turned by $i\\,\\omega_{c}$, $\\omega_{c} = {base:g}^{{-2c/d_k}} = {omega:.3g}$ rad\n"
            f"purple arc: the angle between them, $({query_at} - {key_at})\\,\\omega_{c}$, wherever the pair sits",
            fontsize=8.5, ha="left", va="top")
    ax.set_title(title or f"RoPE: the query at {query_at} (blue) and the key at {key_at} (amber) differ by "
                 f"{query_at - key_at} steps of $\\omega_{c}$", fontsize=10)
    return _show(fig)


# ------------------------------------------------------------------ 09: the KV cache
def kv_cache(prompt, new, n_layers, n_heads, d_k, title=None):
    """Generation with a KV cache, one row per call of the model: the first call feeds the whole prompt (its keys
    and values fill the cache) and predicts the first new token; each later call feeds only the newest token, whose
    key and value join the cache (one more position) and whose query reads every cached key. The last new token
    needs no call of its own. Per layer and head, K and V are T x d_k."""
    prompt, new = list(prompt), list(new)
    _check_sizes(n_layers=n_layers, n_heads=n_heads, d_k=d_k, T_p=len(prompt), new=len(new))
    from matplotlib.patches import Rectangle
    calls = len(new)
    T_all = len(prompt) + len(new) - 1  # the last token written is never fed
    cell = min(0.55, 7.0 / T_all)
    width = T_all * cell
    tokens = prompt + new[:-1]
    stagger = max(len(str(t)) for t in tokens) > 2  # a token wider than its cell: labels on two rows, alternating
    fig, ax = _canvas(11.0, 1.5 + 0.72 * calls + 0.25 * stagger, (-3.2, width + 2.6),
                      (-0.8 * calls - 0.55, 0.75 + 0.3 * stagger))
    for j, token in enumerate(tokens):
        ax.text((j + 0.45) * cell, 0.12 + 0.3 * stagger * (j % 2), token, ha="center", va="bottom", fontsize=8)
    for s in range(calls):
        y = -0.8 * s
        fed = range(len(prompt)) if s == 0 else [len(prompt) + s - 1]
        held = len(prompt) + s  # positions in the cache after this call
        for j in range(held):
            ax.add_patch(Rectangle((j * cell, y - 0.45), cell * 0.9, 0.45, facecolor=TGT if j in fed else STATE,
                                   edgecolor=INK, linewidth=0.6))
        label = f"call 1: the prompt, {len(prompt)} positions" if s == 0 else f"call {s + 1}: the newest token"
        ax.text(-0.15, y - 0.22, label, ha="right", va="center", fontsize=8.5)
        ax.text(held * cell + 0.1, y - 0.22, f"cache $T = {held}$; writes {new[s]}", ha="left", va="center",
                fontsize=8.5)
        if s > 0:
            q = (len(prompt) + s - 1 + 0.45) * cell
            ax.annotate("", xy=(0.0, y - 0.52), xytext=(q, y - 0.52),
                        arrowprops=dict(arrowstyle="-|>", color=ATTN, lw=1.0))
    ax.text(-3.1, -0.8 * calls - 0.1, "amber: keys and values computed in that call; blue: read from the cache; arrow: "
            f"the new query reads them all.\nPer layer and head, $K$ and $V$ are $T \\times d_k$ ($d_k = {d_k}$), "
            f"in each of {n_layers} layers $\\times$ {n_heads} heads.", fontsize=8, ha="left", va="top")
    ax.set_title(title or "the cache grows by one position per call; the last token written is never fed",
                 fontsize=10)
    return _show(fig)
