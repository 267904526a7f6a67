// The shared decoder skeleton. See decoder.h.
#include "engine/nn/decoder.h"

#include <fmt/format.h>

#include "engine/core/config_table.h"

namespace tfw {

void decoder_sizes_parse(ConfigTable& table, DecoderSpec& spec) {
  spec.layers = config_size(table, "layers", table.require_int("layers"), kMaxLayers);
  spec.d = config_size(table, "d", table.require_int("d"));
  spec.heads = config_size(table, "heads", table.require_int("heads"));
}

void decoder_context_parse(ConfigTable& table, DecoderSpec& spec) {
  spec.vocab = config_size(table, "vocab", table.require_int("vocab"));
  spec.seq_len = config_size(table, "seq_len", table.get_int("seq_len", 1024));
  spec.rotary_pct = table.get_double("rotary_pct", 0.25);
  spec.rotary_base = table.get_positive("rotary_base", 10000.0);
  if (!(spec.rotary_pct >= 0 && spec.rotary_pct <= 1)) {
    table.fail("rotary_pct", fmt::format("must be in [0, 1], got {}", spec.rotary_pct), "the paper uses 0.25");
  }
}

TiedDecoderLM::TiedDecoderLM(const DecoderOptions& options) : options_(options) {
  embedding_ = register_parameter("embedding", torch::randn({options.vocab, options.d}) * options.embedding_std);
  layers_ = register_module("layers", torch::nn::ModuleList());
  final_norm_ = register_module(
      "final_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({options.d}).eps(options.final_norm_eps)));
}

void TiedDecoderLM::add_block(std::shared_ptr<DecoderBlock> block) { layers_->push_back(std::move(block)); }

torch::Tensor TiedDecoderLM::hidden(const torch::Tensor& ids) {
  torch::Tensor x = after_embedding(torch::embedding(embedding_, ids));  // (B, T, d)
  RotaryTable rotary = rotary_table(ids.size(1), options_.rotary_dims, options_.rotary_base, x.options());
  for (const auto& layer : *layers_) x = layer->as<DecoderBlock>()->forward(x, rotary);
  return final_normed(x);  // (B, T, d)
}

torch::Tensor TiedDecoderLM::forward_cached(const torch::Tensor& ids, KVCache& cache) {
  torch::Tensor x = after_embedding(torch::embedding(embedding_, ids));  // (B, T, d)
  RotaryTable rotary = rotary_table(ids.size(1), options_.rotary_dims, options_.rotary_base, x.options(), cache.length);
  rotary.cache = &cache;
  cache.layer = 0;
  for (const auto& layer : *layers_) x = layer->as<DecoderBlock>()->forward(x, rotary);
  cache.length += ids.size(1);
  return torch::matmul(final_normed(x), embedding_.t());  // (B, T, V)
}

torch::Tensor TiedDecoderLM::forward(const torch::Tensor& ids) {
  return torch::matmul(hidden(ids), embedding_.t());  // (B, T, V)
}

}  // namespace tfw
