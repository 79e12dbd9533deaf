"""Speed of the reference against PyTorch's own kernels, measured in the same run.

    python bench/attention.py [--device cpu|cuda] [--repeat N]

Prints, for several sizes, the time of the reference's masked_attention and of
torch.nn.functional.scaled_dot_product_attention with the same boolean mask, and
their ratio (reference / SDPA); the same for softmax against torch.softmax. The
reference is written to be read, not to be fast: the ratios say what clarity costs.
"""
import argparse

import torch
import torch.nn.functional as F

from solutions.masks_attention import causal_mask, masked_attention
from solutions.softmax import softmax
from timing import timed  # bench/timing.py, beside this script
from results import record  # bench/results.py: what make bench writes


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    dev = args.device
    g = torch.Generator().manual_seed(0)
    print(f"device {dev}, torch {torch.__version__}, {torch.get_num_threads()} threads, best of {args.repeat}")
    print(f"{'case':<34} {'reference':>11} {'baseline':>11} {'ratio':>7}")
    for B, H, T, d in [(1, 1, 64, 32), (4, 4, 128, 64), (8, 8, 256, 64), (2, 8, 1024, 64)]:
        Q, K, V = (torch.randn(B, H, T, d, generator=g).to(dev) for _ in range(3))
        mask = causal_mask(T, device=dev)
        ref = timed(lambda: masked_attention(Q, K, V, mask), args.repeat, dev)
        base = timed(lambda: F.scaled_dot_product_attention(Q, K, V, attn_mask=mask), args.repeat, dev)
        print(f"{f'attention B={B} H={H} T={T} d={d}':<34} {ref * 1e3:>9.3f}ms {base * 1e3:>9.3f}ms {ref / base:>7.2f}")
        record(f"attention ({dev})", f"masked attention B={B} H={H} T={T} d={d}", ref * 1e3, base * 1e3, ref / base,
               "ms", "the reference's time / SDPA's")
    for shape in [(64, 1000), (256, 32000)]:
        x = torch.randn(*shape, generator=g).to(dev)
        ref = timed(lambda: softmax(x, dim=-1), args.repeat, dev)
        base = timed(lambda: torch.softmax(x, dim=-1), args.repeat, dev)
        print(f"{f'softmax {shape}':<34} {ref * 1e3:>9.3f}ms {base * 1e3:>9.3f}ms {ref / base:>7.2f}")
        record(f"attention ({dev})", f"softmax {shape}", ref * 1e3, base * 1e3, ref / base, "ms",
               "the reference's time / SDPA's")


if __name__ == "__main__":
    main()
