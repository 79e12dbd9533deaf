"""Best-of-N wall-clock timing shared by the benchmarks (synchronising CUDA around each run)."""
import time

import torch


def timed(fn, repeat, device):
    """The best of ``repeat`` runs of ``fn()`` in seconds, after one warm-up run."""
    fn()  # warm-up
    if device == "cuda":
        torch.cuda.synchronize()
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t)
    return best
