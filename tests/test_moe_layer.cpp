// The MoE layer's numerics: forward and every gradient against a naive per-expert reference and
// against finite differences in double precision, the per-pair backward seam, the routers; and
// its experts' initialisation.

#include <catch2/catch.hpp>

#include "core/config/model_presets.hpp"
#include "core/model/expert_pairs_function.hpp"
#include "core/model/moe_layer.hpp"
#include "core/model/transformer.hpp"
#include "support/tensor_checks.hpp"

using namespace lrmoe;
using lrmoe_test::require_close;

namespace {

ModelConfig small_moe(RouterKind router, int64_t shared) {
  ModelConfig c = *find_preset("tiny-moe");
  c.hidden_size = 12;
  c.num_experts = 6;
  c.top_k = 2;
  c.expert_ffn_size = 5;
  c.shared_experts = shared;
  c.router = router;
  c.aux_loss_coef = 0.01;
  c.z_loss_coef = 0.001;
  return c;
}

// Random parameters in double. Every token carries a large first feature that the router
// weighs +2 for every expert but the last and -2 for the last: the last expert never gets a token.
MoELayer make_layer(const ModelConfig& c, uint64_t seed) {
  torch::manual_seed(seed);
  MoELayer layer(c);
  layer->to(torch::kFloat64);
  torch::NoGradGuard no_grad;
  for (auto& p : layer->parameters()) p.normal_(0.0, 0.5);
  auto router_weight = layer->router()->named_parameters()["weight"];
  router_weight.select(1, 0).fill_(2.0);
  router_weight[c.num_experts - 1][0] = -2.0;
  return layer;
}

torch::Tensor input_with_unpopular_last_expert(const ModelConfig& c, int64_t tokens) {
  auto x = torch::randn({tokens, c.hidden_size}, torch::kFloat64);
  x.select(1, 0).fill_(5.0);
  return x;
}

// The reference auxiliary loss from its formulas: Switch-style balancing, coef * E * sum_e f_e *
// P_e with f_e the share of the routed pairs going to e and P_e the mean of the distribution
// (softmax, or sigmoid scores normalised per token), plus the z-loss.
torch::Tensor naive_aux_loss(const ModelConfig& c, const torch::Tensor& x,
                             const torch::Tensor& router_weight, const torch::Tensor& experts) {
  auto logits = x.matmul(router_weight.t());
  auto distribution = c.router == RouterKind::Softmax
                          ? torch::softmax(logits, -1)
                          : torch::sigmoid(logits) / torch::sigmoid(logits).sum(-1, true);
  auto share = torch::bincount(experts.reshape({-1}), {}, c.num_experts).to(x.scalar_type()) /
               static_cast<double>(experts.numel());
  return c.aux_loss_coef * static_cast<double>(c.num_experts) *
             (share * distribution.mean(0)).sum() +
         c.z_loss_coef * torch::logsumexp(logits, -1).pow(2).mean();
}

// The reference: every token, every chosen expert, plain autograd ops, no compaction.
torch::Tensor naive_moe(const torch::Tensor& x, const torch::Tensor& experts,
                        const torch::Tensor& gates, const torch::Tensor& w_gate_up,
                        const torch::Tensor& w_down) {
  const int64_t ffn = w_down.size(2);
  std::vector<torch::Tensor> rows;
  for (int64_t t = 0; t < x.size(0); ++t) {
    auto row = torch::zeros({x.size(1)}, x.options());
    for (int64_t j = 0; j < experts.size(1); ++j) {
      const int64_t e = experts[t][j].item<int64_t>();
      auto pre = w_gate_up[e].matmul(x[t]);
      auto hidden = torch::silu(pre.narrow(0, 0, ffn)) * pre.narrow(0, ffn, ffn);
      row = row + gates[t][j] * w_down[e].matmul(hidden);
    }
    rows.push_back(row);
  }
  return torch::stack(rows);
}

}  // namespace

TEST_CASE("MoE layer forward and gradients match a naive per-expert reference", "[moe]") {
  for (RouterKind router : {RouterKind::Softmax, RouterKind::Sigmoid}) {
    for (int64_t shared : {0, 1}) {
      DYNAMIC_SECTION("router " << (router == RouterKind::Softmax ? "softmax" : "sigmoid")
                                << ", shared " << shared) {
        ModelConfig c = small_moe(router, shared);
        MoELayer layer = make_layer(c, 7);
        auto x = input_with_unpopular_last_expert(c, 20).requires_grad_(true);
        MoEOutput out = layer(x);

        // Same routing through the reference path, with its own leaf copies of every parameter.
        auto x_ref = x.detach().clone().requires_grad_(true);
        auto params = layer->named_parameters();
        std::map<std::string, torch::Tensor> ref;
        for (auto& item : params)
          ref[item.key()] = item.value().detach().clone().requires_grad_(true);
        Router ref_router(c);
        ref_router->to(torch::kFloat64);
        {
          torch::NoGradGuard no_grad;
          ref_router->named_parameters()["weight"].copy_(ref["router.weight"]);
        }
        Routing routing = ref_router(x_ref);
        auto counts = torch::bincount(routing.experts.reshape({-1}), {}, c.num_experts);
        REQUIRE(counts[c.num_experts - 1].item<int64_t>() == 0);  // an expert with no token
        auto expected = naive_moe(x_ref, routing.experts, routing.gates, ref["experts_gate_up"],
                                  ref["experts_down"]);
        if (shared) {
          auto& wgu = ref["shared_experts.gate_up.weight"];
          auto& wd = ref["shared_experts.down.weight"];
          const int64_t f = wd.size(1);
          auto pre = x_ref.matmul(wgu.t());
          expected =
              expected + (torch::silu(pre.narrow(1, 0, f)) * pre.narrow(1, f, f)).matmul(wd.t());
        }
        require_close(out.hidden, expected, 1e-12);
        auto expected_aux =
            naive_aux_loss(c, x_ref, ref_router->named_parameters()["weight"], routing.experts);
        require_close(out.aux_loss, expected_aux, 1e-12);

        auto probe = torch::randn_like(expected);
        ((out.hidden * probe).sum() + out.aux_loss).backward();
        ((expected * probe).sum() + expected_aux).backward();
        require_close(x.grad(), x_ref.grad(), 1e-10);
        for (auto& item : params) {
          INFO("parameter " << item.key());
          auto reference_grad = item.key() == "router.weight"
                                    ? ref_router->named_parameters()["weight"].grad()
                                    : ref[item.key()].grad();
          require_close(item.value().grad(), reference_grad, 1e-10);
        }
        // The expert that received no token has exactly zero gradient.
        REQUIRE(params["experts_down"].grad()[c.num_experts - 1].abs().max().item<double>() == 0.0);
      }
    }
  }
}

TEST_CASE("routed experts match central finite differences in double precision", "[moe]") {
  torch::manual_seed(3);
  const int64_t tokens = 6, hidden = 5, ffn = 4, experts = 4;
  auto x = torch::randn({tokens, hidden}, torch::kFloat64).requires_grad_(true);
  auto w_gate_up = torch::randn({experts, 2 * ffn, hidden}, torch::kFloat64).requires_grad_(true);
  auto w_down = torch::randn({experts, hidden, ffn}, torch::kFloat64).requires_grad_(true);
  // Two pairs per token; expert 2 gets none.
  auto pair_tokens = torch::arange(tokens).repeat_interleave(2);
  auto pair_experts = torch::tensor({0, 1, 3, 0, 1, 3, 0, 0, 3, 1, 1, 3}, torch::kInt64);
  torch::Tensor order;
  ExpertPairs pairs = compact_pairs_by_expert(pair_tokens, pair_experts, experts, &order);
  REQUIRE(pairs.expert_offsets == std::vector<int64_t>{0, 4, 8, 8, 12});
  auto gates = torch::rand({12}, torch::kFloat64).requires_grad_(true);
  auto probe = torch::randn({tokens, hidden}, torch::kFloat64);

  auto loss_of = [&]() {
    return (routed_experts(x, gates.index_select(0, order), pairs.tokens, w_gate_up, w_down,
                           nullptr, single_rank_pass(pairs, experts)) *
            probe)
        .sum();
  };
  loss_of().backward();

  for (torch::Tensor* tensor : {&x, &gates, &w_gate_up, &w_down}) {
    auto flat = tensor->detach().view({-1});
    auto grad = tensor->grad().view({-1});
    for (int64_t i = 0; i < flat.numel(); ++i) {
      const double h = 1e-6;
      const double saved = flat[i].item<double>();
      double plus, minus;
      {
        torch::NoGradGuard no_grad;
        flat[i] = saved + h;
        plus = loss_of().item<double>();
        flat[i] = saved - h;
        minus = loss_of().item<double>();
        flat[i] = saved;
      }
      const double numeric = (plus - minus) / (2 * h);
      INFO("element " << i << " numeric " << numeric << " analytic " << grad[i].item<double>());
      REQUIRE(grad[i].item<double>() == Approx(numeric).margin(1e-7).epsilon(1e-6));
    }
  }
}

TEST_CASE("sigmoid router: the selection bias picks experts but never weights them", "[moe]") {
  ModelConfig c = small_moe(RouterKind::Sigmoid, 0);
  c.routed_scaling_factor = 2.5;
  c.bias_update_rate = 0.1;
  MoELayer layer = make_layer(c, 11);
  auto x = input_with_unpopular_last_expert(c, 30);
  Router router = layer->router();
  {
    torch::NoGradGuard no_grad;
    router->named_buffers()["selection_bias"][c.num_experts - 1] = 100.0;
  }
  Routing routing = router(x);
  auto picked_last = (routing.experts == c.num_experts - 1).any(1);
  REQUIRE(picked_last.all().item<bool>());
  // Gates: renormalised sigmoid scores of the chosen experts, times the scaling factor.
  auto scores =
      torch::sigmoid(x.matmul(router->named_parameters()["weight"].t())).gather(1, routing.experts);
  require_close(routing.gates.detach(), 2.5 * scores / scores.sum(1, true), 1e-12);
}

TEST_CASE("aux-loss-free bias update favours under-loaded experts and stays centred", "[moe]") {
  ModelConfig c = small_moe(RouterKind::Sigmoid, 0);
  c.bias_update_rate = 0.01;
  Router router(c);
  router->update_selection_bias(torch::tensor({10, 0, 5, 5, 5, 5}, torch::kInt64));
  auto bias = router->selection_bias();
  REQUIRE(bias[0].item<float>() < bias[2].item<float>());
  REQUIRE(bias[1].item<float>() > bias[2].item<float>());
  REQUIRE(std::abs(bias.mean().item<float>()) < 1e-7);
}

TEST_CASE("an expert's initial weights depend on the seed, its layer and its index alone",
          "[moe]") {
  // What lets a process draw only the experts it holds (docs/ARCHITECTURE.md, "Expert-sharded
  // state"): the same expert of a model with more experts, another router, another width of
  // everything else, is drawn alike.
  ModelConfig small = *find_preset("tiny-moe");
  small.vocab_size = 64;
  small.num_experts = 4;
  ModelConfig large = small;
  large.num_experts = 8;
  large.vocab_size = 96;
  auto experts_of = [](const ModelConfig& c, uint64_t seed) {
    torch::manual_seed(seed);
    Transformer model(c);
    std::vector<torch::Tensor> layers;
    for (const MoELayer& layer : model->moe_layers())
      layers.push_back(layer->expert_parameters().front().detach().clone());
    return layers;
  };
  const auto a = experts_of(small, 5), b = experts_of(large, 5), other_seed = experts_of(small, 6);
  REQUIRE(a.size() >= 2);
  for (std::size_t l = 0; l < a.size(); ++l) {
    REQUIRE(torch::equal(a[l], b[l].narrow(0, 0, small.num_experts)));
    REQUIRE_FALSE(torch::equal(a[l], other_seed[l]));
  }
  REQUIRE_FALSE(torch::equal(a[0], a[1]));
  // Drawn from N(0, init_std), every expert on its own stream.
  REQUIRE_FALSE(torch::equal(a[0][0], a[0][1]));
  REQUIRE(a[0].std().item<double>() == Approx(small.init_std).epsilon(0.05));
}
