// Pattention layer and score capture. See pattention.h and docs/design/TOKENFORMER.md §1.
#include "engine/nn/pattention.h"

#include <cmath>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/machine/device.h"
#include "engine/nn/pattention_fused.h"

namespace tfw {

PattentionSettings pattention_settings_parse(ConfigTable& table) {
  PattentionSettings settings;
  settings.norm =
      pattention_norm_parse(table.get_choice("norm", "l2_gelu", {"l2_gelu", "gelu_l2", "gelu_l1", "softmax"}));
  settings.tau = tau_mode_parse(table.get_choice("tau", "fixed", {"fixed", "sqrt_n"}));
  settings.eps = table.get_nonnegative("eps", settings.eps);
  return settings;
}

toml::table pattention_settings_toml(const PattentionSettings& settings) {
  return toml::table{
      {"norm", pattention_norm_name(settings.norm)}, {"tau", tau_mode_name(settings.tau)}, {"eps", settings.eps}};
}

namespace {
thread_local ScoreCapture* active_capture = nullptr;

bool is_l1(PattentionNorm norm) { return norm == PattentionNorm::gelu_l1 || norm == PattentionNorm::softmax; }
}  // namespace

PattentionNorm pattention_norm_parse(const std::string& name) {
  if (name == "l2_gelu") return PattentionNorm::l2_gelu;
  if (name == "gelu_l2") return PattentionNorm::gelu_l2;
  if (name == "gelu_l1") return PattentionNorm::gelu_l1;
  if (name == "softmax") return PattentionNorm::softmax;
  throw UsageError(with_hint(fmt::format("unknown Pattention norm '{}'", name),
                             "use one of l2_gelu (default), gelu_l2, gelu_l1, softmax"));
}

std::string pattention_norm_name(PattentionNorm norm) {
  switch (norm) {
    case PattentionNorm::l2_gelu: return "l2_gelu";
    case PattentionNorm::gelu_l2: return "gelu_l2";
    case PattentionNorm::gelu_l1: return "gelu_l1";
    case PattentionNorm::softmax: return "softmax";
  }
  return "?";
}

TauMode tau_mode_parse(const std::string& name) {
  if (name == "fixed") return TauMode::fixed;
  if (name == "sqrt_n") return TauMode::sqrt_n;
  throw UsageError(with_hint(fmt::format("unknown tau mode '{}'", name), "use fixed (default) or sqrt_n"));
}

std::string tau_mode_name(TauMode mode) { return mode == TauMode::fixed ? "fixed" : "sqrt_n"; }

torch::Tensor pattention_scores_normalise(const torch::Tensor& s, PattentionNorm norm, const torch::Tensor& multiplier,
                                          double eps) {
  // s (..., n); every reduction runs over the last axis, the parameter tokens.
  switch (norm) {
    case PattentionNorm::l2_gelu: {
      torch::Tensor inverse_norm = torch::rsqrt(s.square().sum(-1, /*keepdim=*/true) + eps);  // (..., 1)
      return torch::gelu(s * (inverse_norm * multiplier));
    }
    case PattentionNorm::gelu_l2: {
      torch::Tensor g = torch::gelu(s);                                           // (..., n)
      torch::Tensor inverse_norm = torch::rsqrt(g.square().sum(-1, true) + eps);  // (..., 1)
      return g * (inverse_norm * multiplier);
    }
    case PattentionNorm::gelu_l1: {
      torch::Tensor g = torch::gelu(s);
      return g * (multiplier / (g.abs().sum(-1, true) + eps));
    }
    case PattentionNorm::softmax: return torch::softmax(s, -1) * multiplier;  // softmax subtracts the row max itself
  }
  throw Error("unreachable Pattention norm");
}

PattentionImpl::PattentionImpl(PattentionOptions options) : options_(std::move(options)) { reset(); }

void PattentionImpl::reset() {
  if (options_.tokens() <= 0 || options_.d_in() <= 0 || options_.d_out() <= 0) {
    throw UsageError(fmt::format("Pattention '{}' needs positive sizes, got d_in={} d_out={} n={}", options_.label(),
                                 options_.d_in(), options_.d_out(), options_.tokens()));
  }
  keys = register_parameter("keys", torch::empty({options_.tokens(), options_.d_in()}));
  values = register_parameter("values", torch::empty({options_.tokens(), options_.d_out()}));
  tau =
      register_buffer("tau", torch::scalar_tensor(std::sqrt(static_cast<double>(options_.tokens())), torch::kFloat64));
  n0 = register_buffer("n0", torch::scalar_tensor(options_.tokens(), torch::kInt64));
  reset_parameters();
}

void PattentionImpl::reset_parameters() {
  torch::NoGradGuard no_grad;
  keys.normal_(0.0, options_.key_std());
  values.normal_(0.0, options_.value_std());
}

torch::Tensor PattentionImpl::multiplier() const {
  if (options_.tau_mode() == TauMode::sqrt_n) {
    double n = static_cast<double>(tokens_in_use());
    return torch::scalar_tensor(is_l1(options_.norm()) ? n : std::sqrt(n),
                                torch::TensorOptions().dtype(torch::kFloat64));
  }
  return is_l1(options_.norm()) ? n0.to(torch::kFloat64) : tau;
}

double PattentionImpl::multiplier_value() const {  // multiplier() as a number, from the same buffers
  if (options_.tau_mode() == TauMode::sqrt_n) {
    const double n = static_cast<double>(tokens_in_use());
    return is_l1(options_.norm()) ? n : std::sqrt(n);
  }
  return is_l1(options_.norm()) ? static_cast<double>(n0.item<std::int64_t>()) : tau.item<double>();
}

torch::Tensor PattentionImpl::forward(const torch::Tensor& x) {
  // Under bf16 autocast the product is bf16 (accumulated in fp32 inside the matmul). Θ runs
  // in float32 either way: the fused operator widens each bf16 row itself and writes bf16
  // (the next product's input type); the reference works on a float32 copy.
  // Under a mask only the active rows of K and V take part (their gradient scatters back).
  const torch::Tensor k = active_.defined() ? keys.index_select(0, active_) : keys;      // (n, d_in)
  const torch::Tensor v = active_.defined() ? values.index_select(0, active_) : values;  // (n, d_out)
  // On the CPU the fused operator takes the multiplier as a number. On a GPU the multiplier
  // stays a tensor there (reading a CUDA buffer into a number would wait for the GPU in every
  // projection), and Θ is the composition unless pattention_cuda_fused() chooses the
  // CUDA kernels.
  const torch::Tensor s = torch::matmul(x, k.t());  // (..., n)
  const bool fused = pattention_implementation() == PattentionImplementation::fused &&
                     (s.device().is_cpu() || pattention_cuda_fused());
  torch::Tensor a =
      !fused ? pattention_scores_normalise(at_least_float32(s), options_.norm(), multiplier(), options_.eps())
      : s.device().is_cpu() ? pattention_scores_normalise_fused(s, options_.norm(), multiplier_value(), options_.eps())
                            : pattention_scores_normalise_fused(s, options_.norm(), multiplier(), options_.eps());
  if (ScoreCapture* capture = active_capture) capture->record(options_.label(), a);
  return torch::matmul(a, v);  // (..., d_out)
}

void PattentionImpl::append_tokens(const torch::Tensor& new_keys, const torch::Tensor& new_values) {
  if (new_keys.dim() != 2 || new_values.dim() != 2 || new_keys.size(0) != new_values.size(0) ||
      new_keys.size(1) != keys.size(1) || new_values.size(1) != values.size(1)) {
    throw UsageError(fmt::format("Pattention '{}': append_tokens needs keys (m, {}) and values (m, {}), got {} and {}",
                                 options_.label(), keys.size(1), values.size(1), c10::str(new_keys.sizes()),
                                 c10::str(new_values.sizes())));
  }
  torch::NoGradGuard no_grad;
  keys.set_data(torch::cat({keys, new_keys.to(keys.options())}, 0));
  values.set_data(torch::cat({values, new_values.to(values.options())}, 0));
  if (keys.grad().defined()) keys.mutable_grad() = torch::Tensor();
  if (values.grad().defined()) values.mutable_grad() = torch::Tensor();
}

ScoreCapture::ScoreCapture(std::vector<std::string> labels) : labels_(std::move(labels)), previous_(active_capture) {
  active_capture = this;
}

ScoreCapture::ScoreCapture(Sink sink) : sink_(std::move(sink)), previous_(active_capture) { active_capture = this; }

ScoreCapture::~ScoreCapture() { active_capture = previous_; }

ScoreCapture* ScoreCapture::active() { return active_capture; }

void ScoreCapture::record(const std::string& label, const torch::Tensor& scores) {
  if (sink_) return sink_(label, scores);
  if (!labels_.empty() && std::find(labels_.begin(), labels_.end(), label) == labels_.end()) return;
  scores_[label] = scores.detach().clone();
}

}  // namespace tfw
