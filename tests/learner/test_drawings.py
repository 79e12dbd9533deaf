"""learner.drawings: each picture is drawn from the sizes it is given (a changed size shows in the picture), refuses
sizes it cannot draw, and in a notebook shows as exactly one PNG output, with the inline backend of JupyterLab as
with the Agg backend the grading sandbox sets (whose feedback pages keep a cell's PNG outputs)."""
import matplotlib
import nbformat
import pytest
from nbclient import NotebookClient

from learner import drawings

matplotlib.use("Agg")

SRC, TGT = ["may", "9", ",", "1", "9", "7", "5"], list("1975-05-09") + ["<eos>"]
PICTURES = {  # name: (call with the sizes of the course, call with other sizes, texts the other sizes must show)
    "two_lengths": (lambda: drawings.two_lengths(), lambda: drawings.two_lengths(SRC, TGT),
                    ["$T_x = 7$ in", "$T_y = 11$ out"]),
    "rnn_encoder_decoder": (lambda: drawings.rnn_encoder_decoder(["I", "love", "AI"], ["J'aime", "<eos>"], 32, 128),
                            lambda: drawings.rnn_encoder_decoder(SRC, TGT, 16, 48, attention=True, step=3),
                            ["$d_h = 48$", "$D = 16$", "$T_x = 7$"]),
    "transformer_block": (lambda: drawings.transformer_block("encoder", 6, 64, 4, 128),
                          lambda: drawings.transformer_block("decoder", 5, 96, 3, 200),
                          ["$H = 3$ heads of $d_k = D / H = 32$", "96", "200"]),
    "encoder_decoder": (lambda: drawings.encoder_decoder(SRC, TGT, 64, 4, 128, 2, 2),
                        lambda: drawings.encoder_decoder(SRC[:3], TGT[:4], 32, 8, 64, 3, 1),
                        ["$D = 32$", "$H = 8$ heads of $d_k = 4$", "3 encoder and 1 decoder blocks"]),
    "rope_rotation": (lambda: drawings.rope_rotation(16, c=1), lambda: drawings.rope_rotation(8, c=2, query_at=2),
                      ["pair $c = 2$ of $d_k = 8$"]),
    "kv_cache": (lambda: drawings.kv_cache(["<bos>", "a", "="], ["1", "2"], 2, 4, 16),
                 lambda: drawings.kv_cache(["<bos>", "a", "b", "c", "="], ["1", "2", "3"], 3, 2, 32),
                 ["call 1: the prompt, 5 positions", "$d_k = 32$", "3 layers"]),
}


def _texts(fig):
    return [t.get_text() for ax in fig.axes for t in ax.texts] + [ax.get_title() for ax in fig.axes]


@pytest.mark.parametrize("name", PICTURES)
def test_a_picture_shows_the_sizes_it_is_given(name):
    import matplotlib.pyplot as plt
    course, other, shown = PICTURES[name]
    for make in (course, other):
        fig = make()
        assert fig.axes and fig.get_size_inches()[0] > fig.get_size_inches()[1] * 0.8
        plt.close(fig)
    fig = other()
    texts = " | ".join(_texts(fig))
    for text in shown:
        assert text in texts, f"{name}: {text!r} not in the picture's texts: {texts[:600]}"
    plt.close(fig)


@pytest.mark.parametrize("call", [lambda: drawings.transformer_block("encoder", 4, 10, 4, 8),
                                  lambda: drawings.transformer_block("mixer", 4, 8, 2, 8),
                                  lambda: drawings.rnn_encoder_decoder([], ["a"], 4, 4),
                                  lambda: drawings.rnn_encoder_decoder(["a"], ["b"], 4, 4, attention=True,
                                                                       weights=[0.5, 0.5]),
                                  lambda: drawings.rope_rotation(7),
                                  lambda: drawings.kv_cache([], ["a"], 1, 1, 4)],
                         ids=["heads-do-not-divide", "no-such-block", "empty-source", "weights-of-another-length",
                              "odd-d_k", "empty-prompt"])
def test_sizes_that_cannot_be_drawn_are_refused(call):
    with pytest.raises(ValueError):
        call()


@pytest.mark.pipeline
@pytest.mark.parametrize("backend", ["inline", "Agg"])
def test_in_a_notebook_a_picture_is_one_png_output_whatever_the_backend(backend, tmp_path, monkeypatch):
    """JupyterLab's kernels draw inline; the grading sandbox sets MPLBACKEND=Agg, under which a figure shows nothing
    by itself. Either way a drawing cell outputs exactly one PNG (and the cell's value is not shown)."""
    if backend == "Agg":
        monkeypatch.setenv("MPLBACKEND", "Agg")
    else:
        monkeypatch.delenv("MPLBACKEND", raising=False)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("from learner import drawings\n"
                                          "fig = drawings.transformer_block('encoder', 4, 64, 4, 128)")]
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = nb.cells[0].outputs
    assert [o.output_type for o in outputs] == ["display_data"], outputs
    assert "image/png" in outputs[0].data


# ---------------------------------------------------------------- nothing in a picture covers anything else
def _drawing_cells():
    """[(notebook, [source of each drawing cell, in order], the code before its first drawing cell)] of the
    course's notebooks that draw (grade_id draw_*): each drawing cell comes with the literal sizes earlier cells
    set; the code before the first one (its graded cells aside) is for a drawing that reads what a cell computed
    (10's widths at the budget)."""
    from coursekit.sync import assignment_of, source_notebooks
    import ast
    found = []
    for path in source_notebooks():
        sources, sizes, before = [], [], []
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type != "code":
                continue
            if cell.metadata.get("nbgrader", {}).get("grade_id", "").startswith("draw_"):
                sources.append("\n".join(sizes + [cell.source]))
                continue
            if not sources and not cell.metadata.get("nbgrader", {}).get("grade"):
                before.append(cell.source)
            try:  # the sizes an earlier cell sets with literals (05's D, d_h), which a drawing cell may use
                tree = ast.parse(cell.source)
            except SyntaxError:
                continue
            for node in tree.body:
                if isinstance(node, ast.Assign) and isinstance(node.value, (ast.Constant, ast.Tuple)):
                    try:
                        ast.literal_eval(node.value)
                        sizes.append(ast.unparse(node))
                    except ValueError:
                        pass
        if sources:
            found.append((assignment_of(path), sources, "\n".join(before)))
    return found


def collisions(fig, gap=2.0):
    """What covers what in a drawn figure, in pixels: two texts closer than ``gap`` in both directions, and a text
    an arrow runs through (an arrow is taken as the straight line from its tail to its head; its own label aside)."""
    import itertools
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    texts, arrows = [], []
    for ax in fig.axes:
        for t in ax.texts:
            if t.get_text().strip():
                texts.append((t, t.get_window_extent(renderer)))
            if getattr(t, "arrow_patch", None) is not None:
                arrows.append((t, ax.transData.transform(t.xyann), ax.transData.transform(t.xy)))
    found = []
    for (a, ba), (b, bb) in itertools.combinations(texts, 2):
        if min(ba.x1, bb.x1) - max(ba.x0, bb.x0) > -gap and min(ba.y1, bb.y1) - max(ba.y0, bb.y0) > -gap:
            found.append(f"{a.get_text()!r} touches {b.get_text()!r}")
    for t, box in texts:
        for arrow, p0, p1 in arrows:
            if arrow is t:
                continue
            points = [p0 + (p1 - p0) * k / 100 for k in range(101)]
            if any(box.x0 + 1 < x < box.x1 - 1 and box.y0 + 1 < y < box.y1 - 1 for x, y in points):
                found.append(f"an arrow runs through {t.get_text()!r}")
    return found


# 10's pictures read the widths its cell finds for the budget (capstone.size_for, about 15 s): out of make test-fast
@pytest.mark.parametrize("folder, sources, before", [
    pytest.param(*c, id=c[0], marks=[pytest.mark.experiment] if c[0] == "10_capstone" else [])
    for c in _drawing_cells()])
def test_as_the_notebook_draws_it_no_label_covers_another_or_sits_on_an_arrow(folder, sources, before):
    """Each drawing cell of the notebooks, run as it is (its own sizes and tokens): no two labels touch, and no arrow
    runs through a label (RoPE's angle on the arrow of the position between, the KV cache's "<bos>may", 08's
    "$K, V$" on its own arrow, before)."""
    import matplotlib.pyplot as plt
    import sys
    namespace, found = {}, []
    try:
        exec(compile(sources[0], folder, "exec"), {})
    except NameError:  # it reads what an earlier cell computed: run the notebook up to it (its checks aside)
        path = sys.path[:]
        try:
            exec(compile(before, f"{folder} before its drawings", "exec"), namespace)
        finally:
            sys.path[:] = path  # the set-up cell trims sys.path
    for k, source in enumerate(sources):  # in order: a later drawing cell may use the sizes an earlier one set
        exec(compile(source, f"{folder} drawing {k + 1}", "exec"), namespace)
        found += [f"drawing {k + 1}: {what}" for what in collisions(namespace["fig"])]
        plt.close(namespace["fig"])
    assert not found, f"{folder}'s pictures: " + "; ".join(found)


def test_the_collision_check_sees_a_label_on_an_arrow_and_two_labels_touching():
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots()
    ax.annotate("", xy=(1, 1), xytext=(0, 0), arrowprops=dict(arrowstyle="-|>"))
    ax.text(0.5, 0.5, "on the arrow", ha="center", va="center")
    ax.text(0.1, 0.9, "<bos>", ha="right")
    ax.text(0.1, 0.9, "may", ha="left")
    found = collisions(fig)
    plt.close(fig)
    assert "an arrow runs through 'on the arrow'" in found and "'<bos>' touches 'may'" in found


def test_05b_draws_the_query_choosing_the_weights_and_the_context_feeding_the_output():
    """The two connections 05b's text stresses: the previous decoder state scores every h_j (a dashed arrow from
    h^dec_{t-1} to the step's context), and the context enters the output layer (an arrow from c_t up to the box
    of the token written), besides the update."""
    import matplotlib.pyplot as plt
    fig = drawings.rnn_encoder_decoder(["I", "love", "AI"], ["J'aime", "l'IA", "<eos>"], D=32, d_h=128,
                                       attention=True, step=1)
    ax = fig.axes[0]
    arrows = [t for t in ax.texts if getattr(t, "arrow_patch", None) is not None]
    dashed = [a for a in arrows if a.arrow_patch.get_linestyle() not in ("-", "solid")]
    context = next(t for t in ax.texts if t.get_text() == "$\\mathbf{c}_{2}$")
    cx, cy = context.get_position()
    upward = [a for a in arrows if abs(a.xyann[0] - cx) < 0.05 and a.xy[1] > cy + 1.0]
    plt.close(fig)
    assert len(dashed) == 1 and dashed[0].xy[1] < cy < dashed[0].xy[1] + 0.5, "no dashed query arrow into c_t"
    assert upward, "no arrow from c_t into the output layer"


def test_08s_decoder_side_has_its_arrows():
    """Every sub-layer of every decoder block reads the one below it: an arrow into each, as on the encoder side."""
    import matplotlib.pyplot as plt
    fig = drawings.encoder_decoder(SRC, TGT, 64, 4, 128, 2, 2)
    ax = fig.axes[0]
    boxes = [t for t in ax.texts if "+ add & LN" in t.get_text()]
    heads = [a.xy for a in ax.texts if getattr(a, "arrow_patch", None) is not None]
    plt.close(fig)
    assert len(boxes) == 6
    for box in boxes:
        x, y = box.get_position()
        assert any(abs(hx - x) < 0.05 and 0 < y - hy < 0.4 for hx, hy in heads), f"no arrow into {box.get_text()!r}"
