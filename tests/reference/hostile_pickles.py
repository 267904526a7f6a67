"""Hostile `torch.save` files for the pickle reader (issue 33), written into OUT_DIR:
- deep.pt: a pickle of lists nested 100,000 deep (raw opcodes; Python itself could not build
  it), in torch's zip layout;
- keys.pt: a dict of 200,000 keys beside a small state dict under "model";
- stride0.pt: a tensor of 2^28 elements over a storage of one float (stride 0).
usage: hostile_pickles.py OUT_DIR"""
import os
import sys
import zipfile

import torch

out = sys.argv[1]
os.makedirs(out, exist_ok=True)

depth = 100000
pickle = b"\x80\x02" + b"]" * depth + b"a" * (depth - 1) + b"."
with zipfile.ZipFile(os.path.join(out, "deep.pt"), "w", zipfile.ZIP_STORED) as z:
    z.writestr("archive/data.pkl", pickle)
    z.writestr("archive/byteorder", "little")
    z.writestr("archive/version", "3\n")

state = {f"k{i}": i for i in range(200000)}
state["model"] = {"w": torch.arange(4, dtype=torch.float32)}
torch.save(state, os.path.join(out, "keys.pt"))

torch.save({"w": torch.zeros(1).expand(2 ** 28)}, os.path.join(out, "stride0.pt"))
