#!/usr/bin/python3
"""Loads a `tfw export-model` folder as docs/export-model.md shows a user: the weights with the
safetensors package's own reader, the settings from config.json. Runs the independent float64
reference model (model_reference.py, written without the C++ engine) on the token ids in
DIR/ids.json and writes its logits to DIR/logits.bin, float64. For the tokenformer family it
also runs the loader docs/export-model.md gives users (its first python block, as written) and
writes those logits to DIR/logits_docs.bin.
"""
import json
import os
import sys

import torch
from safetensors.torch import load_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model_reference import forward  # noqa: E402


def main(folder):
    config = json.load(open(f"{folder}/config.json"))
    assert config["format"] == "tfw-model" and config["format_version"] == 1, config
    params = {name: tensor.to(torch.float64) for name, tensor in load_file(f"{folder}/model.safetensors").items()}
    ids = torch.tensor(json.load(open(f"{folder}/ids.json")))
    with torch.no_grad():
        logits = forward({"family": config["family"], "model": config["model"]}, params, ids)
    logits.reshape(-1).numpy().astype("<f8").tofile(f"{folder}/logits.bin")
    if config["family"] == "tokenformer":
        docs = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../docs/export-model.md")).read()
        loader = docs.split("```python\n", 1)[1].split("```", 1)[0]
        scope = {}
        exec(compile(loader, "docs/export-model.md", "exec"), scope)
        with torch.no_grad():
            logits = scope["load_tokenformer"](folder, dtype=torch.float64)(ids)
        logits.reshape(-1).numpy().astype("<f8").tofile(f"{folder}/logits_docs.bin")


if __name__ == "__main__":
    main(sys.argv[1])
