#include "core/model/fetched_experts.hpp"

#include <torch/csrc/autograd/custom_function.h>

namespace lrmoe {
namespace {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct FetchContext : torch::CustomClassHolder {
  std::shared_ptr<const ExpertFetchPlan> plan;
  std::shared_ptr<Collectives> collectives;
  ExchangeMeasurement* tally = nullptr;
  // The home tensors' shapes and options, for their gradients.
  std::vector<int64_t> gate_up_shape, down_shape;
  torch::TensorOptions options;
};

std::vector<int64_t> sizes_of(const std::vector<std::vector<int64_t>>& lists) {
  std::vector<int64_t> sizes;
  for (const auto& list : lists) sizes.push_back(static_cast<int64_t>(list.size()));
  return sizes;
}

// [sent] int64: the home-local matrix of every expert sent, process after process.
Tensor sent_matrices(const ExpertFetchPlan& plan, const torch::Device& device) {
  std::vector<int64_t> matrices;
  for (const auto& experts : plan.send)
    for (const int64_t e : experts) matrices.push_back(e - plan.home.first);
  return torch::tensor(matrices, torch::kInt64).to(device);
}

// Both messages' rows exchanged, tallied: bytes to and from the other processes (the counts for
// this process itself are zero), host seconds, one call.
std::vector<Tensor> exchange(FetchContext& state, const Tensor& gate_up, const Tensor& down,
                             const std::vector<int64_t>& send_counts,
                             const std::vector<int64_t>& recv_counts) {
  const int64_t entered = host_clock_ns();
  std::vector<Tensor> arrived = state.collectives->exchange_messages(
      {{gate_up, send_counts, recv_counts}, {down, send_counts, recv_counts}});
  if (state.tally) {
    const int64_t row_bytes = gate_up.size(1) * gate_up.size(2) * gate_up.element_size() +
                              down.size(1) * down.size(2) * down.element_size();
    ExchangeCall call{{}, {}, entered, host_clock_ns()};
    for (std::size_t q = 0; q < send_counts.size(); ++q) {
      call.sent_bytes.push_back(send_counts[q] * row_bytes);
      call.received_bytes.push_back(recv_counts[q] * row_bytes);
      state.tally->bytes_sent += call.sent_bytes.back();
      state.tally->bytes_received += call.received_bytes.back();
    }
    state.tally->seconds += 1e-9 * static_cast<double>(call.left_ns - call.entered_ns);
    ++state.tally->calls;
    state.tally->call_log.push_back(std::move(call));
  }
  return arrived;
}

// The gradient of fetched matrices, zeros where autograd brought none.
Tensor or_zeros(const Tensor& grad, int64_t rows, const std::vector<int64_t>& home_shape,
                const torch::TensorOptions& options) {
  if (grad.defined()) return grad;
  return torch::zeros({rows, home_shape[1], home_shape[2]}, options);
}

class FetchExpertsFunction : public torch::autograd::Function<FetchExpertsFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const Tensor& home_gate_up,
                               const Tensor& home_down, c10::intrusive_ptr<FetchContext> state) {
    const ExpertFetchPlan& plan = *state->plan;
    const Tensor sent = sent_matrices(plan, home_gate_up.device());
    const std::vector<int64_t> send_counts = sizes_of(plan.send);
    const std::vector<int64_t> recv_counts = sizes_of(plan.receive);
    const std::vector<Tensor> arrived =
        exchange(*state, home_gate_up.index_select(0, sent), home_down.index_select(0, sent),
                 send_counts, recv_counts);
    state->gate_up_shape = home_gate_up.sizes().vec();
    state->down_shape = home_down.sizes().vec();
    state->options = home_gate_up.options();
    ctx->saved_data["state"] = c10::IValue::make_capsule(std::move(state));
    return {arrived[0], arrived[1]};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto state =
        c10::static_intrusive_pointer_cast<FetchContext>(ctx->saved_data["state"].toCapsule());
    const ExpertFetchPlan& plan = *state->plan;
    const auto fetched = static_cast<int64_t>(plan.fetched.size());
    // The reverse of the forward's exchange: what arrived from q goes back to q.
    const std::vector<int64_t> send_counts = sizes_of(plan.receive);
    const std::vector<int64_t> recv_counts = sizes_of(plan.send);
    const std::vector<Tensor> returned = exchange(
        *state, or_zeros(grads[0], fetched, state->gate_up_shape, state->options),
        or_zeros(grads[1], fetched, state->down_shape, state->options), send_counts, recv_counts);
    // Nothing sent from here: no gradient comes home (not a zero tensor the size of every home
    // expert, which a single process would allocate and add for each layer and step).
    const Tensor sent = sent_matrices(plan, state->options.device());
    if (sent.numel() == 0) return {Tensor(), Tensor(), Tensor()};
    // An expert sent to several processes gets each one's gradient: index_add sums them.
    auto grad_gate_up = torch::zeros(state->gate_up_shape, state->options)
                            .index_add_(0, sent, returned[0].to(state->options.dtype()));
    auto grad_down = torch::zeros(state->down_shape, state->options)
                         .index_add_(0, sent, returned[1].to(state->options.dtype()));
    return {grad_gate_up, grad_down, Tensor()};
  }
};

}  // namespace

FetchedExperts fetch_experts(const torch::Tensor& home_gate_up, const torch::Tensor& home_down,
                             std::shared_ptr<const ExpertFetchPlan> plan,
                             std::shared_ptr<Collectives> collectives, ExchangeMeasurement* tally) {
  auto state = c10::make_intrusive<FetchContext>();
  state->plan = std::move(plan);
  state->collectives = std::move(collectives);
  state->tally = tally;
  const variable_list fetched =
      FetchExpertsFunction::apply(home_gate_up, home_down, std::move(state));
  return {fetched[0], fetched[1]};
}

}  // namespace lrmoe
