#include "core/model/expert_pairs_function.hpp"

#include <torch/csrc/autograd/custom_function.h>

#include <functional>

#include "core/model/grouped_gemm.hpp"
#include "core/model/grouped_swiglu.hpp"
#include "core/pipeline/expert_counts.hpp"
#include "core/pipeline/pair_rows.hpp"
#include "core/pipeline/rank_parts.hpp"
#include "core/pipeline/stable_order.hpp"

namespace lrmoe {
namespace {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Non-tensor state of one forward call that its backward needs.
struct PairsContext : torch::CustomClassHolder {
  std::shared_ptr<ExpertPipeline> pipeline;  // null: one rank, keep every pair
  std::shared_ptr<const ForwardPass> forward;
  std::vector<int64_t> bank_index;  // [experts]: each expert's weight matrix; empty: its index
  std::shared_ptr<FetchArrival> fetch_arrival;  // the fetched experts' (sharded state), or null
  std::function<void()> after_dispatch;         // run once the first pairs left (may be empty)

  // The weight matrix of each of one rank's instances: replicas read their expert's matrix where
  // it is (Note [Grouped GEMM kernels]).
  WeightIndex part_weights(const RankPart& part) const {
    WeightIndex matrices;
    for (int64_t i = part.first_instance; i < part.first_instance + part.instances; ++i) {
      const int64_t e = forward->table->instances[static_cast<std::size_t>(i)].expert;
      matrices.push_back(bank_index.empty() ? e : bank_index[static_cast<std::size_t>(e)]);
    }
    return matrices;
  }

  PairExchange& exchange() {
    static PairExchange local(std::make_shared<Collectives>());
    return pipeline ? pipeline->exchange() : local;
  }

  // The ranks of this process whose rows `slice` holds, each computed on its own.
  std::vector<RankPart> parts(const ProcessSlice& slice) const {
    return rank_parts(slice, *forward->table,
                      pipeline ? pipeline->settings().process : ProcessView{});
  }

  // The pass's chunks (Note [Chunked exchange]): chunk c of the layout whose whole local slice
  // is `whole` and whose chunks are `chunks` (the whole when it has none).
  static int64_t chunk_count(const std::vector<ChunkSlice>& chunks) {
    return chunks.empty() ? 1 : static_cast<int64_t>(chunks.size());
  }
  static const ProcessSlice& chunk(const ProcessSlice& whole, const std::vector<ChunkSlice>& chunks,
                                   int64_t c) {
    return chunks.empty() ? whole : chunks[static_cast<std::size_t>(c)].slice;
  }

  // Runs one rank's part of a phase on `device`, timed by the pipeline's timer of that rank
  // (Note [Critical path], Note [Device timing]).
  void run(int phase, const RankPart& part, const torch::Device& device,
           const std::function<void()>& work) const {
    if (!pipeline) return work();
    pipeline->time_rank_work(phase, part.rank, part.rows, device, work);
  }
};

Tensor rows_of(const Tensor& rows, const RankPart& part) {
  return rows.narrow(0, part.first_row, part.rows);
}

// The parts' rows one after another; a single part as it is, without a copy.
Tensor concat_parts(const std::vector<Tensor>& parts) {
  return parts.size() == 1 ? parts.front() : torch::cat(parts);
}

// The chunks' returns (each in its chunk's send order) waited for and put together in the send
// order of `whole`, of which they are the chunks: what one return of the whole gives.
Tensor returned_whole(std::vector<PendingRows>& returns, const std::vector<ChunkSlice>& chunks,
                      const ProcessSlice& whole) {
  if (chunks.empty()) return returns.front().wait().front();
  Tensor whole_rows;
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    const Tensor rows = returns[c].wait().front();
    if (!whole_rows.defined()) {
      auto shape = rows.sizes().vec();
      shape[0] = whole.send_rows.numel();
      whole_rows = torch::empty(shape, rows.options());
    }
    whole_rows.index_copy_(0, chunks[c].sent_positions, rows);
  }
  return whole_rows;
}

// No fetched experts: an empty tensor of `held`'s matrix shape, outside the graph (LibTorch
// 1.13's custom functions take no undefined tensor).
Tensor none_fetched(const Tensor& fetched, const Tensor& held) {
  return fetched.defined() ? fetched : held.detach().narrow(0, 0, 0);
}

class ExpertPairsFunction : public torch::autograd::Function<ExpertPairsFunction> {
 public:
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& gates,
                        const Tensor& held_gate_up, const Tensor& held_down,
                        const Tensor& fetched_gate_up, const Tensor& fetched_down,
                        const Tensor& tokens, c10::intrusive_ptr<PairsContext> state) {
    // The held experts' matrices, then the fetched ones (maybe none), each read where it is.
    const WeightBank w_gate_up(held_gate_up, fetched_gate_up);
    const WeightBank w_down(held_down, fetched_down);
    const ForwardPass& pass = *state->forward;
    const ProcessSlice& here = pass.layout.local;
    PairExchange& exchange = state->exchange();

    // Chunk by chunk (one, unchunked): chunk c + 1's rows travel while chunk c is multiplied,
    // and chunk c's outputs go home while chunk c + 1 is (Note [Chunked exchange]).
    const std::vector<ChunkSlice>& chunks = pass.chunks;
    const int64_t C = PairsContext::chunk_count(chunks);
    auto dispatch = [&](int64_t c) {
      return exchange.start_dispatch_together(
          {{x, tokens, &PairsContext::chunk(here, chunks, c), Tensor()}});
    };
    const int64_t width = x.size(1);
    const int64_t rows = here.instance_offsets.back();
    const bool recompute = state->pipeline && state->pipeline->recompute();
    // The pre-activations, saved for the backward in the whole slice's destination order; put
    // together from the chunks only when the backward reads them (it may recompute them).
    const int64_t pre_width = w_gate_up.size(1);
    const Tensor pre =
        C == 1 || !recompute ? torch::empty({rows, pre_width}, x.options()) : Tensor();
    std::vector<PendingRows> returns;
    PendingRows arriving = dispatch(0);
    if (state->after_dispatch) {
      state->after_dispatch();
      state->after_dispatch = nullptr;  // it may hold references to the caller's frame
    }
    for (int64_t c = 0; c < C; ++c) {
      const Tensor x_rows = arriving.wait().front();
      if (c + 1 < C) arriving = dispatch(c + 1);
      // The fetched experts travelled while the pairs did; the compute below reads them. Once
      // arrived, the exchange's buffers go: the context lives until the backward.
      if (state->fetch_arrival) {
        state->fetch_arrival->wait();
        state->fetch_arrival.reset();
      }
      // Each rank's part writes its rows of both in place: the pre-activations and the output
      // rows with each hidden row's norm beside them (a metric signal), which go home together.
      const ProcessSlice& slice = PairsContext::chunk(here, chunks, c);
      auto chunk_pre = C == 1 ? pre : torch::empty({x_rows.size(0), pre_width}, x.options());
      auto out_rows = torch::empty({x_rows.size(0), width + 1}, x_rows.options());
      for (const RankPart& part : state->parts(slice)) {
        state->run(kForwardPhase, part, x.device(), [&] {
          auto part_out = rows_of(out_rows, part);
          grouped_swiglu_forward_into(rows_of(chunk_pre, part), part_out.narrow(1, 0, width),
                                      part_out.select(1, width), rows_of(x_rows, part),
                                      part.offsets, w_gate_up, w_down, state->part_weights(part));
        });
      }
      if (C > 1 && pre.defined())
        pre.index_copy_(0, chunks[static_cast<std::size_t>(c)].destination_positions, chunk_pre);
      returns.push_back(exchange.start_return(out_rows, slice));
    }
    auto home = PairExchange::combine_returned(returned_whole(returns, chunks, here), here);
    auto y_home = home.narrow(1, 0, width);
    auto hidden_norm = home.select(1, width);
    auto out = torch::zeros_like(x);
    scatter_add_rows(out, tokens, y_home, gates);

    ctx->save_for_backward({x, gates, held_gate_up, held_down, tokens, y_home, hidden_norm,
                            recompute ? Tensor() : pre, fetched_gate_up, fetched_down});
    ctx->saved_data["state"] = c10::IValue::make_capsule(std::move(state));
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto saved = ctx->get_saved_variables();
    const Tensor& x = saved[0];
    const Tensor& gates = saved[1];
    const Tensor& held_gate_up = saved[2];
    const Tensor& held_down = saved[3];
    const Tensor& fetched_gate_up = saved[8];
    const Tensor& fetched_down = saved[9];
    // The held experts' matrices, then the fetched ones (maybe none), each read where it is.
    const WeightBank w_gate_up(held_gate_up, fetched_gate_up);
    const WeightBank w_down(held_down, fetched_down);
    const Tensor& tokens = saved[4];
    const Tensor& y_home = saved[5];
    const Tensor& hidden_norm = saved[6];
    const Tensor& saved_pre = saved[7];  // undefined when recomputing
    auto state =
        c10::static_intrusive_pointer_cast<PairsContext>(ctx->saved_data["state"].toCapsule());
    const ForwardPass& forward = *state->forward;
    PairExchange& exchange = state->exchange();

    const Tensor& upstream = grad_outputs[0];  // d at each token
    // The gate gradient needs only the forward output at home: exact for every pair (Note
    // [Gradients of dropped pairs] in docs/notes.md).
    auto grad_gates = gathered_row_dot(upstream, tokens, y_home).to(gates.scalar_type());

    BackwardPass plan;
    if (state->pipeline) {
      PairBatch signals;
      signals.gates = gates.detach().to(torch::kFloat32);
      signals.upstream_norm = upstream.norm(2, 1).index_select(0, tokens).to(torch::kFloat32);
      // Norms per token, then per pair: a pair's rows are its token's.
      signals.input_norm = x.norm(2, 1).index_select(0, tokens).to(torch::kFloat32);
      signals.hidden_norm = hidden_norm.to(torch::kFloat32);
      plan = state->pipeline->plan_backward(forward, std::move(signals));
    } else {
      // Every pair is kept, on the instance that computed it in forward.
      plan.local_kept = torch::arange(tokens.numel(), tokens.options());
      plan.layout = forward.layout;
    }
    const ProcessSlice& kept_here = plan.layout.local;
    const ProcessSlice& computed_here = forward.layout.local;
    const bool all_input_grads =
        state->pipeline && state->pipeline->dropped_pairs_keep_input_grad();
    // Saved pre-activations move from each kept pair's forward instance to its backward one,
    // which the backward routing may have chosen elsewhere (Note [Gradients of dropped pairs]).
    const bool move_pre = saved_pre.defined() && state->pipeline;

    // Everything the backward sends out goes in one all-to-all-v (Note [Fused dispatch]): each
    // kept pair's gradient row (gate * weight * d) and input row, to its backward instance; the
    // kept pairs' saved pre-activations; and, when every computed pair keeps its input
    // gradient, every computed pair's gradient row (and input row, to recompute) to its forward
    // instance. Each is its own message, so none is packed beside another and split again, and
    // the input rows are gathered from x once.
    const Tensor kept_tokens = tokens.index_select(0, plan.local_kept);
    auto scale = gates.index_select(0, plan.local_kept).to(x.scalar_type());
    if (plan.local_weights.defined()) scale = scale * plan.local_weights.to(x.scalar_type());
    // Chunk by chunk (one, unchunked), by the forward's chunks of instances (Note [Chunked
    // exchange]): chunk c + 1's messages travel while chunk c computes, and chunk c's input
    // gradients go home while chunk c + 1 does.
    const int64_t C = PairsContext::chunk_count(plan.chunks);
    auto kept_chunk = [&](int64_t c) -> const ProcessSlice& {
      return PairsContext::chunk(kept_here, plan.chunks, c);
    };
    auto computed_chunk = [&](int64_t c) -> const ProcessSlice& {
      return PairsContext::chunk(computed_here, forward.chunks, c);
    };
    const std::size_t all_rows_message = move_pre ? 3 : 2;
    auto dispatch = [&](int64_t c) {
      std::vector<DispatchMessage> messages{{upstream, kept_tokens, &kept_chunk(c), scale},
                                            {x, kept_tokens, &kept_chunk(c), Tensor()}};
      if (move_pre) {
        messages.push_back({saved_pre, plan.context_rows,
                            &PairsContext::chunk(plan.context, plan.context_chunks, c), Tensor()});
      }
      if (all_input_grads) {
        messages.push_back({upstream, tokens, &computed_chunk(c), gates});
        if (!saved_pre.defined()) messages.push_back({x, tokens, &computed_chunk(c), Tensor()});
      }
      return exchange.start_dispatch_together(messages);
    };

    // Every instance's weight gradient summed into its expert's: replica gradients reduce
    // into the owner's parameters.
    SwiGLUWeightGrads weight_grads{WeightGradSum(w_gate_up), WeightGradSum(w_down)};
    std::vector<PendingRows> returns;
    PendingRows arriving = dispatch(0);
    for (int64_t c = 0; c < C; ++c) {
      const std::vector<Tensor> arrived = arriving.wait();
      if (c + 1 < C) arriving = dispatch(c + 1);
      const Tensor& grad_rows = arrived[0];
      const Tensor& x_rows = arrived[1];
      const Tensor pre_rows = move_pre ? arrived[2] : saved_pre;
      std::vector<Tensor> input_parts;
      for (const RankPart& part : state->parts(kept_chunk(c))) {
        state->run(kBackwardPhase, part, x.device(), [&] {
          const WeightIndex weights = state->part_weights(part);
          auto part_x = rows_of(x_rows, part);
          auto pre = pre_rows.defined()
                         ? rows_of(pre_rows, part)
                         : grouped_pre_activations(part_x, part.offsets, w_gate_up, weights);
          auto input = grouped_swiglu_backward(rows_of(grad_rows, part), part_x, pre, part.offsets,
                                               w_gate_up, w_down, weights, &weight_grads,
                                               /*input_grads=*/!all_input_grads);
          if (!all_input_grads) input_parts.push_back(input);
        });
      }
      if (!all_input_grads) {
        returns.push_back(exchange.start_return(concat_parts(input_parts), kept_chunk(c)));
        continue;
      }
      // Every computed pair's exact, unweighted input gradient, at its forward instance (Note
      // [Gradients of dropped pairs]), from its saved pre-activations (in the forward's whole
      // destination order) or recomputed.
      const Tensor& all_rows = arrived[all_rows_message];
      const Tensor all_x = saved_pre.defined() ? Tensor() : arrived[all_rows_message + 1];
      const Tensor chunk_pre =
          !saved_pre.defined() || C == 1
              ? saved_pre
              : saved_pre.index_select(
                    0, forward.chunks[static_cast<std::size_t>(c)].destination_positions);
      std::vector<Tensor> all_inputs;
      for (const RankPart& part : state->parts(computed_chunk(c))) {
        state->run(kBackwardPhase, part, x.device(), [&] {
          const WeightIndex weights = state->part_weights(part);
          auto pre =
              chunk_pre.defined()
                  ? rows_of(chunk_pre, part)
                  : grouped_pre_activations(rows_of(all_x, part), part.offsets, w_gate_up, weights);
          all_inputs.push_back(grouped_swiglu_backward(rows_of(all_rows, part), Tensor(), pre,
                                                       part.offsets, w_gate_up, w_down, weights,
                                                       /*weight_grads=*/nullptr,
                                                       /*input_grads=*/true));
        });
      }
      returns.push_back(exchange.start_return(concat_parts(all_inputs), computed_chunk(c)));
    }

    // The input gradients home, added in the whole slice's send order: the same sums as
    // unchunked.
    auto grad_x = torch::zeros_like(x);
    if (!all_input_grads) {
      PairExchange::add_returned(grad_x, kept_tokens,
                                 returned_whole(returns, plan.chunks, kept_here), kept_here);
    } else {
      PairExchange::add_returned(
          grad_x, tokens, returned_whole(returns, forward.chunks, computed_here), computed_here);
    }
    // Held and fetched experts' gradients in tensors of their own: the held ones become the
    // parameters' gradients without keeping the fetched ones' memory alive.
    const WeightBank grad_gate_up = weight_grads.w_gate_up.finish();
    const WeightBank grad_down = weight_grads.w_down.finish();
    return {grad_x,
            grad_gates,
            grad_gate_up.first(),
            grad_down.first(),
            grad_gate_up.second(),
            grad_down.second(),
            Tensor(),
            Tensor()};
  }
};

}  // namespace

ExpertPairs compact_pairs_by_expert(const torch::Tensor& pair_tokens,
                                    const torch::Tensor& pair_experts, int64_t num_experts,
                                    torch::Tensor* gate_order) {
  auto order = stable_order(pair_experts, num_experts);
  ExpertPairs pairs;
  pairs.tokens = pair_tokens.index_select(0, order);
  pairs.experts = pair_experts.index_select(0, order);
  pairs.expert_offsets = offsets_from_counts(expert_counts(pair_experts, num_experts));
  if (gate_order) *gate_order = order;
  return pairs;
}

std::shared_ptr<const ForwardPass> single_rank_pass(const ExpertPairs& pairs, int64_t num_experts) {
  // Instance e is expert e's owner, in slot e of rank 0.
  auto table = std::make_shared<InstanceTable>();
  table->expert_offsets.push_back(0);
  for (int64_t e = 0; e < num_experts; ++e) {
    table->instances.push_back({e, 0, e, true});
    table->expert_offsets.push_back(e + 1);
    table->expert_order.push_back(e);
    table->instance_rank.push_back(0);
  }
  table->place_on(pairs.experts.device());

  auto pass = std::make_shared<ForwardPass>();
  const int64_t n = pairs.experts.numel();
  pass->computed = torch::arange(n, pairs.experts.options());
  pass->experts = pairs.experts;
  pass->expert_offsets = pairs.expert_offsets;
  pass->table = table;
  pass->local_pairs = pass->computed;
  // Pairs are sorted by expert already: destination order is pair order, and all stay here
  // (Note [Pair order] in docs/notes.md).
  PairLayout& layout = pass->layout;
  layout.ranks = 1;
  layout.order = pass->computed;
  layout.instance = pairs.experts;
  layout.instance_offsets = pairs.expert_offsets;
  layout.load = {n};
  layout.matrix = {n};
  layout.local = process_slice(layout.order, layout.instance, torch::zeros_like(pairs.experts),
                               layout.instance_offsets, layout.matrix, *table, ProcessView{});
  return pass;
}

torch::Tensor routed_experts(const torch::Tensor& x, const torch::Tensor& gates,
                             const torch::Tensor& tokens, const torch::Tensor& w_gate_up,
                             const torch::Tensor& w_down, std::shared_ptr<ExpertPipeline> pipeline,
                             std::shared_ptr<const ForwardPass> forward,
                             std::vector<int64_t> bank_index, FetchedExperts fetched,
                             std::function<void()> after_dispatch) {
  auto state = c10::make_intrusive<PairsContext>();
  state->after_dispatch = std::move(after_dispatch);
  state->pipeline = std::move(pipeline);
  state->forward = std::move(forward);
  state->bank_index = std::move(bank_index);
  state->fetch_arrival = std::move(fetched.arrival);
  return ExpertPairsFunction::apply(x, gates, w_gate_up, w_down,
                                    none_fetched(fetched.gate_up, w_gate_up),
                                    none_fetched(fetched.down, w_down), tokens, std::move(state));
}

}  // namespace lrmoe
