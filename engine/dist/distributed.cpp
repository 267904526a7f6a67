// See distributed.h and dist_group.h.
#include "engine/dist/distributed.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <c10/util/Logging.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/nn/module.h>
#include <torch/optim/adamw.h>

#include "engine/dist/dist_group.h"
#include "engine/core/env_choice.h"
#include "engine/core/error.h"

namespace tfw {

namespace {

using Milliseconds = std::chrono::milliseconds;

const char* env_text(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

long long env_integer(const char* name, long long low, long long high, const std::string& hint) {
  const char* text = env_text(name);
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || value < low || value > high) {
    throw UsageError(with_hint(fmt::format("{}={}: expected an integer in {}..{}", name, text, low, high), hint));
  }
  return value;
}

// The message of an exception without LibTorch's C++ backtrace.
std::string reason_of(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) return c10_error->what_without_backtrace();
  return e.what();
}

bool contains(const std::string& text, const char* part) { return text.find(part) != std::string::npos; }

Milliseconds timeout_of(const DistEnv& env) {
  return Milliseconds(static_cast<std::int64_t>(env.timeout_seconds * 1000));
}

std::shared_ptr<::gloo::transport::Device> gloo_device(const DistEnv& env) {
  if (const char* interface = env_text("GLOO_SOCKET_IFNAME")) {
    return c10d::ProcessGroupGloo::createDeviceForInterface(interface);
  }
  // One machine (--nproc, or MASTER_ADDR on the loopback): stay on the loopback.
  if (env.master_addr == "127.0.0.1" || env.master_addr == "localhost" || env.master_addr == "::1") {
    return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  }
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

std::string failed_key(int rank) { return fmt::format("tfw/failed/{}", rank); }

}  // namespace

std::string slurm_first_host(const std::string& nodelist) {
  std::size_t end = 0;
  int depth = 0;
  while (end < nodelist.size() && !(nodelist[end] == ',' && depth == 0)) {
    if (nodelist[end] == '[') depth += 1;
    if (nodelist[end] == ']') depth -= 1;
    end += 1;
  }
  const std::string first = nodelist.substr(0, end);
  const std::size_t open = first.find('[');
  if (open == std::string::npos) return first;
  const std::size_t close = first.find(']', open);
  if (close == std::string::npos) throw UsageError(fmt::format("cannot read the Slurm node list '{}'", nodelist));
  std::string range = first.substr(open + 1, close - open - 1);
  range = range.substr(0, range.find_first_of(",-"));  // the first number keeps its zero padding
  return first.substr(0, open) + range + first.substr(close + 1);
}

std::optional<DistEnv> dist_env_from_environment() {
  DistEnv env;
  const std::string hint = "set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT as torchrun does (docs/cluster.md)";
  if (env_text("WORLD_SIZE") != nullptr) {
    env.world = static_cast<int>(env_integer("WORLD_SIZE", 1, 1 << 20, hint));
    if (env.world == 1) return std::nullopt;
    if (env_text("RANK") == nullptr) throw UsageError(with_hint("WORLD_SIZE is set but RANK is not", hint));
    env.rank = static_cast<int>(env_integer("RANK", 0, env.world - 1, hint));
    env.source = "environment";
    if (env_text("LOCAL_WORLD_SIZE") != nullptr) {
      env.local_world = static_cast<int>(env_integer("LOCAL_WORLD_SIZE", 1, env.world, hint));
    }
  } else if (env_text("SLURM_STEP_NUM_TASKS") != nullptr && env_text("SLURM_PROCID") != nullptr) {
    // A job step srun started: each task is a rank. (A batch script itself is not a step
    // with tasks: `tfw train` run there directly trains alone.)
    const std::string slurm_hint = "run the ranks with `srun tfw train ...` inside the allocation (docs/cluster.md)";
    env.world = static_cast<int>(env_integer("SLURM_STEP_NUM_TASKS", 1, 1 << 20, slurm_hint));
    if (env.world == 1) return std::nullopt;
    env.rank = static_cast<int>(env_integer("SLURM_PROCID", 0, env.world - 1, slurm_hint));
    env.source = "slurm";
    const char* nodes = env_text("SLURM_STEP_NODELIST");
    if (nodes == nullptr) nodes = env_text("SLURM_JOB_NODELIST");
    if (env_text("MASTER_ADDR") == nullptr) {
      if (nodes == nullptr)
        throw UsageError(with_hint("under Slurm, neither MASTER_ADDR nor SLURM_STEP_NODELIST is set", slurm_hint));
      env.master_addr = slurm_first_host(nodes);
    }
    if (env_text("MASTER_PORT") == nullptr && env_text("SLURM_JOB_ID") != nullptr) {
      // One port per job, so that two jobs sharing a node do not meet.
      env.master_port = 29500 + static_cast<int>(env_integer("SLURM_JOB_ID", 0, 1LL << 62, slurm_hint) % 10000);
    }
    if (const char* per_node = env_text("SLURM_STEP_TASKS_PER_NODE"))
      env.local_world = std::max(1, std::atoi(per_node));
  } else {
    return std::nullopt;
  }
  if (const char* addr = env_text("MASTER_ADDR")) env.master_addr = addr;
  if (const std::optional<int> port = dist_master_port_from_environment()) env.master_port = *port;
  env.timeout_seconds = dist_timeout_from_environment();
  return env;
}

std::optional<int> dist_master_port_from_environment() {
  if (env_text("MASTER_PORT") == nullptr) return std::nullopt;
  return static_cast<int>(env_integer("MASTER_PORT", 1, 65535,
                                      "a free TCP port on rank 0's machine; --nproc takes one "
                                      "itself when MASTER_PORT is not set"));
}

double dist_timeout_from_environment() { return env_seconds("TFW_DIST_TIMEOUT", 300); }

int dist_free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw Error("cannot open a socket to find a free port");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(fd);
    throw Error("cannot bind a socket on 127.0.0.1 to find a free port");
  }
  const int port = ntohs(address.sin_port);
  ::close(fd);
  return port;
}

std::shared_ptr<DistGroup> dist_connect(const DistEnv& env) {
  // c10d logs its socket warnings through c10's logging to stderr; every failure it reports reaches
  // the user as one of our errors below, so its log stays quiet unless TFW_DIST_LOG is set.
  if (env_text("TFW_DIST_LOG") == nullptr) FLAGS_caffe2_log_level = c10::GLOG_FATAL;
  const std::string where = fmt::format("{}:{}", env.master_addr, env.master_port);
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(env.master_port);
  options.isServer = env.rank == 0;
  options.numWorkers = static_cast<std::size_t>(env.world);
  options.waitWorkers = true;
  options.timeout = timeout_of(env);
  c10::intrusive_ptr<c10d::Store> store;
  try {
    store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
  } catch (const std::exception& e) {
    const std::string reason = reason_of(e);
    // 1.13 said "Address already in use" / "errno: 98"; 2.x says "EADDRINUSE" / "address already in use".
    if (contains(reason, "Address already in use") || contains(reason, "address already in use") ||
        contains(reason, "errno: 98") || contains(reason, "EADDRINUSE")) {
      throw UsageError(with_hint(fmt::format("rank 0 cannot serve the rendezvous at {}: the port is in use", where),
                                 "choose another port with MASTER_PORT=... (--nproc takes a free one when MASTER_PORT "
                                 "is not set), or stop the program that holds it"));
    }
    if (env.rank == 0) {
      throw Error(with_hint(fmt::format("rank 0 waited {:g} s at {} for {} ranks to join: {}", env.timeout_seconds,
                                        where, env.world, reason),
                            "start every rank with the same MASTER_ADDR, MASTER_PORT and WORLD_SIZE; "
                            "TFW_DIST_TIMEOUT sets the wait"));
    }
    throw Error(with_hint(fmt::format("rank {} could not reach rank 0's rendezvous at {} within {:g} s: {}", env.rank,
                                      where, env.timeout_seconds, reason),
                          "is rank 0 running, and are MASTER_ADDR and MASTER_PORT the ones it uses?"));
  }
  c10::intrusive_ptr<c10d::ProcessGroupGloo::Options> gloo = c10d::ProcessGroupGloo::Options::create(timeout_of(env));
  c10::intrusive_ptr<c10d::Backend> group;
  try {
    gloo->devices.push_back(gloo_device(env));
    gloo->threads = 1;  // one collective at a time; the trainer's threads do the compute
    group = c10::make_intrusive<c10d::ProcessGroupGloo>(c10::make_intrusive<c10d::PrefixStore>("gloo", store), env.rank,
                                                        env.world, gloo);
  } catch (const std::exception& e) {
    throw Error(with_hint(fmt::format("rank {}: connecting to the other {} ranks (Gloo) failed: {}", env.rank,
                                      env.world - 1, reason_of(e)),
                          "on several nodes, GLOO_SOCKET_IFNAME names the network interface the ranks share"));
  }
  return std::make_shared<DistGroup>(env, std::move(store), std::move(group));
}

namespace {

// Where two resolved configs first differ: "[train] lr = 0.003 (rank 0) against lr = 0.001".
std::string first_difference(const std::string& ours, const std::string& theirs) {
  std::istringstream a(ours), b(theirs);
  std::string line_a, line_b, section;
  while (true) {
    const bool more_a = static_cast<bool>(std::getline(a, line_a)), more_b = static_cast<bool>(std::getline(b, line_b));
    if (!more_a && !more_b) return "they differ in layout only";
    if (!more_a) line_a = "(nothing)";
    if (!more_b) line_b = "(nothing)";
    if (line_a != line_b) {
      return fmt::format("{}rank 0 has `{}`, this rank `{}`", section.empty() ? "" : section + " ", line_b, line_a);
    }
    if (!line_a.empty() && line_a.front() == '[') section = line_a;
  }
}

}  // namespace

RunConfig dist_agree_config(DistGroup& group, const Registry& registry, const RunConfig* mine) {
  const std::string ours = mine != nullptr ? run_config_text(*mine) : std::string();
  const std::string theirs = group.broadcast_string(ours, "sending rank 0's config");
  // Compared by identity; the text only names the first line that differs.
  std::string difference;
  if (group.rank() != 0 && mine != nullptr && config_identity(*mine) != config_identity(toml::parse(theirs))) {
    difference = first_difference(ours, theirs);
  }
  if (!difference.empty()) {
    group.store().set(fmt::format("tfw/config/{}", group.rank()),
                      std::vector<std::uint8_t>(difference.begin(), difference.end()));
  }
  const std::vector<std::int64_t> differs =
      group.gather_int(difference.empty() ? 0 : 1, "comparing the ranks' configs");
  std::string refused;
  for (int r = 0; r < group.world(); ++r) {
    if (differs[static_cast<std::size_t>(r)] == 0) continue;
    const std::vector<std::uint8_t> text = group.store().get(fmt::format("tfw/config/{}", r));
    refused += fmt::format("{}rank {}: {}", refused.empty() ? "" : "; ", r, std::string(text.begin(), text.end()));
  }
  if (!refused.empty()) {
    throw UsageError(with_hint(fmt::format("the ranks were started with different configs, refused: {}", refused),
                               "start every rank with the same config file and --set overrides"));
  }
  RunConfig config =
      group.rank() == 0 && mine != nullptr
          ? *mine
          : run_config_parse(registry, toml::parse(std::string_view(theirs), std::string_view("rank 0 config")),
                             "rank 0's config");
  if (config.train.batch_size % group.world() != 0) {
    throw UsageError(with_hint(
        fmt::format("train.batch_size = {} does not split evenly over {} ranks", config.train.batch_size,
                    group.world()),
        fmt::format("choose a batch size that is a multiple of {}, or another number of ranks", group.world())));
  }
  return config;
}

int dist_rank(const DistGroup& group) { return group.rank(); }
int dist_world(const DistGroup& group) { return group.world(); }
const DistEnv& dist_env(const DistGroup& group) { return group.env(); }
void dist_report_failure(DistGroup& group, const std::string& message) { group.report_failure(message); }

DistGroup::DistGroup(DistEnv env, c10::intrusive_ptr<c10d::Store> store, c10::intrusive_ptr<c10d::Backend> group)
    : env_(std::move(env)), store_(std::move(store)), group_(std::move(group)) {}

void DistGroup::report_failure(const std::string& message) {
  try {
    const std::string text = message.substr(0, 2000);
    store_->set(failed_key(env_.rank), std::vector<std::uint8_t>(text.begin(), text.end()));
  } catch (const std::exception&) {
    // Rank 0, which serves the store, is gone: nobody is left to tell.
  }
}

void DistGroup::fail(const std::string& what, const std::exception& cause) {
  const std::string reason = reason_of(cause);
  // The rank that stopped on an error said why in the store; wait a moment for it (it may
  // notice its own error a little after we notice its absence).
  std::vector<std::string> said;
  bool store_gone = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (said.empty() && !store_gone && std::chrono::steady_clock::now() < deadline) {
    for (int r = 0; r < env_.world; ++r) {
      if (r == env_.rank) continue;
      try {
        if (store_->check({failed_key(r)})) {
          const std::vector<std::uint8_t> text = store_->get(failed_key(r));
          said.push_back(fmt::format("rank {} stopped: {}", r, std::string(text.begin(), text.end())));
        }
      } catch (const std::exception&) {
        store_gone = true;
        break;
      }
    }
    if (said.empty() && !store_gone) std::this_thread::sleep_for(Milliseconds(200));
  }
  std::string who;
  if (!said.empty()) {
    for (const std::string& line : said) who += (who.empty() ? "" : "; ") + line;
  } else if (store_gone && env_.rank != 0) {
    who = fmt::format("rank 0 (which serves the rendezvous at {}:{}) is gone", env_.master_addr, env_.master_port);
  } else if (contains(reason, "Timed out") || contains(reason, "timed out") || contains(reason, "Timeout")) {
    who = fmt::format("a rank did not take part within TFW_DIST_TIMEOUT = {:g} s (hung, or far slower)",
                      env_.timeout_seconds);
  } else {
    who = "a rank closed its connection without saying why (killed, or out of memory)";
  }
  throw Error(fmt::format("rank {} of {}: {} failed: {} ({})", env_.rank, env_.world, what, who, reason));
}

void DistGroup::wait(const c10::intrusive_ptr<c10d::Work>& work, const std::string& what) {
  try {
    work->wait();
  } catch (const std::exception& e) {
    fail(what, e);
  }
}

c10::intrusive_ptr<c10d::Work> DistGroup::start(const std::string& what,
                                                const std::function<c10::intrusive_ptr<c10d::Work>()>& begin) {
  try {
    return begin();
  } catch (const std::exception& e) {
    fail(what, e);
  }
}

void DistGroup::allreduce_sum(std::vector<torch::Tensor>& tensors, const std::string& what) {
  for (torch::Tensor& tensor : tensors) {
    std::vector<torch::Tensor> one{tensor};
    wait(start(what, [&] { return group_->allreduce(one, c10d::AllreduceOptions{}); }), what);
  }
}

void DistGroup::average_gradients(const std::vector<torch::Tensor>& parameters, std::int64_t bucket_bytes) {
  torch::NoGradGuard no_grad;
  // Buckets of gradients of one dtype and device, in parameter order (the same on every rank).
  struct Bucket {
    std::vector<torch::Tensor> grads;
    std::int64_t bytes = 0;
    torch::Tensor flat;
  };
  std::vector<Bucket> buckets;
  for (const torch::Tensor& parameter : parameters) {
    const torch::Tensor& grad = parameter.grad();
    if (!grad.defined()) continue;
    const std::int64_t bytes = grad.numel() * static_cast<std::int64_t>(grad.element_size());
    if (buckets.empty() || buckets.back().bytes + bytes > bucket_bytes ||
        buckets.back().grads.front().scalar_type() != grad.scalar_type() ||
        buckets.back().grads.front().device() != grad.device()) {
      buckets.emplace_back();
    }
    buckets.back().grads.push_back(grad);
    buckets.back().bytes += bytes;
  }
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  for (Bucket& bucket : buckets) {
    std::vector<torch::Tensor> flat_views;
    for (const torch::Tensor& grad : bucket.grads) flat_views.push_back(grad.reshape({-1}));
    bucket.flat = torch::cat(flat_views);
    std::vector<torch::Tensor> one{bucket.flat};
    works.push_back(
        start("the all-reduce of gradients", [&] { return group_->allreduce(one, c10d::AllreduceOptions{}); }));
  }
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    wait(works[i], "the all-reduce of gradients");
    Bucket& bucket = buckets[i];
    bucket.flat.div_(static_cast<double>(env_.world));
    std::int64_t offset = 0;
    for (torch::Tensor& grad : bucket.grads) {
      grad.copy_(bucket.flat.narrow(0, offset, grad.numel()).view(grad.sizes()));
      offset += grad.numel();
    }
  }
}

void DistGroup::broadcast(std::vector<torch::Tensor>& tensors, const std::string& what) {
  torch::NoGradGuard no_grad;
  for (torch::Tensor& tensor : tensors) {
    // Gloo broadcasts contiguous tensors; parameters are, but go through a copy if not.
    torch::Tensor buffer = tensor.is_contiguous() ? tensor : tensor.contiguous();
    std::vector<torch::Tensor> one{buffer};
    wait(start(what, [&] { return group_->broadcast(one, c10d::BroadcastOptions{}); }), what);
    if (!buffer.is_same(tensor)) tensor.copy_(buffer);
  }
}

void DistGroup::share_module(torch::nn::Module& module) {
  std::vector<torch::Tensor> tensors = module.parameters();
  for (const torch::Tensor& buffer : module.buffers()) tensors.push_back(buffer);
  broadcast(tensors, "sending rank 0's weights");
}

void DistGroup::share_optimizer(torch::optim::Optimizer& optimizer, const torch::Device& device) {
  // As tensors, not as a serialised archive: nothing a peer sends is parsed or loaded. Every
  // rank built the same parameter groups from the same config; rank 0 holds the state.
  (void)device;
  auto& groups = optimizer.param_groups();
  std::vector<torch::Tensor> params;
  for (auto& group : groups) {
    for (const torch::Tensor& param : group.params()) params.push_back(param);
  }
  // Per parameter: has state, step, has max_exp_avg_sq; per group: lr, beta1, beta2, eps, weight decay, amsgrad.
  std::vector<torch::Tensor> header{torch::zeros({static_cast<std::int64_t>(params.size()), 3}, torch::kInt64),
                                    torch::zeros({static_cast<std::int64_t>(groups.size()), 6}, torch::kDouble)};
  if (env_.rank == 0) {
    for (std::size_t i = 0; i < params.size(); ++i) {
      auto found = optimizer.state().find(params[i].unsafeGetTensorImpl());
      if (found == optimizer.state().end()) continue;
      auto& state = dynamic_cast<torch::optim::AdamWParamState&>(*found->second);
      header[0][static_cast<std::int64_t>(i)][0] = 1;
      header[0][static_cast<std::int64_t>(i)][1] = state.step();
      header[0][static_cast<std::int64_t>(i)][2] = state.max_exp_avg_sq().defined() ? 1 : 0;
    }
    for (std::size_t g = 0; g < groups.size(); ++g) {
      auto& o = dynamic_cast<torch::optim::AdamWOptions&>(groups[g].options());
      const double values[6] = {o.lr(),  std::get<0>(o.betas()), std::get<1>(o.betas()),
                                o.eps(), o.weight_decay(),       o.amsgrad() ? 1.0 : 0.0};
      for (int k = 0; k < 6; ++k) header[1][static_cast<std::int64_t>(g)][k] = values[k];
    }
  }
  broadcast(header, "sending rank 0's optimiser state");
  const torch::Tensor flags = header[0].contiguous();
  const torch::Tensor options = header[1].contiguous();
  std::vector<torch::Tensor> moments;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto* row = flags.data_ptr<std::int64_t>() + 3 * i;
    if (row[0] == 0) continue;
    if (env_.rank != 0) {
      auto state = std::make_unique<torch::optim::AdamWParamState>();
      state->step(row[1]);
      state->exp_avg(torch::zeros_like(params[i]));
      state->exp_avg_sq(torch::zeros_like(params[i]));
      if (row[2] != 0) state->max_exp_avg_sq(torch::zeros_like(params[i]));
      optimizer.state()[params[i].unsafeGetTensorImpl()] = std::move(state);
    }
    auto& state = dynamic_cast<torch::optim::AdamWParamState&>(*optimizer.state()[params[i].unsafeGetTensorImpl()]);
    moments.push_back(state.exp_avg());
    moments.push_back(state.exp_avg_sq());
    if (row[2] != 0) moments.push_back(state.max_exp_avg_sq());
  }
  if (!moments.empty()) broadcast(moments, "sending rank 0's optimiser state");
  if (env_.rank != 0) {
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const double* v = options.data_ptr<double>() + 6 * g;
      dynamic_cast<torch::optim::AdamWOptions&>(groups[g].options())
          .lr(v[0])
          .betas({v[1], v[2]})
          .eps(v[3])
          .weight_decay(v[4])
          .amsgrad(v[5] != 0);
    }
  }
}

std::string DistGroup::broadcast_string(const std::string& text, const std::string& what) {
  std::vector<torch::Tensor> length{torch::tensor({static_cast<std::int64_t>(text.size())}, torch::kInt64)};
  broadcast(length, what);
  const std::int64_t n = length[0].item<std::int64_t>();
  std::vector<torch::Tensor> bytes{torch::empty({std::max<std::int64_t>(n, 1)}, torch::kUInt8)};
  if (env_.rank == 0) std::memcpy(bytes[0].data_ptr<std::uint8_t>(), text.data(), text.size());
  broadcast(bytes, what);
  return std::string(reinterpret_cast<const char*>(bytes[0].data_ptr<std::uint8_t>()), static_cast<std::size_t>(n));
}

std::vector<std::int64_t> DistGroup::gather_int(std::int64_t value, const std::string& what) {
  std::vector<torch::Tensor> slots{torch::zeros({env_.world}, torch::kInt64)};
  slots[0][env_.rank] = value;
  allreduce_sum(slots, what);
  std::vector<std::int64_t> values(static_cast<std::size_t>(env_.world));
  for (int r = 0; r < env_.world; ++r) values[static_cast<std::size_t>(r)] = slots[0][r].item<std::int64_t>();
  return values;
}

void DistGroup::barrier(const std::string& what) {
  std::vector<torch::Tensor> one{torch::zeros({1}, torch::kInt64)};
  allreduce_sum(one, what);
}

}  // namespace tfw
