// Parameter counts: the full presets have their published sizes (computed, never allocated), and
// the analytic count equals the real model's for the small presets.

#include <catch2/catch.hpp>

#include "core/config/model_presets.hpp"
#include "core/config/parameter_count.hpp"
#include "core/model/transformer.hpp"

using namespace lrmoe;

TEST_CASE("full presets have the published total and active parameter counts", "[params]") {
  ParameterCount qwen = count_parameters(*find_preset("qwen3-30b-a3b"));
  CHECK(qwen.total == Approx(30.5e9).epsilon(0.02));
  CHECK(qwen.active == Approx(3.3e9).epsilon(0.10));
  ParameterCount glm = count_parameters(*find_preset("glm45-air"));
  CHECK(glm.total == Approx(106e9).epsilon(0.02));
  CHECK(glm.active == Approx(12e9).epsilon(0.10));
}

TEST_CASE("the analytic count equals the allocated model's for every small preset", "[params]") {
  for (const char* name : {"qwen3-mini", "glm45-mini", "tiny-moe"}) {
    for (bool tied : {false, true}) {
      ModelConfig c = *find_preset(name);
      c.vocab_size = 300;
      c.tie_embeddings = tied;
      Transformer model(c);
      int64_t allocated = 0;
      for (const auto& p : model->parameters()) allocated += p.numel();
      INFO(name << " tied " << tied);
      CHECK(count_parameters(c).total == allocated);
    }
  }
}

TEST_CASE("a model whose MoE layers are dense has their active parameters and no MoE layer",
          "[params]") {
  for (const char* name : {"qwen3-mini", "glm45-mini"}) {
    ModelConfig moe = *find_preset(name);
    moe.vocab_size = 300;
    ModelConfig dense = moe;
    dense.moe_as_dense = true;
    Transformer model(dense);
    INFO(name);
    CHECK(model->moe_layers().empty());
    CHECK(moe_layer_count(dense) == 0);
    int64_t allocated = 0;
    for (const auto& p : model->parameters()) allocated += p.numel();
    CHECK(count_parameters(dense).total == allocated);
    // Every parameter active but the embedding (a lookup): the MoE's active parameters per
    // token, less its routers.
    const int64_t embedding = dense.vocab_size * dense.hidden_size;
    const int64_t routers = moe_layer_count(moe) * moe.num_experts * moe.hidden_size;
    CHECK(count_parameters(dense).active == allocated - embedding);
    CHECK(count_parameters(dense).active == count_parameters(moe).active - routers);
  }
}
