"""Hostile `torch.save` files for the pickle reader (issue 33), written into OUT_DIR:
- deep.pt: a pickle of lists nested 100,000 deep (raw opcodes; Python itself could not build
  it), in torch's zip layout;
- keys.pt: a dict of 200,000 keys beside a small state dict under "model";
- stride0.pt: a tensor of 2^28 elements over a storage of one float (stride 0);
- shared.pt: dicts naming one child twice at each of 40 levels (2^40 values when followed);
- bomb.pt: a data.pkl of 100 MiB, deflated to about 100 KB;
- version-bomb.pt: a small archive whose `version` record declares 2 GiB inflated in the
  zip's directory (found by the fuzzer: LibTorch's reader inflates it as it opens the file).
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

# shared.pt (issue 50): dicts that name one child twice at each of 40 levels. The memo keeps
# the file at about 1.6 KB; a reader that follows every name meets 2^40 values.
shared = {"w": 1.0}
for _ in range(40):
    shared = {"a": shared, "b": shared}
torch.save(shared, os.path.join(out, "shared.pt"))

# bomb.pt (issue 50): a data.pkl of 100 MiB deflated to about 100 KB (the campaign's held 3 GiB).
with zipfile.ZipFile(os.path.join(out, "bomb.pt"), "w", zipfile.ZIP_DEFLATED) as z:
    z.writestr("archive/data.pkl", b"\x80\x02" + b"\x00" * (100 << 20))
    z.writestr("archive/byteorder", "little")
    z.writestr("archive/version", "3\n")

# version-bomb.pt (issue 50, found by the pickle fuzzer): the `version` record declares
# 2^31 + 2 bytes inflated in the local header and the central directory.
import io
buffer = io.BytesIO()
with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
    z.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
    z.writestr("archive/version", b"3\n")
raw = bytearray(buffer.getvalue())
for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
    at = raw.find(signature, raw.find(signature) + 1)  # the second record: version
    raw[at + offset:at + offset + 4] = (2 ** 31 + 2).to_bytes(4, "little")
with open(os.path.join(out, "version-bomb.pt"), "wb") as f:
    f.write(bytes(raw))
