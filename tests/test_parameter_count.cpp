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
