"""The capstone's models (notebook 10): the ready-made parts, the five kinds of run behind one interface, and the
width that puts each within the parameter budget (``learner.capstone_runs`` trains and measures them)."""
import bisect
import functools

import torch
import torch.nn.functional as F
from torch import nn

from . import blocks, data, rnn_models as rnn, transformer

KINDS = {"rnn_fixed": "RNN, fixed context", "rnn_attention": "RNN with attention",
         "decoder_causal": "decoder-only, causal mask", "decoder_prefix": "decoder-only, prefix-LM mask",
         "encoder_decoder": "encoder-decoder transformer"}
TOLERANCE = 0.10  # every model's parameter count within 10% of the budget
MAX_NEW = 12      # the longest answer: 10 characters and <eos>, with one to spare
EMBED = 32        # the RNNs' embedding width (notebook 05's)
MAX_LEN = 64      # the transformers' positional tables: a diary line (44 tokens) and its answer, in one text
# the transformers' positions: sinusoidal (Vaswani et al. 2017), nothing to learn. A learned table meets its last
# places rarely (most training pairs are short: half are dates alone), and the encoder-decoder then fell below 90%
# on the longest lines with one seed of three; with the fixed table every seed stays above it.
POSITIONS = "sinusoidal"


# ---------------------------------------------------------------- ready-made parts
def causal_lm_mask(prefix_lengths, T):
    """(B, T, T) bool, True = may attend: the fully causal mask, whatever the prefix."""
    allowed = torch.ones(T, T, dtype=torch.bool, device=prefix_lengths.device).tril()
    return allowed.expand(prefix_lengths.shape[0], T, T)


def attention_step(prev_ids, h_prev, states, src_mask, p):
    """Notebook 05b's decoder step (Bahdanau), written with ``F.linear``: look, then update, then score."""
    scores = F.linear(torch.tanh(F.linear(h_prev, p["W_q"])[:, None] + F.linear(states, p["W_k"])), p["u"][None])
    scores = scores[..., 0].masked_fill(~src_mask, float("-inf"))  # (B, T_x)
    alpha = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    context = torch.bmm(alpha[:, None], states)[:, 0]  # (B, d_enc)
    h = torch.tanh(F.linear(F.embedding(prev_ids, p["E_tgt"]), p["W_x"]) + F.linear(context, p["W_c"])
                   + F.linear(h_prev, p["W_h"], p["b"]))
    return F.linear(torch.cat([h, context], dim=-1), p["W_out"], p["b_out"]), h, alpha


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
        self.cfg = transformer.TransformerConfig(vocab_size, d_model, n_heads, d_ff, n_layers, max_len, POSITIONS)
        self.mask_fn = mask_fn
        self.embed = transformer.Embedding(g, vocab_size, d_model, max_len, POSITIONS)
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
        logits = self.logits(b)
        targets = b["tgt_out"].masked_fill(~b["tgt_mask"], -100)
        return F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=-100)

    def logits(self, b):
        return self.model(b["src"], b["src_mask"], b["tgt_in"], b["tgt_mask"]) if self.kind == "encoder_decoder" \
            else self.model(b["src"], b["src_mask"], b["tgt_in"])

    @torch.no_grad()
    def right(self, pairs):
        """For each pair, True when greedy decoding writes the target exactly: when, reading the right answer so
        far (teacher forcing), the model's most likely next token is the right one at every place, <eos> included.
        One pass over the targets instead of one per written token."""
        b = data.make_batch(pairs, self.task.src_vocab, self.task.tgt_vocab)
        hit = (self.logits(b).argmax(-1) == b["tgt_out"]) | ~b["tgt_mask"]
        return hit.all(dim=1).tolist()

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

    def _forward(self, pairs):
        """(logits (B, T - 1, V) at every place but the last, targets (B, T - 1) with -100 off the answer)."""
        rows = [data.lm_ids(s, t, self.vocab) for s, t in pairs]
        prefix = torch.tensor([len(data.lm_ids(s, None, self.vocab)) for s, _ in pairs])
        ids, valid = data.pad_rows(rows)
        logits = self.model(ids, prefix, valid)
        targets = ids[:, 1:].masked_fill(~valid[:, 1:], -100)
        before = torch.arange(1, ids.shape[1])[None, :] < prefix[:, None]  # the prompt is given, not predicted
        return logits[:, :-1], targets.masked_fill(before, -100)

    def loss(self, pairs):
        logits, targets = self._forward(pairs)
        return F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=-100)

    @torch.no_grad()
    def right(self, pairs):
        """As ``_Seq2Seq.right``: True where every next answer token, read after the right ones, is the argmax."""
        logits, targets = self._forward(pairs)
        return ((logits.argmax(-1) == targets) | (targets == -100)).all(dim=1).tolist()

    @torch.no_grad()
    def translate(self, pairs):
        eos = data.EOS_ID  # the special tokens have the same ids in every vocabulary of the task

        def write(ids):  # (b, n) prompts of one length: greedy, the whole text again at every step (no cache)
            n, prefix = ids.shape[1], torch.full((ids.shape[0],), ids.shape[1])
            done = torch.zeros(ids.shape[0], dtype=torch.bool)
            for _ in range(MAX_NEW):
                nxt = self.model(ids, prefix)[:, -1].argmax(-1).masked_fill(done, 0)  # the course's contract: 0 after <eos>
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
        return _Seq2Seq(kind, rnn.FixedContextSeq2Seq(V_src, V_tgt, D=EMBED, d_h=width, seed=seed), task)
    if kind == "rnn_attention":
        model = rnn.AttentionSeq2Seq(V_src, V_tgt, D=EMBED, d_h=width, d_a=width // 2, seed=seed, step=attention_step)
        return _Seq2Seq(kind, model, task)
    if kind == "encoder_decoder":
        cfg = transformer.EncoderDecoderConfig(V_src, V_tgt, d_model=width, n_heads=4, d_ff=2 * width, n_enc_layers=2,
                                               n_dec_layers=2, max_len=MAX_LEN, positions=POSITIONS)
        return _Seq2Seq(kind, transformer.EncoderDecoder(cfg, _encdec_block, blocks.embed_with_positions,
                                                         blocks.encoder_block, seed=seed), task)
    if kind in ("decoder_causal", "decoder_prefix"):
        mask_fn = causal_lm_mask if kind == "decoder_causal" else prefix_mask
        if mask_fn is None:
            raise ValueError("the prefix-LM run needs a mask function: prefix_mask=prefix_lm_mask")
        model = PrefixDecoder(len(data.lm_vocab(task)), width, 4, 2 * width, 4, MAX_LEN, mask_fn, seed=seed)
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
