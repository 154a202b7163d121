#include "core/model/expert_pairs_function.hpp"

#include <torch/csrc/autograd/custom_function.h>

#include "core/model/grouped_gemm.hpp"

namespace lrmoe {
namespace {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Non-tensor state of one forward call that its backward needs.
struct PairsContext : torch::CustomClassHolder {
  std::vector<int64_t> expert_offsets;
  PairBackwardPlanner planner;  // empty: keep every pair
};

std::vector<int64_t> offsets_from_counts(const Tensor& counts) {
  auto cpu = counts.to(torch::kCPU, torch::kInt64).contiguous();
  std::vector<int64_t> offsets(static_cast<size_t>(cpu.numel()) + 1, 0);
  const int64_t* data = cpu.data_ptr<int64_t>();
  for (int64_t e = 0; e < cpu.numel(); ++e) offsets[e + 1] = offsets[e] + data[e];
  return offsets;
}

Tensor swiglu_hidden(const Tensor& gate_up, int64_t ffn) {
  return torch::silu(gate_up.narrow(1, 0, ffn)) * gate_up.narrow(1, ffn, ffn);
}

class ExpertPairsFunction : public torch::autograd::Function<ExpertPairsFunction> {
 public:
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& gates, const Tensor& w_gate_up,
                        const Tensor& w_down, const Tensor& tokens, const Tensor& experts,
                        c10::intrusive_ptr<PairsContext> state) {
    const int64_t ffn = w_down.size(2);
    const int64_t pairs = tokens.numel();
    auto x_pairs = x.index_select(0, tokens);                   // [pairs, hidden]
    auto gate_up = torch::empty({pairs, 2 * ffn}, x.options());  // expert pre-activations
    grouped_mm(x_pairs, state->expert_offsets, w_gate_up, /*transpose_weights=*/true, gate_up);
    auto expert_out = torch::empty({pairs, x.size(1)}, x.options());
    grouped_mm(swiglu_hidden(gate_up, ffn), state->expert_offsets, w_down, /*transpose_weights=*/true, expert_out);
    auto weighted = expert_out * gates.to(x.scalar_type()).unsqueeze(1);
    auto out = torch::zeros_like(x).index_add_(0, tokens, weighted);

    ctx->save_for_backward({x, gates, w_gate_up, w_down, tokens, experts, gate_up, expert_out});
    ctx->saved_data["state"] = c10::IValue::make_capsule(std::move(state));
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto saved = ctx->get_saved_variables();
    const Tensor& x = saved[0];
    const Tensor& gates = saved[1];
    const Tensor& w_gate_up = saved[2];
    const Tensor& w_down = saved[3];
    const Tensor& tokens = saved[4];
    const Tensor& experts = saved[5];
    const Tensor& gate_up = saved[6];
    const Tensor& expert_out = saved[7];
    auto state = c10::static_intrusive_pointer_cast<PairsContext>(ctx->saved_data["state"].toCapsule());
    const int64_t ffn = w_down.size(2);

    auto upstream = grad_outputs[0].index_select(0, tokens);  // d at each pair's token
    // The gate gradient needs only the forward output: exact for every pair.
    auto grad_gates = (upstream * expert_out).sum(1).to(gates.scalar_type());

    // Which pairs get expert backward work, and with what weight.
    Tensor kept_tokens = tokens, kept_upstream = upstream, kept_gate_up = gate_up;
    Tensor kept_scale = gates.to(x.scalar_type());
    std::vector<int64_t> kept_offsets = state->expert_offsets;
    if (state->planner) {
      PairSignals signals{experts, gates, upstream.norm(2, 1), x.norm(2, 1).index_select(0, tokens),
                          swiglu_hidden(gate_up, ffn).norm(2, 1), state->expert_offsets};
      PairBackwardPlan plan = state->planner(signals);
      kept_tokens = tokens.index_select(0, plan.kept);
      kept_upstream = upstream.index_select(0, plan.kept);
      kept_gate_up = gate_up.index_select(0, plan.kept);
      kept_scale = kept_scale.index_select(0, plan.kept);
      if (plan.weights.defined()) kept_scale = kept_scale * plan.weights.to(x.scalar_type());
      kept_offsets = offsets_from_counts(
          torch::bincount(experts.index_select(0, plan.kept), /*weights=*/{}, w_down.size(0)));
    }

    auto grad_expert_out = kept_upstream * kept_scale.unsqueeze(1);  // gate * d
    auto kept_x = x.index_select(0, kept_tokens);
    auto a = kept_gate_up.narrow(1, 0, ffn);
    auto b = kept_gate_up.narrow(1, ffn, ffn);
    auto sig = torch::sigmoid(a);
    auto silu_a = a * sig;
    auto grad_w_down = grouped_weight_grad(grad_expert_out, silu_a * b, kept_offsets, w_down);
    auto grad_hidden = torch::empty_like(a);
    grouped_mm(grad_expert_out, kept_offsets, w_down, /*transpose_weights=*/false, grad_hidden);
    auto grad_a = grad_hidden * b * sig * (1 + a * (1 - sig));  // d silu(a) / da = sig * (1 + a (1 - sig))
    auto grad_pre = torch::cat({grad_a, grad_hidden * silu_a}, 1);
    auto grad_w_gate_up = grouped_weight_grad(grad_pre, kept_x, kept_offsets, w_gate_up);
    auto grad_x_pairs = torch::empty_like(kept_x);
    grouped_mm(grad_pre, kept_offsets, w_gate_up, /*transpose_weights=*/false, grad_x_pairs);
    auto grad_x = torch::zeros_like(x).index_add_(0, kept_tokens, grad_x_pairs);
    return {grad_x, grad_gates, grad_w_gate_up, grad_w_down, Tensor(), Tensor(), Tensor()};
  }
};

}  // namespace

ExpertPairs compact_pairs_by_expert(const torch::Tensor& pair_tokens, const torch::Tensor& pair_experts,
                                    int64_t num_experts, torch::Tensor* gate_order) {
  auto order = std::get<1>(torch::sort(pair_experts, /*stable=*/true, /*dim=*/0, /*descending=*/false));
  ExpertPairs pairs;
  pairs.tokens = pair_tokens.index_select(0, order);
  pairs.experts = pair_experts.index_select(0, order);
  pairs.expert_offsets = offsets_from_counts(torch::bincount(pair_experts, /*weights=*/{}, num_experts));
  if (gate_order) *gate_order = order;
  return pairs;
}

torch::Tensor routed_experts(const torch::Tensor& x, const torch::Tensor& gates, const ExpertPairs& pairs,
                             const torch::Tensor& w_gate_up, const torch::Tensor& w_down,
                             const PairBackwardPlanner* planner) {
  auto state = c10::make_intrusive<PairsContext>();
  state->expert_offsets = pairs.expert_offsets;
  if (planner) state->planner = *planner;
  return ExpertPairsFunction::apply(x, gates, w_gate_up, w_down, pairs.tokens, pairs.experts, std::move(state));
}

}  // namespace lrmoe
