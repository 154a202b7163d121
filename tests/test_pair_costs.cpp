// The unit costs of a pair and of the activations outside the experts follow the run's precision
// (core/pipeline/pair_costs.hpp, Note [Memory model]): at bf16 everything computed and exchanged
// takes 2 bytes an element, while the experts' parameters, gradients and optimizer state stay
// fp32 master copies.

#include <catch2/catch.hpp>

#include "core/config/model_presets.hpp"
#include "core/pipeline/pair_costs.hpp"
#include "core/pipeline/rank_budget.hpp"

using namespace lrmoe;

TEST_CASE("at bf16 the token rows and token buffers take half the bytes, the experts the same",
          "[memory]") {
  const ModelConfig model = *find_preset("tiny-moe");
  for (const bool recompute : {false, true}) {
    INFO("recompute " << recompute);
    const PairCosts fp32 = pair_costs(model, recompute, element_sizes(Precision::Fp32));
    const PairCosts bf16 = pair_costs(model, recompute, element_sizes(Precision::Bf16));
    CHECK(fp32.row_bytes == 4 * model.hidden_size);
    CHECK(bf16.row_bytes == 2 * model.hidden_size);
    CHECK(bf16.pre_activation_bytes * 2 == fp32.pre_activation_bytes);
    CHECK(bf16.memory.forward_pair_bytes * 2 == fp32.memory.forward_pair_bytes);
    CHECK(bf16.memory.saved_pair_bytes * 2 == fp32.memory.saved_pair_bytes);
    CHECK(bf16.memory.backward_pair_bytes * 2 == fp32.memory.backward_pair_bytes);
    CHECK(bf16.expert_bytes == 3 * model.hidden_size * model.expert_ffn_size * 4);
    CHECK(bf16.expert_bytes == fp32.expert_bytes);
    CHECK(bf16.memory.expert_bytes == fp32.memory.expert_bytes);
  }
}

TEST_CASE("the activations outside the experts shrink at bf16 except those kept in fp32",
          "[memory]") {
  const ModelConfig model = *find_preset("tiny-moe");
  const int64_t tokens = 64, seq_len = 32;
  const int64_t fp32 = dense_activation_bytes(model, tokens, seq_len, 4);
  const int64_t bf16 = dense_activation_bytes(model, tokens, seq_len, 2);
  // Attention probabilities, the router's logits and probabilities, the logits and their
  // softmax: 4 bytes an element at either precision, so that twice the bf16 figure exceeds the
  // fp32 one by exactly their bytes.
  const int64_t moe_layers = model.num_layers - model.first_k_dense;
  const int64_t kept_fp32 = model.num_layers * model.num_heads * seq_len +
                            moe_layers * 2 * model.num_experts + 2 * model.vocab_size;
  CHECK(2 * bf16 - fp32 == kept_fp32 * 4 * tokens);
  CHECK(bf16 < fp32);
}
