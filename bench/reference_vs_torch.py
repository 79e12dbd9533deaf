"""Speed of the reference transformer blocks against PyTorch's modules, measured in the same run.

    python bench/reference_vs_torch.py [--device cpu|cuda] [--repeat N]

For several sizes: the reference's multi_head_attention against nn.MultiheadAttention,
encoder_block against nn.TransformerEncoderLayer, and encdec_decoder_block against
nn.TransformerDecoderLayer, all in inference mode with the same weights and masks,
and the ratio (reference / PyTorch). The reference is written to be read, not to
be fast: the ratios say what clarity costs.
"""
import argparse

import torch
from torch import nn

from learner.transformer import weights_of
from solutions import encoder, encoder_decoder
from timing import timed  # bench/timing.py, beside this script
from results import record  # bench/results.py: what make bench writes


DEVICE = ["cpu"]  # the device main() measures on


def row(name, ref, base):
    print(f"{name:<44} {ref * 1e3:>9.3f}ms {base * 1e3:>9.3f}ms {ref / base:>7.2f}")
    record(f"transformer blocks ({DEVICE[0]})", name, ref * 1e3, base * 1e3, ref / base, "ms",
           "the reference block's time / PyTorch's module's")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    dev, rep = args.device, args.repeat
    DEVICE[0] = dev
    torch.manual_seed(0)
    print(f"device {dev}, torch {torch.__version__}, {torch.get_num_threads()} threads, best of {rep}")
    print(f"{'case':<44} {'reference':>11} {'PyTorch':>11} {'ratio':>7}")
    with torch.inference_mode():
        for B, T, D, H in [(8, 32, 64, 4), (8, 128, 256, 8), (4, 512, 512, 8)]:
            x = torch.randn(B, T, D, device=dev)
            valid = torch.ones(B, T, dtype=torch.bool, device=dev)
            valid[0, T // 2:] = False
            size = f"B={B} T={T} D={D} H={H}"
            mha = nn.MultiheadAttention(D, H, batch_first=True).to(dev).eval()
            p_attn = weights_of(mha)
            row(f"attention {size}", timed(lambda: encoder.multi_head_attention(x, x, p_attn, H, valid[:, None]),
                                            rep, dev),
                timed(lambda: mha(x, x, x, key_padding_mask=~valid), rep, dev))
            enc = nn.TransformerEncoderLayer(D, H, 4 * D, dropout=0.0, batch_first=True).to(dev).eval()
            p_enc = weights_of(enc)
            row(f"encoder block {size}", timed(lambda: encoder.encoder_block(x, valid, p_enc, H), rep, dev),
                timed(lambda: enc(x, src_key_padding_mask=~valid), rep, dev))
            dec = nn.TransformerDecoderLayer(D, H, 4 * D, dropout=0.0, batch_first=True).to(dev).eval()
            p_dec = weights_of(dec)
            causal = nn.Transformer.generate_square_subsequent_mask(T, device=dev)
            row(f"enc-dec decoder block {size}",
                timed(lambda: encoder_decoder.encdec_decoder_block(x, x, None, valid, p_dec, H), rep, dev),
                timed(lambda: dec(x, x, tgt_mask=causal, tgt_is_causal=True, memory_key_padding_mask=~valid), rep,
                      dev))


if __name__ == "__main__":
    main()
