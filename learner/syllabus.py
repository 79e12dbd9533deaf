"""The course, one entry per notebook: the one table every other part reads.

Each entry says, for one notebook (in course order):

* ``folder``     the assignment id and its folder, ``course/source/<folder>/<folder>.ipynb``;
* ``topic``      the name of its two modules: the cases ``learner/check/cases/<topic>.py`` and the known mistakes
                 ``solutions/mistakes/<topic>.py`` (whose functions the cases name ``"<topic>:<function>"``);
* ``exercises``  {exercise: (points of its basic cell, points of its edge cell)}, in the order the checks
                 registers them: ``_points(name=difficulty, ...)``, the difficulty from 1 to 5 by the ideas
                 and the lines the reference needs (see ``POINTS_RULE``); an errors cell, for the input
                 an exercise must refuse, is worth ``ERRORS_POINTS``;
* ``given``      {exercise: ("module:function", ...)}: ready-made versions in ``learner`` that the learner's
                 answer must not call (it may call the ready-made versions of *other* exercises);
* ``questions``  the self-check questions at the end of the notebook, in order: functions that return a literal
                 (a choice, a number, a tuple), graded like an exercise (``learner.check.cases.common.question``),
                 worth ``QUESTION_POINTS`` each, in a basic cell only; ``exercises`` lists them too, after the
                 exercises;
* ``setup``      the imports of ready-made parts that the notebook's read-only set-up cell adds ("" for none);
Everything here is what a student sees anyway (the notebook, its set-up cell, its points): this table is the learner's
side's, and ships whole. What only the instructor may have about a notebook lives with the reference: its known
mistakes (``solutions/mistakes/<topic>.py``) and the one known bug of its sample submission
(``solutions/sample_bugs.py``). Adding a notebook is one entry here plus its modules.

Plain data, no imports of the checks' other modules or of ``coursekit`` (which imports the checks).
"""
from dataclasses import dataclass, field

NOTATION = "notation.md"  # the course's notation page, beside the assignments' folders: each notebook links ../notation.md

POINTS_RULE = ("an exercise of difficulty d (1 to 5: the ideas and the lines its reference needs) is worth d points "
               "in its basic cell, ceil(d / 2) in its edge cell, and 1 in its errors cell (the bad input it must "
               "refuse), when it has one")
ERRORS_POINTS = 1  # the errors cell of every exercise that must refuse some input
QUESTION_POINTS = 1  # a self-check question


@dataclass(frozen=True)
class Notebook:
    folder: str
    topic: str
    exercises: dict
    given: dict = field(default_factory=dict)
    setup: str = ""
    questions: tuple = ()

    def __post_init__(self):  # the questions are graded as exercises are: the table lists them after the exercises
        clash = set(self.questions) & set(self.exercises)
        if clash:
            raise ValueError(f"{self.folder}: {sorted(clash)} are both exercises and questions")
        object.__setattr__(self, "exercises", {**self.exercises, **{q: (QUESTION_POINTS, QUESTION_POINTS)
                                                                     for q in self.questions}})


def _points(**difficulty):
    """{exercise: (basic points, edge points)} from each exercise's difficulty, in the order given (POINTS_RULE)."""
    bad = {name: d for name, d in difficulty.items() if d not in (1, 2, 3, 4, 5)}
    if bad:
        raise ValueError(f"difficulties run from 1 to 5: {bad}")
    return {name: (d, (d + 1) // 2) for name, d in difficulty.items()}


NOTEBOOKS = {nb.folder: nb for nb in [
    Notebook(
        "01_tokens", "tokens",
        _points(build_vocab=3, encode=1, decode=2, pad_batch=2, embed_one_hot=1, embed_lookup=1),
        questions=("answer_embedding_table_size", "answer_one_hot_product")),
    Notebook(
        "02_dot_products", "dot_products",
        _points(pairwise_scores=1, project_qkv=2, scaled_scores=1, score_variance=2),
        questions=("answer_why_scale", "answer_score_std")),
    Notebook(
        "03_softmax", "softmax",
        _points(softmax=2, log_softmax=2, sequence_log_prob=3),
        questions=("answer_temperature_top_probability", "answer_why_log_probabilities")),
    Notebook(
        "04_masks_attention", "masks_attention",
        _points(bidirectional_mask=1, causal_mask=1, padding_mask=1, combine_masks=2, additive_mask=1,
                masked_attention=4),
        given={"masked_attention": ("learner.blocks:masked_attention",)},
        questions=("answer_causal_pairs", "answer_why_minus_infinity")),
    Notebook(
        "05_rnn", "rnn",
        _points(rnn_cell=1, rnn_encode=3, decoder_step=1, teacher_forced_logits=3, seq2seq_loss=2, greedy_decode=4,
                beam_search=5),
        questions=("answer_context_shape", "answer_teacher_forcing")),
    Notebook(
        "05b_rnn_attention", "rnn_attention",
        _points(additive_score=2, dot_score=1, attend=3, attention_decoder_step=3),
        given={"attention_decoder_step": ("learner.capstone_models:attention_step",)},
        questions=("answer_alignment_weights", "answer_bottleneck")),
    Notebook(
        "06_encoder", "encoder",
        _points(split_heads=1, merge_heads=1, multi_head_attention=3, sinusoidal_positions=2, embed_with_positions=2,
                encoder_block=3, masked_lm_loss=2, probe_accuracy=3),
        given={"split_heads": ("learner.blocks:split_heads",),
               "merge_heads": ("learner.blocks:merge_heads",),
               "multi_head_attention": ("learner.blocks:multi_head_attention",),
               "sinusoidal_positions": ("learner.transformer:sinusoidal_table",),
               "embed_with_positions": ("learner.blocks:embed_with_positions",),
               "encoder_block": ("learner.blocks:encoder_block",)},
        setup="from learner.blocks import masked_attention",
        questions=("answer_head_width", "answer_shuffled_tokens")),
    Notebook(
        "07_decoder", "decoder",
        _points(rope=3, rope_attention=3, decoder_block=2, lm_log_prob=2, top_k_filter=2, top_p_filter=3,
                sample_next=2),
        given={"decoder_block": ("learner.blocks:decoder_block",)},
        setup="from learner.blocks import (embed_with_positions, masked_attention, merge_heads,\n"
              "                           multi_head_attention, split_heads)",
        questions=("answer_encoder_to_decoder", "answer_next_token_targets", "answer_nucleus")),
    Notebook(
        "08_encoder_decoder", "encoder_decoder",
        _points(cross_attention=2, encdec_decoder_block=3, encdec_forward=1, translation_loss=2, greedy_translate=4),
        given={"encdec_decoder_block": ("learner.blocks:encdec_decoder_block_kv",)},
        setup="from learner.blocks import embed_with_positions, encoder_block, multi_head_attention",
        questions=("answer_cross_attention_sources", "answer_cross_weights_shape", "answer_empty_source")),
    Notebook(
        "09_kv_cache", "kv_cache",
        _points(cached_attention=4, decoder_block_step=3, greedy_generate=4, kv_cache_bytes=1),
        given={"decoder_block_step": ("learner.blocks:decoder_block_step",)},
        setup="from learner.blocks import (decoder_block, embed_with_positions, masked_attention, merge_heads,\n"
              "                           split_heads)",
        questions=("answer_positions_without_cache", "answer_what_the_cache_keeps")),
    Notebook(
        "10_capstone", "capstone",
        _points(prefix_lm_mask=2),
        questions=("answer_prefix_reads_later_source", "answer_pairs_the_prefix_adds")),
]}

TOPICS = {nb.topic: nb for nb in NOTEBOOKS.values()}


def notebook_of(exercise):
    """The entry of the notebook that holds ``exercise``."""
    for nb in NOTEBOOKS.values():
        if exercise in nb.exercises:
            return nb
    raise KeyError(f"no notebook of the course holds an exercise {exercise!r}")


def points_of(exercise):
    """(points of the basic cell, points of the edge cell) of ``exercise``."""
    return notebook_of(exercise).exercises[exercise]


def cell_points(exercise, cell):
    """The points of ``exercise``'s graded cell ``cell`` (basic, edge or errors)."""
    if cell == "errors":
        return ERRORS_POINTS
    return points_of(exercise)[("basic", "edge").index(cell)]


def version():
    """The course's version: pyproject.toml's in the instructor's checkout, else the installed distribution's (the
    student package records it too). Released notebooks carry it in their metadata (``course_version``)."""
    import os
    pyproject = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "pyproject.toml")
    if os.path.exists(pyproject):
        for line in open(pyproject):
            if line.startswith("version"):
                return line.split("=", 1)[1].strip().strip('"')
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed
    for dist in ("attention-course", "attention-course-student"):
        try:
            return installed(dist)
        except PackageNotFoundError:
            pass
    return "unknown"
