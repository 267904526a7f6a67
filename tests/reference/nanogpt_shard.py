#!/usr/bin/python3
"""Writes a shard folder the way nanoGPT's prepare.py does (numpy uint16 .tofile, no
metadata), so the test suite can check that shards made by other tools load.
Usage: nanogpt_shard.py DIR. Train ids: 0..999 then 1000+byte of "hello"; val: 7, 65535."""
import sys

import numpy as np

folder = sys.argv[1]
train = list(range(1000)) + [1000 + b for b in b"hello"]
np.array(train, dtype=np.uint16).tofile(f"{folder}/train.bin")
np.array([7, 65535], dtype=np.uint16).tofile(f"{folder}/val.bin")
