"""A hostile checkpoint (issue 33, finding 1): a TorchScript archive whose `__setstate__` writes
the marker file MARKER when any TorchScript loader loads it, e.g. LibTorch's
InputArchive::load_from, which tfw used to call on every checkpoint. Beside it a manifest with
the right size and CRC-32 for format VERSION, so only the format can stop it.

usage: code_running_checkpoint.py OUT MARKER VERSION
"""
import os
import sys
import zlib
from typing import Tuple

import torch

OUT, MARKER_PATH, VERSION = sys.argv[1], sys.argv[2], int(sys.argv[3])


class Evil(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.x = torch.zeros(1)
        self.marker = MARKER_PATH

    @torch.jit.export
    def __getstate__(self) -> Tuple[torch.Tensor, bool, str]:
        return (self.x, self.training, self.marker)

    @torch.jit.export
    def __setstate__(self, state: Tuple[torch.Tensor, bool, str]) -> None:
        self.x = state[0]
        self.training = state[1]
        self.marker = state[2]
        # Kept by TorchScript (a result nobody reads would be removed as dead code).
        self.x = torch.from_file(self.marker, True, 8).fill_(65)

    def forward(self, x):
        return x


class Checkpoint(torch.nn.Module):  # the root of a tfw archive held the model as a submodule
    def __init__(self):
        super().__init__()
        self.model = Evil()

    def forward(self, x):
        return self.model(x)


torch.jit.script(Checkpoint()).save(OUT)
name = os.path.basename(OUT)
step = int(name[len("step-"):len("step-") + 8])
with open(OUT, "rb") as f:
    crc = zlib.crc32(f.read())
with open(os.path.splitext(OUT)[0] + ".toml", "w") as f:
    f.write(f"format_version = {VERSION}\narchive = '{name}'\nsize = {os.path.getsize(OUT)}\n"
            f"crc32 = {crc}\nstep = {step}\ntokens = 0\n")
