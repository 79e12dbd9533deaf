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
