"""Trainable transformers assembled from block *functions* passed in by the caller.

The notebooks pass the learner's own functions (``encoder_block``,
``decoder_block``, ``encdec_decoder_block``, ``embed_with_positions``); the tests
pass the reference's. Nothing here re-implements an exercise, so nothing is
copied into a notebook. Each model holds its weights as parameters laid out as
the nested dicts the blocks take (``help(learner.blocks.encoder_block)`` lists the
keys) and hands plain dicts to the block functions on every forward pass.

* ``MaskedLM``       encoder-only (BERT-style), trained to fill in masked tokens;
* ``DecoderLM``      decoder-only (GPT-style), trained on the next token;
* ``EncoderDecoder`` (T5-style / the original Transformer), trained to translate.
"""
import math
import sys
from dataclasses import dataclass

import torch
from torch import nn

from . import blocks
from .training import progress, step_cap, training_threads


# ------------------------------------------------------------------ configs
@dataclass(frozen=True)
class TransformerConfig:
    """Sizes of one transformer. ``positions`` is "learned" or "sinusoidal"."""
    vocab_size: int
    d_model: int = 64
    n_heads: int = 4
    d_ff: int = 128
    n_layers: int = 2
    max_len: int = 64
    positions: str = "learned"

    def __post_init__(self):
        check_sizes(self.d_model, self.n_heads, self.positions)


@dataclass(frozen=True)
class EncoderDecoderConfig:
    """Sizes of an encoder-decoder; ``tie_embeddings`` shares one table between source and target
    (which needs one vocabulary: src_vocab_size == tgt_vocab_size)."""
    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 64
    n_heads: int = 4
    d_ff: int = 128
    n_enc_layers: int = 2
    n_dec_layers: int = 2
    max_len: int = 64
    positions: str = "learned"
    tie_embeddings: bool = False

    def __post_init__(self):
        check_sizes(self.d_model, self.n_heads, self.positions)
        if self.tie_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError(f"tied embeddings need one vocabulary, but the source has {self.src_vocab_size} "
                             f"tokens and the target {self.tgt_vocab_size}")


def check_sizes(d_model, n_heads, positions):
    if n_heads < 1 or d_model % n_heads:
        raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
    if positions not in ("learned", "sinusoidal"):
        raise ValueError(f"positions must be 'learned' or 'sinusoidal', got {positions!r}")


# ------------------------------------------------------------------ weights
def _linear(g, n_out, n_in):
    k = 1 / math.sqrt(n_in)  # nn.Linear's default range
    return (torch.rand(n_out, n_in, generator=g) * 2 - 1) * k, (torch.rand(n_out, generator=g) * 2 - 1) * k


def attention_parameters(g, D):
    p = {}
    for name in "qkvo":
        w = torch.empty(D, D)
        w.copy_((torch.rand(D, D, generator=g) * 2 - 1) * math.sqrt(6 / (2 * D)))  # Xavier uniform
        p["W_" + name], p["b_" + name] = w, torch.zeros(D)
    return p


def ffn_weights(g, D, F):
    W_1, b_1 = _linear(g, F, D)
    W_2, b_2 = _linear(g, D, F)
    return {"W_1": W_1, "b_1": b_1, "W_2": W_2, "b_2": b_2}


def norm_weights(D):
    return {"weight": torch.ones(D), "bias": torch.zeros(D)}


def encoder_block_weights(g, D, F):
    return {"attn": attention_parameters(g, D), "ln1": norm_weights(D), "ffn": ffn_weights(g, D, F),
            "ln2": norm_weights(D)}


def encdec_block_weights(g, D, F):
    return {"self_attn": attention_parameters(g, D), "ln1": norm_weights(D), "cross_attn": attention_parameters(g, D),
            "ln2": norm_weights(D), "ffn": ffn_weights(g, D, F), "ln3": norm_weights(D)}


def sinusoidal_table(T, D):
    """The fixed table of "Attention Is All You Need", (T, D) float32 (the same as notebook 06's exercise)."""
    p = torch.arange(T, dtype=torch.float64)[:, None]
    angle = p / 10000.0 ** (torch.arange(0, D, 2, dtype=torch.float64) / D)
    pe = torch.zeros(T, D, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(angle), torch.cos(angle[:, : D // 2])
    return pe.float()


def weights_of(module, get=lambda p: p):
    """The weights of a PyTorch module as the course's dict, so a block function can run with them.

    Handles ``nn.MultiheadAttention`` (the attention dict), ``nn.LayerNorm``,
    ``nn.TransformerEncoderLayer`` ({"attn", "ln1", "ffn", "ln2"}) and
    ``nn.TransformerDecoderLayer`` ({"self_attn", "ln1", "cross_attn", "ln2", "ffn", "ln3"}).
    The tensors are views of the module's parameters (so gradients reach them),
    each passed through ``get`` (for example ``lambda p: p.detach().double()``).
    """
    if isinstance(module, nn.MultiheadAttention):
        E = module.embed_dim
        W, b = get(module.in_proj_weight), get(module.in_proj_bias)  # W_q, W_k, W_v stacked
        return {"W_q": W[:E], "W_k": W[E:2 * E], "W_v": W[2 * E:], "b_q": b[:E], "b_k": b[E:2 * E],
                "b_v": b[2 * E:], "W_o": get(module.out_proj.weight), "b_o": get(module.out_proj.bias)}
    if isinstance(module, nn.LayerNorm):
        return {"weight": get(module.weight), "bias": get(module.bias)}
    if isinstance(module, (nn.TransformerEncoderLayer, nn.TransformerDecoderLayer)):
        ffn = {"W_1": get(module.linear1.weight), "b_1": get(module.linear1.bias),
               "W_2": get(module.linear2.weight), "b_2": get(module.linear2.bias)}
        if isinstance(module, nn.TransformerEncoderLayer):
            return {"attn": weights_of(module.self_attn, get), "ln1": weights_of(module.norm1, get), "ffn": ffn,
                    "ln2": weights_of(module.norm2, get)}
        return {"self_attn": weights_of(module.self_attn, get), "ln1": weights_of(module.norm1, get),
                "cross_attn": weights_of(module.multihead_attn, get), "ln2": weights_of(module.norm2, get),
                "ffn": ffn, "ln3": weights_of(module.norm3, get)}
    raise TypeError(f"weights_of knows nn.MultiheadAttention, nn.LayerNorm and nn.Transformer*Layer, "
                    f"not {type(module).__name__}")


def seeded_linear(g, n_in, n_out):
    """An nn.Linear whose weights come from ``g`` (so a model's ``seed`` fixes all its weights)."""
    layer = nn.Linear(n_in, n_out)
    W, b = _linear(g, n_out, n_in)
    with torch.no_grad():
        layer.weight.copy_(W)
        layer.bias.copy_(b)
    return layer


def by_prompt_length(prompts, write, eos_id, device=None):
    """The new tokens of each prompt (a list of ids), up to and without its <eos>: prompts of one length go
    together, so none needs padding; ``write(ids)`` turns a (b, n) batch of prompts into (b, new) tokens."""
    by_length = {}
    for k, p in enumerate(prompts):
        by_length.setdefault(len(p), []).append(k)
    out = [None] * len(prompts)
    for ks in by_length.values():
        new = write(torch.tensor([prompts[k] for k in ks], device=device))
        for row, k in zip(new.tolist(), ks):
            out[k] = row[:row.index(eos_id)] if eos_id in row else row
    return out


def as_parameters(tree):
    """A nested dict of tensors as nested ModuleDict / ParameterDict."""
    if all(torch.is_tensor(v) for v in tree.values()):
        return nn.ParameterDict({k: nn.Parameter(v) for k, v in tree.items()})
    return nn.ModuleDict({k: as_parameters(v) for k, v in tree.items()})


def as_dict(module):
    """The plain nested dict of tensors a block function reads."""
    if isinstance(module, nn.ParameterDict):
        return dict(module.items())
    return {k: as_dict(v) for k, v in module.items()}


class Embedding(nn.Module):
    """Token table E (V, D) and positional table P (max_len, D), learned or fixed."""

    def __init__(self, g, V, D, max_len, positions):
        super().__init__()
        self.E = nn.Parameter(torch.randn(V, D, generator=g) * D ** -0.5)
        if positions == "learned":
            self.P = nn.Parameter(torch.randn(max_len, D, generator=g) * 0.02)
        else:
            self.register_buffer("P", sinusoidal_table(max_len, D))
        self.scale = math.sqrt(D)


def _check_ids(ids, V, what):
    if ids.numel() and (int(ids.max()) >= V or int(ids.min()) < 0):
        raise ValueError(f"the {what} ids go from {int(ids.min())} to {int(ids.max())}, but the {what} vocabulary "
                         f"has {V} tokens (ids 0 .. {V - 1})")


# ------------------------------------------------------------------ models
class _Stack(nn.Module):
    """Embeddings and a stack of blocks of one kind (the learner's function), shared by MaskedLM and DecoderLM."""

    def __init__(self, cfg, block, embed_with_positions, g):
        super().__init__()
        self.cfg, self.block, self.embed_fn = cfg, block, embed_with_positions
        self.embed = Embedding(g, cfg.vocab_size, cfg.d_model, cfg.max_len, cfg.positions)
        self.layers = nn.ModuleList(as_parameters(encoder_block_weights(g, cfg.d_model, cfg.d_ff))
                                    for _ in range(cfg.n_layers))

    def hidden(self, ids, valid=None):
        """(B, T) ids -> (B, T, D) contextual vectors."""
        _check_ids(ids, self.cfg.vocab_size, "input")
        x = self.embed_fn(ids, self.embed.E * self.embed.scale, self.embed.P)  # (B, T, D)
        for layer in self.layers:
            x = self.block(x, valid, as_dict(layer), self.cfg.n_heads)
        return x


@torch.no_grad()
def layer_states(model, ids, valid=None):
    """The vector of every position at every depth of a ``MaskedLM`` or ``DecoderLM``: [(B, T, D)], the embedding
    (tokens plus positions, what the first block reads) first, then each block's output."""
    x = model.embed_fn(ids, model.embed.E * model.embed.scale, model.embed.P)
    states = [x]
    for layer in model.layers:
        x = model.block(x, valid, as_dict(layer), model.cfg.n_heads)
        states.append(x)
    return states


class MaskedLM(_Stack):
    """Encoder-only: every position reads every real position; predicts the tokens hidden by [MASK]."""

    def __init__(self, cfg, encoder_block, embed_with_positions, seed=0):
        g = torch.Generator().manual_seed(seed)
        super().__init__(cfg, encoder_block, embed_with_positions, g)
        self.head = seeded_linear(g, cfg.d_model, cfg.vocab_size)

    def forward(self, ids, valid=None):
        return self.head(self.hidden(ids, valid))  # (B, T, V)


class DecoderLM(_Stack):
    """Decoder-only: position i reads positions j <= i; predicts the next token. The LM head is tied to E."""

    def __init__(self, cfg, decoder_block, embed_with_positions, seed=0, block_step=None):
        super().__init__(cfg, decoder_block, embed_with_positions, torch.Generator().manual_seed(seed))
        self.block_step = block_step

    def forward(self, ids, valid=None):
        """(B, T) ids -> (B, T, V) logits; row t predicts token t + 1."""
        return self.hidden(ids, valid) @ self.embed.E.T  # (B, T, V)

    @torch.no_grad()
    def step(self, ids, cache=None):
        """Feed new tokens with a KV cache (notebook 09): (B, T_new) ids -> (B, T_new, V) logits and the grown cache.

        ``cache`` is None at first, then what the previous call returned: one
        (K, V) pair per layer, each (B, H, T_past, d_k), made by the
        ``block_step`` function given to the model (the learner's
        ``decoder_block_step``). The new tokens take positions T_past ..
        T_past + T_new - 1 of the positional table. No padding: every row of the
        batch has the same length.
        """
        if self.block_step is None:
            raise ValueError("this model was built without block_step: pass block_step=decoder_block_step to "
                             "DecoderLM to generate with a cache")
        if ids.dim() != 2 or ids.shape[1] < 1:
            raise ValueError(f"ids must be (B, T_new) with T_new >= 1, got shape {tuple(ids.shape)}")
        if cache is not None and len(cache) != len(self.layers):
            raise ValueError(f"the cache has {len(cache)} layers' keys and values; this model has {len(self.layers)}")
        _check_ids(ids, self.cfg.vocab_size, "input")
        past = 0 if cache is None else cache[0][0].shape[-2]
        if past + ids.shape[1] > self.cfg.max_len:
            raise ValueError(f"the text would reach {past + ids.shape[1]} positions, but the positional table has "
                             f"{self.cfg.max_len} (max_len)")
        x = self.embed_fn(ids, self.embed.E * self.embed.scale, self.embed.P[past:])  # positions past ..
        grown = []
        for layer, layer_cache in zip(self.layers, cache or [None] * len(self.layers)):
            x, layer_cache = self.block_step(x, as_dict(layer), self.cfg.n_heads, layer_cache)
            grown.append(layer_cache)
        return x @ self.embed.E.T, grown  # (B, T_new, V)

    @torch.no_grad()
    def generate(self, prompt, max_new_tokens, eos_id=None):
        """Greedy decoding: append up to ``max_new_tokens`` most probable tokens to one prompt (list of ids)."""
        return self._extend(prompt, max_new_tokens, eos_id, lambda logits: int(logits.argmax()))

    @torch.no_grad()
    def sample(self, prompt, max_new_tokens, temperature=1.0, eos_id=None, generator=None):
        """Sampling at ``temperature`` (> 0): each next token is drawn from softmax(logits / temperature).

        Greedy decoding is ``generate``, not a temperature of 0: softmax(logits / 0) is not a distribution."""
        if not temperature > 0:
            raise ValueError(f"sampling needs a temperature > 0, got {temperature}; for the most probable token "
                             f"at every step use generate (greedy decoding)")
        draw = lambda logits: int(torch.multinomial(torch.softmax(logits / temperature, -1), 1,  # noqa: E731
                                                    generator=generator))
        return self._extend(prompt, max_new_tokens, eos_id, draw)

    def _extend(self, prompt, max_new_tokens, eos_id, choose):
        ids = list(prompt)
        for _ in range(max_new_tokens):
            window = torch.tensor([ids[-self.cfg.max_len:]], device=self.embed.E.device)
            nxt = choose(self(window)[0, -1])  # from the (V,) prediction after the last token
            ids.append(nxt)
            if nxt == eos_id:
                break
        return ids

    @torch.no_grad()
    def complete(self, prompts, max_new_tokens, eos_id, generate=None, choose=None):
        """Continuations of many prompts (lists of ids), batched by prompt length (no padding needed).

        Without ``generate``, every step feeds the whole text again (no cache) and
        a batch stops once all its rows have written <eos>; ``choose(logits)`` picks
        each next token from the (b, V) logits of a batch: the argmax (greedy) by
        default, or a draw (notebook 07's ``sample_next``). With ``generate``,
        ``generate(self.step, ids, eos_id, max_new_tokens)`` writes each batch (notebook
        09's ``greedy_generate``, with the KV cache of ``step``).
        Returns the new tokens of each prompt, up to and without its <eos>.
        """
        def write(ids):  # (b, n) -> (b, <= max_new_tokens)
            return self._recompute(ids, max_new_tokens, eos_id, choose) if generate is None \
                else generate(self.step, ids, eos_id, max_new_tokens)
        return by_prompt_length(prompts, write, eos_id, self.embed.E.device)

    def _recompute(self, ids, max_new_tokens, eos_id, choose=None):
        """Generation without a cache: the whole text (its last max_len tokens) at every step; ``choose`` (default
        the argmax) picks the next tokens from the (b, V) logits."""
        n = ids.shape[1]
        done = torch.zeros(ids.shape[0], dtype=torch.bool, device=ids.device)
        for _ in range(max_new_tokens):
            logits = self(ids[:, -self.cfg.max_len:])[:, -1]  # (b, V)
            nxt = logits.argmax(-1) if choose is None else choose(logits)  # (b,)
            ids = torch.cat([ids, nxt[:, None]], dim=1)
            done |= nxt == eos_id
            if bool(done.all()):
                break
        return ids[:, n:]


class EncoderDecoder(nn.Module):
    """P(y_t | y_<t, x): a bidirectional encoder, and a causal decoder that cross-attends to it."""

    def __init__(self, cfg, decoder_block, embed_with_positions, encoder_block=blocks.encoder_block, seed=0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.cfg, self.dec_block, self.enc_block, self.embed_fn = cfg, decoder_block, encoder_block, \
            embed_with_positions
        D, F = cfg.d_model, cfg.d_ff
        self.src_embed = Embedding(g, cfg.src_vocab_size, D, cfg.max_len, cfg.positions)
        self.tgt_embed = self.src_embed if cfg.tie_embeddings else \
            Embedding(g, cfg.tgt_vocab_size, D, cfg.max_len, cfg.positions)
        self.enc_layers = nn.ModuleList(as_parameters(encoder_block_weights(g, D, F))
                                        for _ in range(cfg.n_enc_layers))
        self.dec_layers = nn.ModuleList(as_parameters(encdec_block_weights(g, D, F))
                                        for _ in range(cfg.n_dec_layers))
        self.head = seeded_linear(g, D, cfg.tgt_vocab_size)

    def encode(self, src, src_valid=None):
        """(B, T_x) source ids -> (B, T_x, D) memory."""
        _check_ids(src, self.cfg.src_vocab_size, "source")
        x = self.embed_fn(src, self.src_embed.E * self.src_embed.scale, self.src_embed.P)
        for layer in self.enc_layers:
            x = self.enc_block(x, src_valid, as_dict(layer), self.cfg.n_heads)
        return x

    def run_decoder(self, tgt_in, memory, src_valid=None, tgt_valid=None):
        """A tuple (logits (B, T_y, V), every layer's cross-attention weights [(B, H, T_y, T_x)]), unlike the
        exercises' ``run_decoder``, which returns the logits alone (``[0]`` here). tgt_in (B, T_y) ids, memory
        (B, T_x, D); src_valid (B, T_x), tgt_valid (B, T_y): bool, True = a real token, or None (no padding)."""
        _check_ids(tgt_in, self.cfg.tgt_vocab_size, "target")
        y = self.embed_fn(tgt_in, self.tgt_embed.E * self.tgt_embed.scale, self.tgt_embed.P)
        cross = []
        for layer in self.dec_layers:
            y, w = self.dec_block(y, memory, tgt_valid, src_valid, as_dict(layer), self.cfg.n_heads)
            cross.append(w)
        return self.head(y), cross

    def forward(self, src, src_valid, tgt_in, tgt_valid=None):
        return self.run_decoder(tgt_in, self.encode(src, src_valid), src_valid, tgt_valid)[0]  # (B, T_y, V)

    def cross_kv(self, memory):
        """Every decoder layer's cross-attention keys and values, [(K, V)] with each (B, H, T_x, d_k).

        They depend on the source alone: a translation computes them once and
        hands them to every ``run_decoder_kv`` call (notebook 08's greedy_translate).
        """
        return [blocks.cross_keys_values(memory, as_dict(layer)["cross_attn"], self.cfg.n_heads)
                for layer in self.dec_layers]

    def run_decoder_kv(self, tgt_in, kv, src_valid=None, tgt_valid=None):
        """Logits (B, T_y, V) from ``cross_kv``'s keys and values: ``run_decoder`` without recomputing them.

        Ready-made (``blocks.encdec_decoder_block_kv``), equal to ``run_decoder(tgt_in, memory, ...)[0]``; masks
        as ``run_decoder``'s. While decoding greedily the target so far has no padding: pass tgt_valid=None.
        """
        _check_ids(tgt_in, self.cfg.tgt_vocab_size, "target")
        if not (isinstance(kv, (list, tuple)) and len(kv) == len(self.dec_layers)):
            raise ValueError(f"run_decoder_kv takes what cross_kv returned (a list of {len(self.dec_layers)} (K, V) "
                             f"pairs, one per decoder layer)")
        y = self.embed_fn(tgt_in, self.tgt_embed.E * self.tgt_embed.scale, self.tgt_embed.P)
        for layer, layer_kv in zip(self.dec_layers, kv):
            y, _ = blocks.encdec_decoder_block_kv(y, layer_kv, tgt_valid, src_valid, as_dict(layer),
                                                  self.cfg.n_heads)
        return self.head(y)

    @torch.no_grad()
    def greedy(self, src, src_valid, bos_id, eos_id, max_len):
        """Greedy translation of a batch: (B, <= max_len) ids (0 after <eos>) and the last step's cross weights."""
        memory = self.encode(src, src_valid)
        B = src.shape[0]
        out = torch.full((B, 1), bos_id, dtype=torch.long, device=src.device)
        done = torch.zeros(B, dtype=torch.bool, device=src.device)
        cross = []
        for _ in range(max_len):
            logits, cross = self.run_decoder(out, memory, src_valid)
            nxt = logits[:, -1].argmax(-1).masked_fill(done, 0)  # (B,)
            out = torch.cat([out, nxt[:, None]], dim=1)
            done |= nxt == eos_id
            if bool(done.all()):
                break
        return out[:, 1:], cross


# ------------------------------------------------------------------ training helpers for the notebooks
def next_token_loss(logits, ids, valid=None):
    """Mean cross-entropy of every real next token: logits (B, T, V) row t against ids[:, t + 1].

    The training loss of a decoder-only model (notebook 07 builds it from the
    learner's ``lm_log_prob``; notebook 09, whose exercises are elsewhere, uses this).
    """
    targets = ids[:, 1:] if valid is None else ids[:, 1:].masked_fill(~valid[:, 1:], -100)
    return nn.functional.cross_entropy(logits[:, :-1].transpose(1, 2), targets, ignore_index=-100)


def fit(model, loss_of_batch, batches, steps, lr=3e-3, report_every=100, evaluate=None, threads=None, desc=None):
    """Train for exactly ``steps`` steps with AdamW and a one-cycle schedule, with a progress bar (``desc``).

    ``loss_of_batch(batch)`` returns the scalar loss of one batch (it calls the
    model); ``evaluate()`` (optional) returns a number printed every
    ``report_every`` steps with the loss. The bar (``training.progress``) moves
    at every step: a widget in JupyterLab, text elsewhere, off in a capped run.
    Returns the list of (step, loss).

    The run is fixed by its arguments, never by the clock: the same steps, the
    same batches (``batches`` is seeded by the caller) and a fixed number of
    torch threads during training (``threads``, default 1: see
    ``learner.training``), so a figure the notebook states comes out the same
    on a slow or busy machine, only later. The first ``WARM_STEPS`` steps run at
    the schedule's starting rate, then a one-cycle schedule spans the rest.

    The environment variable ``COURSE_MAX_TRAIN_STEPS`` caps ``steps``: an
    instructor autograding a class does not need every submission's model
    trained to full accuracy (the graded cells do not depend on it).
    """
    import time
    steps = step_cap(steps)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr / 25, weight_decay=0.01)  # OneCycle's starting rate
    schedule = None
    history, start = [], time.perf_counter()
    model.train()
    bar = progress(steps, desc=desc)
    try:
        with training_threads(threads):
            for step in range(1, steps + 1):
                loss = loss_of_batch(next(batches))
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                if schedule is not None:
                    schedule.step()
                history.append((step, loss.item()))
                bar.update(1)
                if step == WARM_STEPS and steps - step >= 20:  # a one-cycle schedule needs room for its warm-up
                    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=lr, total_steps=steps - step,
                                                                   pct_start=0.1)
                if step % report_every == 0 or step == steps:
                    extra = ""
                    if evaluate is not None:
                        model.eval()
                        extra = f"  {evaluate()}"
                        model.train()
                    bar.set_postfix_str(f"loss {loss.item():.4f}", refresh=False)
                    bar.write(f"{desc + ': ' if desc else ''}step {step:4d}/{steps}  loss {loss.item():7.4f}{extra}  "
                              f"{time.perf_counter() - start:5.1f} s", file=sys.stdout)
    finally:
        bar.close()
        model.eval()
    return history


WARM_STEPS = 10
