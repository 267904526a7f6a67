// What the workbench suggests to someone whose store is empty (the GUI's runs view, `tfw runs
// list`): commands that work from the repository's root on a fresh clone.
// tests/cli/test_cli.cpp runs the first in an empty home.
#pragma once

namespace tfw {

// A 200-step Tokenformer on the KJV Bible: about half a minute on 2 cores.
inline constexpr const char* kFirstTrainCommand = "tfw train experiments/mini/tiny-train-tokenformer.toml";
// The README's main job: a Tokenformer grown once against a Transformer from scratch.
inline constexpr const char* kFirstExperimentCommand = "tfw run experiments/quickstart.toml";

}  // namespace tfw
