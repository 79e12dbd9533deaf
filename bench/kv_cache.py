"""Speed of greedy generation with and without the KV cache, measured in the same run.

    python bench/kv_cache.py [--device cpu|cuda] [--threads N] [--lengths 32 128 512] [--repeat N]

One DecoderLM with random weights (D=256, 4 heads, 4 layers, max_len 1024) built
from the reference functions generates N new tokens after a prompt of 16, twice:

* cached:   ``greedy_generate`` with ``DecoderLM.step`` and the reference
  ``decoder_block_step``: the prompt once, then one token per call, each reading
  the cached keys and values;
* uncached: ``DecoderLM.generate``: the whole text through the model again at
  every step (what notebook 07 does).

For each N it prints both times and the ratio uncached / cached, then the time of
one step at the start (the first new token after the prompt) and at the end (the
last one) of the run: best of ``--repeat`` single steps. With the cache a step
feeds one token whatever the length, so it stays nearly flat; without it a step
feeds the whole text, so it grows with the length. The two generations must
produce the same tokens; the script says whether they did.
"""
import argparse
import sys
import time

import torch

from learner.transformer import DecoderLM, TransformerConfig
from solutions import decoder, encoder, kv_cache
from timing import timed  # bench/timing.py, beside this script
from results import record  # bench/results.py: what make bench writes

PROMPT = 16


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def wall(fn, device):
    """One run of ``fn()``: (its result, seconds)."""
    sync(device)
    t = time.perf_counter()
    out = fn()
    sync(device)
    return out, time.perf_counter() - t


def step_times(model, prompt, n_new, repeat, device):
    """Best-of-``repeat`` time of one step at the first and at the last new token, cached and uncached."""
    ids = torch.cat([prompt, torch.randint(0, model.cfg.vocab_size, (1, n_new), device=device)], dim=1)
    out = {}
    for where, t_past in (("start", PROMPT), ("end", PROMPT + n_new - 1)):
        _, cache = model.step(ids[:, :t_past])  # the cache of the text before this step
        new = ids[:, t_past:t_past + 1]
        out["cached", where] = timed(lambda: model.step(new, cache), repeat, device)
        with torch.no_grad():
            out["uncached", where] = timed(lambda: model(ids[:, :t_past + 1]), repeat, device)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--lengths", type=int, nargs="+", default=[32, 128, 512])
    p.add_argument("--repeat", type=int, default=10)
    args = p.parse_args()
    dev = args.device
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cfg = TransformerConfig(vocab_size=1000, d_model=256, n_heads=4, d_ff=1024, n_layers=4, max_len=1024)
    if PROMPT + max(args.lengths) > cfg.max_len:
        p.error(f"a prompt of {PROMPT} and {max(args.lengths)} new tokens exceed max_len={cfg.max_len}")
    model = DecoderLM(cfg, decoder.decoder_block, encoder.embed_with_positions, seed=0,
                      block_step=kv_cache.decoder_block_step).to(dev).eval()
    prompt = torch.randint(0, cfg.vocab_size, (1, PROMPT), device=dev)

    no_eos = cfg.vocab_size  # an id the model cannot write, so that every generation writes its n tokens

    def cached(n):
        return kv_cache.greedy_generate(lambda ids, c: model.step(ids, c), prompt, no_eos, n)[0].tolist()

    def uncached(n):
        return model.generate(prompt[0].tolist(), n)[PROMPT:]

    print(f"device {dev}, torch {torch.__version__}, {torch.get_num_threads()} threads; DecoderLM D={cfg.d_model}, "
          f"H={cfg.n_heads}, {cfg.n_layers} layers, d_ff={cfg.d_ff}, V={cfg.vocab_size}, float32; prompt of {PROMPT}")
    print(f"totals: one run each after a warm-up; steps: best of {args.repeat} single steps")
    print(f"{'N new':>6} {'cached':>10} {'uncached':>10} {'ratio':>7}   {'cached step start/end':>24}   "
          f"{'uncached step start/end':>26}   same tokens")
    cached(4), uncached(4)  # warm-up
    all_same = True
    for n in args.lengths:
        a, t_cached = wall(lambda: cached(n), dev)
        b, t_uncached = wall(lambda: uncached(n), dev)
        s = step_times(model, prompt, n, args.repeat, dev)
        diff = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
        same = "yes" if a == b else f"NO (first differs at new token {diff})"
        all_same &= a == b
        record(f"KV cache ({dev})", f"{n} new tokens", t_cached, t_uncached, t_uncached / t_cached, "s",
               "recomputing the whole text's time / the cached generation's", "same tokens" if a == b else "DIFFER")
        print(f"{n:>6} {t_cached:>9.3f}s {t_uncached:>9.3f}s {t_uncached / t_cached:>7.2f}   "
              f"{s['cached', 'start'] * 1e3:>9.2f}ms / {s['cached', 'end'] * 1e3:>7.2f}ms   "
              f"{s['uncached', 'start'] * 1e3:>10.2f}ms / {s['uncached', 'end'] * 1e3:>8.2f}ms   {same}")
    print("the cached and uncached generations produced the same tokens" if all_same else
          "the cached and uncached generations DIFFER (see the last column)")
    return 0 if all_same else 1


if __name__ == "__main__":
    sys.exit(main())
