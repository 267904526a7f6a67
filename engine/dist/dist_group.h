// The c10d process group of a data-parallel run (engine/dist/distributed.h): the collectives the
// trainer and evaluation use. Every call is collective: all ranks make the same calls in
// the same order. A failing collective (a rank that died, a timeout) throws tfw::Error that
// names the rank that stopped when it said so (dist_report_failure), or the peer's address.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/types.h>

#include "engine/dist/distributed.h"

namespace torch {  // this header is also read outside the precompiled one (dist/distributed.cpp)
namespace nn {
class Module;
}  // namespace nn
namespace optim {
class Optimizer;
}  // namespace optim
}  // namespace torch

namespace tfw {

class DistGroup {
 public:
  DistGroup(DistEnv env, c10::intrusive_ptr<c10d::Store> store, c10::intrusive_ptr<c10d::Backend> group);
  int rank() const { return env_.rank; }
  int world() const { return env_.world; }
  const DistEnv& env() const { return env_; }

  // Sums each tensor over the ranks, in place. `what` names the operation in errors.
  void allreduce_sum(std::vector<torch::Tensor>& tensors, const std::string& what);
  // Averages the defined gradients of `parameters` over the ranks: they are flattened into
  // buckets of at most `bucket_bytes` per dtype, all-reduced together, and copied back.
  void average_gradients(const std::vector<torch::Tensor>& parameters, std::int64_t bucket_bytes);
  // Rank 0's values, in place on every rank.
  void broadcast(std::vector<torch::Tensor>& tensors, const std::string& what);
  // Rank 0's parameters and buffers, in place on every rank (same module structure).
  void share_module(torch::nn::Module& module);
  // Rank 0's optimiser state (serialised), loaded on every other rank onto `device`.
  void share_optimizer(torch::optim::Optimizer& optimizer, const torch::Device& device);
  // Rank 0's `text` on every rank (other ranks' argument is ignored).
  std::string broadcast_string(const std::string& text, const std::string& what);
  // Each rank's `value`, on every rank (index = rank).
  std::vector<std::int64_t> gather_int(std::int64_t value, const std::string& what);
  void barrier(const std::string& what);

  void report_failure(const std::string& message);
  c10d::Store& store() { return *store_; }

 private:
  [[noreturn]] void fail(const std::string& what, const std::exception& cause);
  void wait(const c10::intrusive_ptr<c10d::Work>& work, const std::string& what);
  // The work of a collective that `begin` starts on the backend; a failure to start throws
  // as fail() does, naming `what`.
  c10::intrusive_ptr<c10d::Work> start(const std::string& what,
                                       const std::function<c10::intrusive_ptr<c10d::Work>()>& begin);

  DistEnv env_;
  c10::intrusive_ptr<c10d::Store> store_;
  // ProcessGroupGloo is a c10d::Backend in LibTorch 2.x (a ProcessGroup holds backends per
  // device type); the trainer talks to the Gloo backend directly.
  c10::intrusive_ptr<c10d::Backend> group_;
};

}  // namespace tfw
