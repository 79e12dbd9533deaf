"""Plots the notebooks use, so no notebook pastes plotting code.

Every function draws into a new matplotlib figure (or the ``ax`` given) and
returns the figure; nothing here computes course material, it only shows it.
"""
import math


def _plt():
    """matplotlib.pyplot, imported on the first drawing: a notebook's set-up imports this module, and so does the
    sandboxed process that holds a student's functions at grading time, which draws nothing (matplotlib costs
    about a second to import)."""
    import matplotlib.pyplot as plt
    return plt


def _np(t):
    """A tensor (any device, any float or bool dtype) as a float NumPy array for drawing."""
    try:
        import torch
        if torch.is_tensor(t):
            return t.detach().to("cpu", dtype=torch.float64).numpy()
    except ImportError:
        pass
    import numpy as np
    return np.asarray(t, dtype=float)

def show_matrix(M, rows=None, cols=None, title=None, ax=None, cmap="viridis", annotate=None, blocked=None,
                xlabel="key j", ylabel="query i", vmin=None, vmax=None):
    """Heat map of a 2-D matrix (scores, weights, a mask) with token labels.

    Args:
        M: (R, C) tensor or array. Boolean masks are drawn as 1 (may attend) / 0.
        rows, cols: labels for rows (queries) and columns (keys).
        annotate: write each value in its cell (default: when the matrix is small).
        blocked: optional (R, C) boolean, True where a pair is blocked; drawn as a grey x.
    """
    A = _np(M)
    if A.ndim != 2:
        raise ValueError(f"show_matrix draws a 2-D matrix, got shape {tuple(A.shape)}")
    R, C = A.shape
    if ax is None:
        fig, ax = _plt().subplots(figsize=(min(1.0 + 0.55 * C, 9), min(0.8 + 0.5 * R, 7)))
    else:
        fig = ax.figure
    im = ax.imshow(A, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    ax.set_xticks(range(C))
    ax.set_yticks(range(R))
    ax.set_xticklabels(cols if cols is not None else range(C), rotation=45 if cols is not None else 0, ha="right"
                       if cols is not None else "center")
    ax.set_yticklabels(rows if rows is not None else range(R))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    if annotate is None:
        annotate = R * C <= 100
    finite = A[~(A != A)]
    mid = (finite.max() + finite.min()) / 2 if finite.size else 0
    for i in range(R):
        for j in range(C):
            if blocked is not None and bool(_np(blocked)[i, j]):
                ax.text(j, i, "x", ha="center", va="center", color="0.6", fontsize=12)
            elif annotate:
                v = A[i, j]
                text = "-inf" if v == -math.inf else ("inf" if v == math.inf else f"{v:.2f}")
                ax.text(j, i, text, ha="center", va="center", fontsize=8,
                        color="white" if v < mid else "black")
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    fig.tight_layout()
    return fig

def show_distributions(probs, labels=None, title=None):
    """Bars of one or more probability distributions over the same items.

    Args:
        probs: dict {legend label: 1-D tensor of probabilities}.
        labels: names of the items (x axis).
    """
    names = list(probs)
    n = len(next(iter(probs.values())))
    fig, ax = _plt().subplots(figsize=(min(2 + 0.9 * n, 10), 3.2))
    width = 0.8 / max(1, len(names))
    for k, name in enumerate(names):
        p = _np(probs[name])
        ax.bar([x + k * width - 0.4 + width / 2 for x in range(n)], p, width=width, label=str(name))
    ax.set_xticks(range(n))
    ax.set_xticklabels(labels if labels is not None else range(n))
    ax.set_ylim(0, 1)
    ax.set_ylabel("probability")
    if title:
        ax.set_title(title)
    if len(names) > 1:
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig

def plot_variance(d_values, raw, scaled):
    """Variance of raw and scaled dot products against d_k (log-log)."""
    fig, ax = _plt().subplots(figsize=(5.5, 3.5))
    ax.loglog(d_values, raw, "o-", label="raw  q·k")
    ax.loglog(d_values, scaled, "s-", label="scaled  q·k / √d_k")
    ax.loglog(d_values, d_values, ":", color="0.5", label="d_k (theory for raw)")
    ax.set_xlabel("d_k")
    ax.set_ylabel("variance of the score")
    ax.legend(fontsize=8)
    ax.set_title("The spread of q·k grows like d_k; √d_k cancels it")
    fig.tight_layout()
    return fig

def plot_curves(x, curves, xlabel, ylabel, title=None, logx=False, logy=False, ax=None):
    """Several y(x) curves on one axis: ``curves`` is {label: list of y}, or {label: (xs, ys)} for a curve with x
    values of its own."""
    if ax is None:
        fig, ax = _plt().subplots(figsize=(5.5, 3.5))
    else:
        fig = ax.figure
    for label, y in curves.items():
        xs, ys = y if isinstance(y, tuple) else (x, y)
        ax.plot(xs, [float(v) for v in ys], "o-", label=label)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------- notebook 10 (the capstone)
_CAPSTONE_STYLE = {  # kind -> (colour, marker, line style): every line can be told apart where lines meet
    "rnn_fixed": ("tab:red", "v", "-"), "rnn_attention": ("tab:blue", "o", "-"),
    "decoder_causal": ("tab:orange", "s", "--"), "decoder_prefix": ("tab:purple", "D", "-."),
    "encoder_decoder": ("tab:green", "^", ":")}


def plot_capstone_accuracy(exp):
    """Exact match against source length, one line per run: the mean over its seeds, the bar from its lowest to
    its highest seed. The lines are shifted sideways a little, each with its own marker, so that runs at the same
    accuracy stay visible side by side; the legend sits below the axes, off the data."""
    from .capstone_models import KINDS
    from .capstone_runs import bin_label
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    kinds = list(exp.runs)
    centres = [(a + b) / 2 for a, b in exp.bins]
    shift = 0.35 * min((b - a + 1 for a, b in exp.bins), default=1) / max(1, len(kinds))
    for k, kind in enumerate(kinds):
        colour, marker, style = _CAPSTONE_STYLE.get(kind, (None, "o", "-"))
        rows = exp.summary(kind)
        xs = [c + (k - (len(kinds) - 1) / 2) * shift for c in centres]
        mean = [100 * rows[b][0] for b in exp.bins]
        below = [100 * (rows[b][0] - rows[b][1]) for b in exp.bins]
        above = [100 * (rows[b][2] - rows[b][0]) for b in exp.bins]
        n = len(exp.runs[kind])
        ax.errorbar(xs, mean, yerr=[below, above], color=colour, marker=marker, linestyle=style, capsize=3,
                    markersize=6, markerfacecolor="white" if k % 2 else colour,
                    label=f"{KINDS[kind]} ({n} seed{'s' if n > 1 else ''})")
    ax.set_xticks(centres)
    ax.set_xticklabels([bin_label(b) for b in exp.bins])
    ax.set_xlabel("source length (tokens)")
    ax.set_ylabel("test exact match (%)")
    ax.set_ylim(-3, 103)
    ax.grid(alpha=0.3)
    ax.set_title("Exact match by source length (mean; bars: lowest to highest seed)")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
    fig.tight_layout()
    return fig


def plot_capstone_curves(exp, every=None):
    """Training loss against step, one line per run: the mean over its seeds of the loss averaged over ``every``
    steps, a band from the lowest to the highest seed; log scale, the legend to the right of the axes."""
    from .capstone_models import KINDS
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8.5, 4.0))
    for kind, runs in exp.runs.items():
        colour, marker, style = _CAPSTONE_STYLE.get(kind, (None, "o", "-"))
        n = min(len(r.curve) for r in runs)
        step = every or max(1, n // 40)
        starts = range(0, n, step)
        xs = [min(k + step, n) for k in starts]
        per_seed = [[sum(loss for _, loss in r.curve[k:k + step]) / len(r.curve[k:k + step]) for k in starts]
                    for r in runs]
        mean = [sum(col) / len(col) for col in zip(*per_seed)]
        ax.plot(xs, mean, color=colour, linestyle=style, marker=marker, markevery=max(1, len(xs) // 8),
                markersize=5, label=KINDS[kind])
        if len(runs) > 1:
            ax.fill_between(xs, [min(col) for col in zip(*per_seed)], [max(col) for col in zip(*per_seed)],
                            color=colour, alpha=0.2, linewidth=0)
    ax.set_yscale("log")
    ax.set_xlabel("training step")
    ax.set_ylabel("training loss (mean over a window)")
    ax.set_title("Training curves (mean over seeds; bands: lowest to highest seed)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    fig.tight_layout()
    return fig
