"""Zeroes MARKER (32 '0' characters), loads the TorchScript archive ARCHIVE with PyTorch's own
loader, and prints "ARCHIVE: " and MARKER's first 4 bytes in hex: the probe that a crafted
checkpoint (code_running_checkpoint.py) runs its code when a TorchScript loader loads it (the
code writes 65.0 as a float32, "00 00 82 42"), so that tfw refusing to run it means something.

usage: load_torchscript.py ARCHIVE MARKER
"""
import sys

import torch

ARCHIVE, MARKER = sys.argv[1], sys.argv[2]
with open(MARKER, "w") as f:
    f.write("0" * 32)
torch.jit.load(ARCHIVE)
with open(MARKER, "rb") as f:
    print(f"{ARCHIVE}: {f.read(4).hex(' ')}")
