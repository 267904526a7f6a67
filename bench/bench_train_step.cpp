// Training-step throughput (tokens/s) of both model families at one small config, side by
// side: forward, cross-entropy, backward, AdamW step. Usage:
//   bench_train_step [--plugins DIR] [--threads N] [--steps N] [--batch N] [--profile TRACE.json]
//                    [--compare-attention] CONFIG.toml...
// --compare-attention runs every config twice, with the fused CPU attention and with the
// composition of torch ops (TFW_ATTENTION=manual), interleaved; --profile writes a chrome
// trace of the first config's steps under torch's profiler.
// Default configs: experiments/mini/bench-{tokenformer,transformer}.toml.
#include <cstring>
#include <iostream>

#include <fmt/format.h>
#include <torch/csrc/autograd/profiler_legacy.h>

#include "bench/bench_common.h"
#include "engine/nn/attention.h"
#include "engine/nn/model.h"
#include "engine/plugin/registry.h"
#include "engine/config/run_config.h"
#include "engine/machine/runtime.h"

int main(int argc, char** argv) {
  std::string plugin_dir = tfw::executable_dir() + "/../plugins";
  int threads = 0, steps = 10;
  std::int64_t batch = 8;
  std::vector<std::string> configs;
  std::string profile;
  bool compare_attention = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--plugins") && i + 1 < argc)
      plugin_dir = argv[++i];
    else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc)
      threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--steps") && i + 1 < argc)
      steps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--profile") && i + 1 < argc)
      profile = argv[++i];
    else if (!std::strcmp(argv[i], "--compare-attention"))
      compare_attention = true;
    else if (!std::strcmp(argv[i], "--batch") && i + 1 < argc)
      batch = std::atoll(argv[++i]);
    else
      configs.push_back(argv[i]);
  }
  if (configs.empty()) {
    configs = {"experiments/mini/bench-tokenformer.toml", "experiments/mini/bench-transformer.toml"};
  }
  tfw::runtime_init(threads);
  tfw::Registry registry;
  registry.load_folder(plugin_dir, "built-in");
  try {
    struct Case {
      tfw::ModelConfig config;
      std::shared_ptr<tfw::Model> model;
      std::shared_ptr<torch::optim::AdamW> optimizer;
      bool manual_attention = false;
    };
    std::vector<Case> cases;
    std::vector<std::function<void()>> bodies;
    for (const std::string& path : configs) {
      tfw::ModelConfig config = tfw::model_config_load(registry, path);
      auto model = registry.family(config.family).build(*config.spec, 0);
      auto optimizer = std::make_shared<torch::optim::AdamW>(model->parameters(), torch::optim::AdamWOptions(6e-4));
      cases.push_back({config, model, optimizer, false});
      if (compare_attention) {
        auto twin = registry.family(config.family).build(*config.spec, 0);
        cases.push_back({config, twin,
                         std::make_shared<torch::optim::AdamW>(twin->parameters(), torch::optim::AdamWOptions(6e-4)),
                         true});
      }
    }
    for (Case& c : cases) {
      const std::int64_t T = c.config.spec->shape().seq_len, V = c.config.spec->shape().vocab;
      torch::Tensor ids = torch::randint(V, {batch, T + 1}, torch::kInt64);
      bodies.push_back([&c, ids, T, V] {
        tfw::attention_set_manual(c.manual_attention);
        for (int s = 0; s < 1; ++s) {
          c.optimizer->zero_grad();
          torch::Tensor logits = c.model->forward(ids.narrow(1, 0, T));
          torch::nn::functional::cross_entropy(logits.reshape({-1, V}), ids.narrow(1, 1, T).reshape({-1})).backward();
          c.optimizer->step();
        }
      });
    }
    std::vector<double> t = tfw::bench::interleaved(bodies, steps);
    if (!profile.empty()) {  // the first config's steps again, under the profiler (a chrome trace)
      torch::autograd::profiler::RecordProfile guard(profile);
      for (int s = 0; s < steps; ++s) bodies[0]();
    }
    std::cout << fmt::format("training step, batch {}, {} threads, median of {} interleaved steps\n", batch,
                             torch::get_num_threads(), steps);
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const auto& spec = *cases[i].config.spec;
      double tokens = static_cast<double>(batch * spec.shape().seq_len);
      const std::string label = cases[i].config.name + (cases[i].manual_attention ? " (manual attn)" : "");
      std::cout << fmt::format("  {:<38} {:>12} params  {:>9.0f} tokens/s  ({:.3f} s/step, x{:.2f} of first)\n", label,
                               spec.parameter_count(), tokens / t[i], t[i], t[i] / t[0]);
    }
  } catch (const std::exception& e) {
    std::cerr << "bench_train_step: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
