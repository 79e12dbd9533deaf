"""The checks' toy encoder-decoder (notebook 08's model-level exercises and 09's generation): small, seeded and
fast, with parts the learner's functions call back."""

import torch

from .common import allow_in_shipped, seeded_randn, F64
from .transformer_parts import valid_mask


# ---------------------------------------------------------------- the checks' toy encoder-decoder
class ToyEncDec:
    """A tiny encoder-decoder in plain torch, given to the learner as three functions (``ToyPart``).

    encode(src, src_valid)                  memory = tanh(x + mean of the real x @ A), x = E_src[src] + P
    cross_kv(memory)                        (K, V) = (memory W_k, memory W_v)
    run_decoder(tgt_in, kv, src_valid, tgt_valid) logits: a causal running mean over the real target tokens,
                                            attention over the real source keys, then W_o and a bias by position

    Every argument matters: leaving out a mask or a step changes the logits. No
    reference: learners' machines run it in the visible checks.
    """

    def __init__(self, E_src, E_tgt, P, A, W_k, W_v, W_q, W_o, bias):
        self.E_src, self.E_tgt, self.P, self.A, self.W_k, self.W_v, self.W_q, self.W_o, self.bias = \
            E_src, E_tgt, P, A, W_k, W_v, W_q, W_o, bias

    _WEIGHTS = ("E_src", "E_tgt", "P", "A", "W_k", "W_v", "W_q", "W_o", "bias")

    def __eq__(self, other):
        return type(other) is ToyEncDec and all(torch.equal(getattr(self, n), getattr(other, n))
                                                for n in self._WEIGHTS)

    def __repr__(self):
        return (f"ToyEncDec(source vocabulary {self.E_src.shape[0]}, target vocabulary {self.E_tgt.shape[0]}, "
                f"width {self.E_src.shape[1]})")

    def _w(self, name, like):
        return getattr(self, name).to(like.device)  # the model follows its input's device

    @staticmethod
    def random_ids(ids, what):
        if not torch.is_tensor(ids) or ids.dtype != torch.long or ids.dim() != 2:
            got = f"shape {tuple(ids.shape)} and dtype {ids.dtype}" if torch.is_tensor(ids) else type(ids).__name__
            raise ValueError(f"{what} must be a LongTensor of shape (B, T), got {got}")

    def _valid(self, valid, ids, what):
        if valid is None:
            return torch.ones(ids.shape, dtype=torch.bool, device=ids.device)
        if not torch.is_tensor(valid) or valid.dtype != torch.bool or tuple(valid.shape) != tuple(ids.shape):
            raise ValueError(f"{what} must be None or a bool tensor of shape {tuple(ids.shape)}")
        return valid

    def encode(self, src, src_valid=None):
        self.random_ids(src, "encode's src")
        valid = self._valid(src_valid, src, "encode's src_valid")
        if src.shape[1] > self.P.shape[0]:
            raise ValueError(f"this model reads at most {self.P.shape[0]} positions")
        x = self._w("E_src", src)[src] + self._w("P", src)[:src.shape[1]]  # (B, T_x, D)
        real = valid[..., None].to(x.dtype)
        mean = (x * real).sum(1) / real.sum(1).clamp(min=1)  # (B, D): the real tokens only
        return torch.tanh(x + (mean @ self._w("A", src))[:, None])

    def cross_kv(self, memory):
        if not torch.is_tensor(memory) or memory.dim() != 3:
            raise ValueError("cross_kv takes the memory encode returned, (B, T_x, D)")
        return memory @ self._w("W_k", memory), memory @ self._w("W_v", memory)

    def run_decoder(self, tgt_in, kv, src_valid=None, tgt_valid=None):
        self.random_ids(tgt_in, "run_decoder's tgt_in")
        if not (isinstance(kv, tuple) and len(kv) == 2 and all(torch.is_tensor(t) and t.dim() == 3 for t in kv)
                and kv[0].shape[0] == tgt_in.shape[0]):
            raise ValueError("run_decoder was given keys and values it did not make: pass what cross_kv returned for "
                             "this batch, unchanged")
        K, V = kv
        if src_valid is not None and (not torch.is_tensor(src_valid) or tuple(src_valid.shape) != tuple(K.shape[:2])):
            raise ValueError(f"run_decoder's src_valid must be None or a bool tensor of shape {tuple(K.shape[:2])}")
        valid = self._valid(tgt_valid, tgt_in, "run_decoder's tgt_valid")
        T = tgt_in.shape[1]
        if T > self.P.shape[0]:
            raise ValueError(f"this model writes at most {self.P.shape[0]} positions")
        y = self._w("E_tgt", tgt_in)[tgt_in] + self._w("P", tgt_in)[:T]  # (B, T_y, D)
        real = valid[..., None].to(y.dtype)
        running = (y * real).cumsum(1) / real.cumsum(1).clamp(min=1)  # causal: positions <= t that are real
        s = torch.tanh(y + running)
        scores = (s @ self._w("W_q", tgt_in)) @ K.transpose(1, 2)  # (B, T_y, T_x)
        if src_valid is not None:
            scores = scores.masked_fill(~src_valid[:, None, :], float("-inf"))
        weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
        return torch.tanh(s + weights @ V) @ self._w("W_o", tgt_in) + self._w("bias", tgt_in)[:T]


class ToyPart:
    """One of ToyEncDec's three functions, ``encode``, ``cross_kv`` or ``run_decoder``, as a callable."""

    def __init__(self, model, which):
        self.model, self.which = model, which

    def __eq__(self, other):
        return type(other) is ToyPart and self.which == other.which and self.model == other.model

    def __repr__(self):
        return f"the toy model's {self.which}"

    def __call__(self, *args, **kwargs):
        return getattr(self.model, self.which)(*args, **kwargs)


def toy_encdec(g, V_src=8, V_tgt=7, D=5, T_max=24, eos_id=2, eos_bias=0.0, dtype=F64):
    """A random ToyEncDec and its three parts; the bias makes <eos> likelier as the target grows (``eos_bias`` more:
    -60 never, +60 always), and never writes padding (0) or <bos> (1). Its weights, and so its outputs, in ``dtype``."""
    bias = seeded_randn(g, T_max, V_tgt, scale=0.5)
    bias[:, eos_id] += 1.2 * torch.arange(T_max, dtype=F64) - 4.0 + eos_bias
    bias[:, :eos_id] -= 20.0  # padding (0) and <bos> (1) are never written
    model = ToyEncDec(seeded_randn(g, V_src, D, scale=1.5), seeded_randn(g, V_tgt, D, scale=1.5), seeded_randn(g, T_max, D),
                      seeded_randn(g, D, D, scale=0.8), seeded_randn(g, D, D), seeded_randn(g, D, D, scale=1.5), seeded_randn(g, D, D),
                      seeded_randn(g, D, V_tgt, scale=2.0), bias)
    for name in ToyEncDec._WEIGHTS:
        setattr(model, name, getattr(model, name).to(dtype))
    return tuple(ToyPart(model, w) for w in ("encode", "cross_kv", "run_decoder"))


allow_in_shipped(ToyEncDec, ToyPart)  # shipped expectations hold these cases


def random_ids(g, B, T, V, lengths=None, lo=0):
    ids = torch.randint(lo, V, (B, T), generator=g)
    if lengths is not None:
        ids = ids.masked_fill(~valid_mask(lengths, T), 0)  # padding is id 0
    return ids
