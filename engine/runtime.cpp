#include "engine/runtime.h"

#include <thread>

#include <torch/torch.h>
#include <torch/version.h>

namespace tfw {

namespace {
int current_threads = 0;
int active_threads = 0;
}  // namespace

void runtime_init(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::thread::hardware_concurrency());
  if (threads <= 0) threads = 1;
  torch::set_num_threads(threads);
  current_threads = threads;
  active_threads = threads;
}

int runtime_threads() { return current_threads; }

void runtime_use_threads(int threads) {
  if (threads < 1) threads = 1;
  if (threads == active_threads) return;
  torch::set_num_threads(threads);
  active_threads = threads;
}

int runtime_active_threads() { return active_threads; }

const char* torch_version() { return TORCH_VERSION; }

bool fused_attention_available() { return TORCH_VERSION_MAJOR >= 2; }

}  // namespace tfw
