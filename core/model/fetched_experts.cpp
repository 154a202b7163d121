#include "core/model/fetched_experts.hpp"

#include <torch/csrc/autograd/custom_function.h>

#include <functional>

namespace lrmoe {
namespace {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct FetchContext : torch::CustomClassHolder {
  std::shared_ptr<const ExpertFetchPlan> plan;
  std::shared_ptr<Collectives> collectives;
  torch::ScalarType compute_dtype = torch::kFloat32;  // of the fetched matrices
  ExchangeMeasurement* tally = nullptr;
  // The forward's exchange, once started; fetch_experts hands it to the caller, so that its
  // buffers are not kept with the context until the backward.
  std::shared_ptr<FetchArrival> arrival;
  // The home tensors' shapes and options, for their gradients.
  std::vector<int64_t> gate_up_shape, down_shape;
  torch::TensorOptions options;
  // Deferred returns: where the backward queues its return, and the home parameters it adds
  // into (null: the backward waits and hands the gradients to autograd).
  std::shared_ptr<GradientReturns> returns;
  Tensor home_gate_up, home_down;
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

// Adds one exchange to the tally: bytes to and from the other processes (the counts for this
// process itself are zero), host seconds from its start to its arrival and, of those, the ones
// spent blocked in it, one call.
void tally_exchange(ExchangeMeasurement* tally, int64_t row_bytes,
                    const std::vector<int64_t>& send_counts,
                    const std::vector<int64_t>& recv_counts, int64_t entered_ns,
                    int64_t blocked_ns) {
  if (!tally) return;
  ExchangeCall call{{}, {}, entered_ns, host_clock_ns()};
  for (std::size_t q = 0; q < send_counts.size(); ++q) {
    call.sent_bytes.push_back(send_counts[q] * row_bytes);
    call.received_bytes.push_back(recv_counts[q] * row_bytes);
    tally->bytes_sent += call.sent_bytes.back();
    tally->bytes_received += call.received_bytes.back();
  }
  tally->seconds += 1e-9 * static_cast<double>(call.left_ns - call.entered_ns);
  tally->blocked_seconds += 1e-9 * static_cast<double>(blocked_ns);
  ++tally->calls;
  tally->call_log.push_back(std::move(call));
}

// Both messages' rows, one all-to-all-v, started: `row_bytes` is one expert's two matrices.
Collectives::PendingMessages start_exchange(Collectives& collectives, const Tensor& gate_up,
                                            const Tensor& down,
                                            const std::vector<int64_t>& send_counts,
                                            const std::vector<int64_t>& recv_counts) {
  return collectives.start_exchange_messages(
      {{gate_up, send_counts, recv_counts}, {down, send_counts, recv_counts}});
}

int64_t expert_bytes(const Tensor& gate_up, const Tensor& down) {
  return gate_up.size(1) * gate_up.size(2) * gate_up.element_size() +
         down.size(1) * down.size(2) * down.element_size();
}

// The forward's exchange under way, and the fetched matrices it writes when waited for.
class PendingFetch : public FetchArrival {
 public:
  // `arrived` is told the nanoseconds the wait blocked.
  PendingFetch(Collectives::PendingMessages exchange, Tensor gate_up, Tensor down,
               std::function<void(int64_t)> arrived)
      : exchange_(std::move(exchange)),
        gate_up_(std::move(gate_up)),
        down_(std::move(down)),
        arrived_(std::move(arrived)) {}

  void wait() override {
    if (done_) return;
    const int64_t entered = host_clock_ns();
    const std::vector<Tensor> rows = exchange_.wait();
    const int64_t blocked = host_clock_ns() - entered;
    torch::NoGradGuard no_grad;
    gate_up_.copy_(rows[0]);  // to the compute dtype
    down_.copy_(rows[1]);
    done_ = true;
    arrived_(blocked);
  }

 private:
  Collectives::PendingMessages exchange_;
  Tensor gate_up_, down_;  // the function's outputs' storage, outside the graph
  std::function<void(int64_t)> arrived_;
  bool done_ = false;
};

// The gradient of fetched matrices, zeros where autograd brought none.
Tensor or_zeros(const Tensor& grad, int64_t rows, const std::vector<int64_t>& home_shape,
                const torch::TensorOptions& options) {
  if (grad.defined()) return grad;
  return torch::zeros({rows, home_shape[1], home_shape[2]}, options);
}

class FetchExpertsFunction : public torch::autograd::Function<FetchExpertsFunction> {
 public:
  // Returns the fetched matrices, empty until `state->arrival` is waited for.
  static variable_list forward(AutogradContext* ctx, const Tensor& home_gate_up,
                               const Tensor& home_down, c10::intrusive_ptr<FetchContext> state) {
    const ExpertFetchPlan& plan = *state->plan;
    const Tensor sent = sent_matrices(plan, home_gate_up.device());
    const std::vector<int64_t> send_counts = sizes_of(plan.send);
    const std::vector<int64_t> recv_counts = sizes_of(plan.receive);
    const auto fetched = static_cast<int64_t>(plan.fetched.size());
    const auto compute = home_gate_up.options().dtype(state->compute_dtype);
    Tensor gate_up = torch::empty({fetched, home_gate_up.size(1), home_gate_up.size(2)}, compute);
    Tensor down = torch::empty({fetched, home_down.size(1), home_down.size(2)}, compute);
    const int64_t entered = host_clock_ns();
    Collectives::PendingMessages exchange =
        start_exchange(*state->collectives, home_gate_up.index_select(0, sent),
                       home_down.index_select(0, sent), send_counts, recv_counts);
    const int64_t issuing = host_clock_ns() - entered;
    const int64_t row_bytes = expert_bytes(home_gate_up, home_down);
    state->arrival = std::make_shared<PendingFetch>(
        std::move(exchange), gate_up.detach(), down.detach(),
        [tally = state->tally, row_bytes, send_counts, recv_counts, entered,
         issuing](int64_t waited) {
          tally_exchange(tally, row_bytes, send_counts, recv_counts, entered, issuing + waited);
        });
    state->gate_up_shape = home_gate_up.sizes().vec();
    state->down_shape = home_down.sizes().vec();
    state->options = home_gate_up.options();
    ctx->saved_data["state"] = c10::IValue::make_capsule(std::move(state));
    return {gate_up, down};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto state =
        c10::static_intrusive_pointer_cast<FetchContext>(ctx->saved_data["state"].toCapsule());
    const ExpertFetchPlan& plan = *state->plan;
    const auto fetched = static_cast<int64_t>(plan.fetched.size());
    // The reverse of the forward's exchange, in the master dtype: what arrived from q goes back
    // to q.
    const std::vector<int64_t> send_counts = sizes_of(plan.receive);
    const std::vector<int64_t> recv_counts = sizes_of(plan.send);
    const Tensor grad_gate_up_rows =
        or_zeros(grads[0], fetched, state->gate_up_shape, state->options).to(state->options);
    const Tensor grad_down_rows =
        or_zeros(grads[1], fetched, state->down_shape, state->options).to(state->options);
    const int64_t entered = host_clock_ns();
    auto exchange = std::make_shared<Collectives::PendingMessages>(start_exchange(
        *state->collectives, grad_gate_up_rows, grad_down_rows, send_counts, recv_counts));
    const int64_t issuing = host_clock_ns() - entered;
    const int64_t row_bytes = expert_bytes(grad_gate_up_rows, grad_down_rows);
    const Tensor sent = sent_matrices(plan, state->options.device());
    // What came home, summed per home expert (an expert sent to several processes gets each
    // one's gradient), once arrived; `waited_ns`: how long the wait blocked.
    auto arrive = [exchange, state, row_bytes, send_counts, recv_counts, entered, issuing,
                   sent](int64_t* waited_ns) {
      const int64_t waiting = host_clock_ns();
      std::vector<Tensor> returned = exchange->wait();
      *waited_ns = host_clock_ns() - waiting;
      tally_exchange(state->tally, row_bytes, send_counts, recv_counts, entered,
                     issuing + *waited_ns);
      return returned;
    };
    if (state->returns) {
      state->returns->add([arrive, state, sent] {
        int64_t waited = 0;
        const std::vector<Tensor> returned = arrive(&waited);
        if (sent.numel() == 0) return;
        torch::NoGradGuard no_grad;
        const Tensor* homes[] = {&state->home_gate_up, &state->home_down};
        for (std::size_t m = 0; m < 2; ++m) {
          Tensor home = *homes[m];
          if (!home.grad().defined()) home.mutable_grad() = torch::zeros_like(home);
          home.mutable_grad().index_add_(0, sent, returned[m].to(home.grad().scalar_type()));
        }
      });
      return {Tensor(), Tensor(), Tensor()};
    }
    int64_t waited = 0;
    const std::vector<Tensor> returned = arrive(&waited);
    // Nothing sent from here: no gradient comes home (not a zero tensor the size of every home
    // expert, which a single process would allocate and add for each layer and step).
    if (sent.numel() == 0) return {Tensor(), Tensor(), Tensor()};
    auto grad_gate_up =
        torch::zeros(state->gate_up_shape, state->options).index_add_(0, sent, returned[0]);
    auto grad_down =
        torch::zeros(state->down_shape, state->options).index_add_(0, sent, returned[1]);
    return {grad_gate_up, grad_down, Tensor()};
  }
};

}  // namespace

void GradientReturns::finish() {
  // Taken first: a failing wait leaves none behind for the next step.
  std::vector<std::function<void()>> pending = std::move(pending_);
  pending_.clear();
  for (const std::function<void()>& finish : pending) finish();
}

FetchedExperts fetch_experts(const torch::Tensor& home_gate_up, const torch::Tensor& home_down,
                             std::shared_ptr<const ExpertFetchPlan> plan,
                             std::shared_ptr<Collectives> collectives,
                             torch::ScalarType compute_dtype, ExchangeMeasurement* tally,
                             std::shared_ptr<GradientReturns> returns) {
  auto state = c10::make_intrusive<FetchContext>();
  if (returns) {
    state->returns = std::move(returns);
    state->home_gate_up = home_gate_up;
    state->home_down = home_down;
  }
  state->plan = std::move(plan);
  state->collectives = std::move(collectives);
  state->compute_dtype = compute_dtype;
  state->tally = tally;
  const variable_list fetched = FetchExpertsFunction::apply(home_gate_up, home_down, state);
  return {fetched[0], fetched[1], std::move(state->arrival)};
}

}  // namespace lrmoe
