"""The capstone (notebook 10): four architectures on one task, with the same budget, steps, seeds and data.

Five runs, because the decoder-only transformer is run with both of its masks:

* ``rnn_fixed``        notebook 05's RNN encoder-decoder: one context vector between source and target;
* ``rnn_attention``    notebook 05b's: the decoder attends over every encoder state at every step;
* ``decoder_causal``   a decoder-only transformer reading ``<bos> source = target <eos>`` as one text, fully causal;
* ``decoder_prefix``   the same, with a prefix-LM mask: the source (the prefix) reads itself both ways;
* ``encoder_decoder``  notebook 08's transformer: a bidirectional encoder and a decoder with cross-attention.

Each model's width is chosen so that its parameter count is within ``TOLERANCE`` (10%) of one budget
(``size_for``). All train for the same number of steps with ``transformer.fit`` (AdamW, one-cycle, fixed
threads), from the same seed, on the same batches of the same dates in the same order. Everything here is
ready-made with PyTorch; the notebook passes the learner's ``prefix_lm_mask`` to the prefix-LM run.

``run(...)`` trains them all and returns (and writes, as JSON) the results: parameters, the training curve,
seconds per training step and per generated token, and test exact match by source length.
"""
import bisect
import functools
import json
import time
from dataclasses import asdict, dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from . import blocks, data, rnn, transformer

KINDS = {"rnn_fixed": "RNN, fixed context", "rnn_attention": "RNN with attention",
         "decoder_causal": "decoder-only, causal mask", "decoder_prefix": "decoder-only, prefix-LM mask",
         "encoder_decoder": "encoder-decoder transformer"}
TOLERANCE = 0.10  # every model's parameter count within 10% of the budget
MAX_NEW = 12      # the longest answer: 10 characters and <eos>, with one to spare
EMBED = 32        # the RNNs' embedding width (notebook 05's)


# ---------------------------------------------------------------- ready-made parts
def causal_lm_mask(prefix_lengths, T):
    """(B, T, T) bool, True = may attend: the fully causal mask, whatever the prefix."""
    allowed = torch.ones(T, T, dtype=torch.bool, device=prefix_lengths.device).tril()
    return allowed.expand(prefix_lengths.shape[0], T, T)


def attention_step(prev_ids, s_prev, states, src_mask, p):
    """Notebook 05b's decoder step (Bahdanau), written with ``F.linear``: look, then update, then score."""
    scores = F.linear(torch.tanh(F.linear(s_prev, p["W_s"])[:, None] + F.linear(states, p["W_h"])), p["v"][None])
    scores = scores[..., 0].masked_fill(~src_mask, float("-inf"))  # (B, T_x)
    alpha = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    context = torch.bmm(alpha[:, None], states)[:, 0]  # (B, H_e)
    s = torch.tanh(F.linear(F.embedding(prev_ids, p["E_tgt"]), p["W_x"]) + F.linear(context, p["W_c"])
                   + F.linear(s_prev, p["W_hh"], p["b"]))
    return F.linear(torch.cat([s, context], dim=-1), p["W_out"], p["b_out"]), s, alpha


def _encdec_block(y, memory, tgt_valid, src_valid, params, n_heads):
    """Notebook 08's decoder block, ready-made: the keys and values of the memory, then the block that reads them."""
    kv = blocks.cross_keys_values(memory, params["cross_attn"], n_heads)
    return blocks.encdec_decoder_block_kv(y, kv, tgt_valid, src_valid, params, n_heads)


class PrefixDecoder(nn.Module):
    """A decoder-only transformer over ``<bos> source = target <eos>`` whose mask is ``mask_fn(prefix_lengths, T)``.

    Post-norm blocks as in notebook 07 (``blocks.multi_head_attention``), the mask AND the padding; the LM head
    is tied to the token table. With ``causal_lm_mask`` it is a GPT; with a prefix-LM mask the prompt
    ``<bos> source =`` reads itself both ways.
    """

    def __init__(self, vocab_size, d_model, n_heads, d_ff, n_layers, max_len, mask_fn, seed=0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.cfg = transformer.TransformerConfig(vocab_size, d_model, n_heads, d_ff, n_layers, max_len)
        self.mask_fn = mask_fn
        self.embed = transformer.Embedding(g, vocab_size, d_model, max_len, "learned")
        self.layers = nn.ModuleList(transformer.as_parameters(transformer.encoder_block_weights(g, d_model, d_ff))
                                    for _ in range(n_layers))

    def forward(self, ids, prefix_lengths, valid=None):
        T = ids.shape[1]
        if T > self.cfg.max_len:
            raise ValueError(f"a text of {T} tokens is longer than the positional table ({self.cfg.max_len})")
        mask = self.mask_fn(prefix_lengths, T)  # (B, T, T)
        if valid is not None:
            mask = mask & valid[:, None, :]
        x = blocks.embed_with_positions(ids, self.embed.E * self.embed.scale, self.embed.P)
        for layer in self.layers:
            p = transformer.as_dict(layer)
            x = blocks.add_norm(x, blocks.multi_head_attention(x, x, p["attn"], self.cfg.n_heads, mask)[0], p["ln1"])
            x = blocks.add_norm(x, blocks.feed_forward(x, p["ffn"]), p["ln2"])
        return x @ self.embed.E.T  # (B, T, V)


# ---------------------------------------------------------------- the five runs, one interface
class _Seq2Seq:
    """An RNN or the encoder-decoder: batches from ``data.make_batch``, greedy translation."""

    def __init__(self, kind, model, task):
        self.kind, self.model, self.task = kind, model, task

    def loss(self, pairs):
        b = data.make_batch(pairs, self.task.src_vocab, self.task.tgt_vocab)
        logits = self.model(b["src"], b["src_mask"], b["tgt_in"], b["tgt_mask"]) if self.kind == "encoder_decoder" \
            else self.model(b["src"], b["src_mask"], b["tgt_in"])
        targets = b["tgt_out"].masked_fill(~b["tgt_mask"], -100)
        return F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=-100)

    @torch.no_grad()
    def translate(self, pairs):
        b = data.make_batch(pairs, self.task.src_vocab, self.task.tgt_vocab)
        out = self.model.greedy(b["src"], b["src_mask"], data.BOS_ID, data.EOS_ID, MAX_NEW)
        tokens = out[0] if isinstance(out, tuple) else out
        return [data.to_text(row, self.task.tgt_vocab) for row in tokens]


class _DecoderOnly:
    """A PrefixDecoder: the loss on the target tokens only (the source is the condition), greedy completion."""

    def __init__(self, kind, model, task):
        self.kind, self.model, self.task = kind, model, task
        self.vocab = data.lm_vocab(task)
        self.inverse = {i: t for t, i in self.vocab.items()}

    def loss(self, pairs):
        rows = [data.lm_ids(s, t, self.vocab) for s, t in pairs]
        prefix = torch.tensor([len(data.lm_ids(s, None, self.vocab)) for s, _ in pairs])
        ids, valid = data.pad_rows(rows)
        logits = self.model(ids, prefix, valid)
        targets = ids[:, 1:].masked_fill(~valid[:, 1:], -100)
        before = torch.arange(1, ids.shape[1])[None, :] < prefix[:, None]  # the prompt is given, not predicted
        return F.cross_entropy(logits[:, :-1].transpose(1, 2), targets.masked_fill(before, -100), ignore_index=-100)

    @torch.no_grad()
    def translate(self, pairs):
        eos = data.EOS_ID  # the special tokens have the same ids in every vocabulary of the task

        def write(ids):  # (b, n) prompts of one length: greedy, the whole text again at every step (no cache)
            n, prefix = ids.shape[1], torch.full((ids.shape[0],), ids.shape[1])
            done = torch.zeros(ids.shape[0], dtype=torch.bool)
            for _ in range(MAX_NEW):
                nxt = self.model(ids, prefix)[:, -1].argmax(-1).masked_fill(done, eos)
                ids = torch.cat([ids, nxt[:, None]], dim=1)
                done |= nxt == eos
                if bool(done.all()):
                    break
            return ids[:, n:]
        new = transformer.by_prompt_length([data.lm_ids(s, None, self.vocab) for s, _ in pairs], write, eos)
        return ["".join(self.inverse[i] for i in row) for row in new]


def build(kind, width, task, seed=0, prefix_mask=None):
    """The run ``kind`` at ``width`` (the RNN's state size, or the transformer's d_model)."""
    V_src, V_tgt = len(task.src_vocab), len(task.tgt_vocab)
    torch.manual_seed(seed)
    if kind == "rnn_fixed":
        return _Seq2Seq(kind, rnn.FixedContextSeq2Seq(V_src, V_tgt, D=EMBED, H=width, seed=seed), task)
    if kind == "rnn_attention":
        model = rnn.AttentionSeq2Seq(V_src, V_tgt, D=EMBED, H=width, A=width // 2, seed=seed, step=attention_step)
        return _Seq2Seq(kind, model, task)
    if kind == "encoder_decoder":
        cfg = transformer.EncoderDecoderConfig(V_src, V_tgt, d_model=width, n_heads=4, d_ff=2 * width, n_enc_layers=2,
                                               n_dec_layers=2, max_len=32)
        return _Seq2Seq(kind, transformer.EncoderDecoder(cfg, _encdec_block, blocks.embed_with_positions,
                                                         blocks.encoder_block, seed=seed), task)
    if kind in ("decoder_causal", "decoder_prefix"):
        mask_fn = causal_lm_mask if kind == "decoder_causal" else prefix_mask
        if mask_fn is None:
            raise ValueError("the prefix-LM run needs a mask function: prefix_mask=prefix_lm_mask")
        model = PrefixDecoder(len(data.lm_vocab(task)), width, 4, 2 * width, 4, 48, mask_fn, seed=seed)
        return _DecoderOnly(kind, model, task)
    raise ValueError(f"unknown model kind {kind!r}; the kinds are {', '.join(KINDS)}")


def n_params(run):
    return sum(p.numel() for p in run.model.parameters())


WIDTHS = {"rnn_fixed": range(8, 1025, 4), "rnn_attention": range(8, 1025, 4),
          "decoder_causal": range(8, 513, 4), "decoder_prefix": range(8, 513, 4), "encoder_decoder": range(8, 513, 4)}


def size_for(kind, budget, task):
    """The width whose parameter count is nearest ``budget``; a ValueError when no width comes within TOLERANCE."""
    widths = WIDTHS[kind]
    count = functools.cache(lambda w: n_params(build(kind, w, task, prefix_mask=causal_lm_mask)))
    i = bisect.bisect_right(widths, budget, key=count)  # the counts grow with the width: the first one over budget
    near = widths[max(i - 1, 0):i + 1]
    best = min(near, key=lambda w: abs(count(w) - budget))
    if abs(count(best) - budget) <= TOLERANCE * budget:
        return best
    if i == 0:
        raise ValueError(f"a budget of {budget:,} parameters is too small for {KINDS[kind]}: its smallest size "
                         f"(width {widths[0]}) has {count(widths[0]):,} parameters; give at least "
                         f"{count(widths[0]):,}")
    if i == len(widths):
        raise ValueError(f"a budget of {budget:,} parameters is too large for {KINDS[kind]}: its largest size "
                         f"(width {widths[-1]}) has {count(widths[-1]):,}")
    raise ValueError(f"no width of {KINDS[kind]} comes within {TOLERANCE:.0%} of {budget:,} parameters: the "
                     f"nearest are " + " and ".join(f"width {w} ({count(w):,})" for w in near))


# ---------------------------------------------------------------- evaluation
def source_length(source):
    return len(data.tokenize(source))


def length_range(pairs):
    lengths = [source_length(s) for s, _ in pairs]
    return min(lengths), max(lengths)


def accuracy_by_length(translate, pairs, lengths=None):
    """({source length: exact match}, overall exact match, the guesses) of ``translate`` on ``pairs``.

    ``lengths`` (default: every length the pairs have) must lie in the data's range."""
    lo, hi = length_range(pairs)
    if lengths is None:
        lengths = range(lo, hi + 1)
    outside = [n for n in lengths if not lo <= n <= hi]
    if outside:
        raise ValueError(f"source length {outside[0]} is outside the data's range: its sources have {lo} to {hi} "
                         f"tokens")
    guesses = translate(pairs)
    out = {}
    for n in lengths:
        rows = [g == t for g, (s, t) in zip(guesses, pairs) if source_length(s) == n]
        out[n] = sum(rows) / len(rows) if rows else float("nan")
    return out, sum(g == t for g, (_, t) in zip(guesses, pairs)) / len(pairs), guesses


# ---------------------------------------------------------------- the experiment
@dataclass
class Settings:
    budget: int = 100_000
    steps: int = 1500
    batch_size: int = 64
    lr: float = 3e-3
    seed: int = 0
    n_test: int = 2000
    kinds: tuple = tuple(KINDS)


@dataclass
class Result:
    kind: str
    name: str
    width: int
    params: int
    curve: list = field(default_factory=list)       # (step, loss)
    seconds_per_step: float = 0.0
    seconds_per_token: float = 0.0
    by_length: dict = field(default_factory=dict)   # source length -> test exact match
    exact_match: float = 0.0


def _tokens_written(guesses):
    return sum(len(g) + 1 for g in guesses)  # the characters of each answer and its <eos>


def run(settings=None, prefix_mask=None, task=None, results_path=None, report_every=250):
    """Train every run of ``settings.kinds`` and evaluate it; returns {kind: Result} (and writes ``results_path``)."""
    s = settings or Settings()
    task = task or data.make_date_task(n_test=s.n_test, seed=s.seed)
    results = {}
    for kind in s.kinds:
        width = size_for(kind, s.budget, task)
        model_run = build(kind, width, task, seed=s.seed, prefix_mask=prefix_mask)
        r = Result(kind, KINDS[kind], width, n_params(model_run))
        print(f"{KINDS[kind]}: width {width}, {r.params:,} parameters", flush=True)
        start = time.perf_counter()
        r.curve = transformer.fit(model_run.model, model_run.loss, data.shuffled(task.train, s.batch_size, s.seed),
                                  steps=s.steps, lr=s.lr, report_every=report_every)
        r.seconds_per_step = (time.perf_counter() - start) / len(r.curve)
        start = time.perf_counter()
        r.by_length, r.exact_match, guesses = accuracy_by_length(model_run.translate, task.test)
        r.seconds_per_token = (time.perf_counter() - start) / _tokens_written(guesses)  # batched greedy decoding
        print(f"    test exact match {r.exact_match:.1%}", flush=True)
        results[kind] = r
    if results_path:
        write(results, s, results_path)
    return results


def write(results, settings, path):
    """The results and the settings that made them, as JSON."""
    with open(path, "w") as f:
        json.dump({"settings": asdict(settings), "torch_threads": torch.get_num_threads(),
                   "results": {k: asdict(r) for k, r in results.items()}}, f, indent=1)


def check_budget(results):
    """The parameter counts of the runs, each within TOLERANCE of their mean; a ValueError otherwise."""
    counts = {k: r.params for k, r in results.items()}
    mean = sum(counts.values()) / len(counts)
    far = {k: c for k, c in counts.items() if abs(c - mean) > TOLERANCE * mean}
    if far:
        raise ValueError(f"parameter counts {far} are more than {TOLERANCE:.0%} from their mean {mean:,.0f}")
    return counts


if __name__ == "__main__":  # `make capstone`: the full experiment, with the reference's prefix-LM mask
    import argparse
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=Settings.steps)
    parser.add_argument("--budget", type=int, default=Settings.budget)
    parser.add_argument("--out", default="capstone_results.json")
    args = parser.parse_args()
    try:
        from solutions.capstone import prefix_lm_mask
    except ImportError:  # a student install has no solutions/: run notebook 10 with your own mask instead
        raise SystemExit("`make capstone` runs the reference's prefix-LM mask from the instructor's checkout "
                         "(solutions/); in a student install, run notebook 10, which uses yours")
    t0 = time.perf_counter()
    res = run(Settings(budget=args.budget, steps=args.steps), prefix_mask=prefix_lm_mask, results_path=args.out)
    for r in res.values():
        print(f"{r.name:30} {r.params:8,} params  {r.exact_match:6.1%}  "
              + "  ".join(f"{n}:{a:.0%}" for n, a in r.by_length.items()))
    print(f"{time.perf_counter() - t0:.0f} s in all; results in {args.out}")
