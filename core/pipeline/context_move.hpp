#pragma once
// The scalable plan's move of the kept pairs' saved pre-activations from their forward instances
// to their backward ones (without recomputation; Note [Gradients of dropped pairs], Note
// [Scalable planning] in docs/notes.md). The exact plan knows every pair's rows everywhere; here
// only a pair's home process knows where its pre-activations are (the forward destination row)
// and where they must go (the backward one), so it tells the forward process, and the backward
// process learns from which forward process each of its rows comes.

#include <torch/torch.h>

#include <vector>

#include "core/distributed/collectives.hpp"
#include "core/pipeline/pair_layout.hpp"

namespace lrmoe {

struct ContextMove {
  ProcessSlice slice;  // the move, as PairExchange::dispatch takes it
  torch::Tensor rows;  // [sent rows] int64: the forward destination rows here each sent row reads
  // [home rows of slice] int64: the backward instance of each, what chunks split the move by
  // (Note [Chunked exchange]); only when asked for.
  torch::Tensor instance;
};

// This process's kept pairs as the context move needs them, read off the runs of both layouts
// (Note [Layout runs]) without a pass over a pair's own fields.
struct ContextSources {
  torch::Tensor forward_row;      // [k] int64 on the device: each one's forward destination row
  torch::Tensor forward_process;  // [k] int64 on the device: the process of its forward instance
  // This process's kept pairs from home rank h whose forward instance is on rank s, at
  // [h * ranks + s]; and from forward rank s to backward rank (or, by instance, to backward
  // instance) d, at [s * columns + d]. Summed over processes, the move's counts.
  std::vector<int64_t> home_forward;
  std::vector<int64_t> forward_backward;
};

// `forward`: the forward layout (count_pair_layout over the computed pairs); `kept`: [k] int64,
// increasing, the kept pairs among them, any device; `backward`: the backward layout
// (count_pair_layout over the kept pairs). `by_instance`: forward_backward by backward instance.
ContextSources context_sources(const PairLayout& forward, const torch::Tensor& kept,
                               const PairLayout& backward, const InstanceTable& table,
                               const ProcessView& process, bool by_instance);

// On every process, for its kept pairs (in kept order, all tensors [k] int64 on the device):
// `forward_row` and `backward_row`, each pair's rows in the global destination orders of the
// forward and backward layouts; `forward_process`, the process of its forward instance.
// `backward`: the backward layout (count_pair_layout over the kept pairs); `by_forward_rank`:
// [ranks * ranks] kept pairs from forward rank s to backward rank d, and `home_forward`: kept
// pairs homed on rank h whose forward instance is on rank s, both summed over processes;
// `forward_first_row`: the first forward destination row here. Collective: one all-to-all-v of
// indices, 16 + 8 bytes per kept pair moved. `with_instances`: sets ContextMove::instance.
ContextMove context_move(Collectives& collectives, const torch::Tensor& forward_row,
                         const torch::Tensor& backward_row, const torch::Tensor& forward_process,
                         const PairLayout& backward, const std::vector<int64_t>& by_forward_rank,
                         const std::vector<int64_t>& home_forward, int64_t forward_first_row,
                         const InstanceTable& table, const ProcessView& process,
                         bool with_instances);

// The move when every kept pair's backward instance is its forward one (Note [Context in
// place]): the backward layout is the forward's `layout`, and each process's rows stay where they
// are, in the order they are, which every process knows without a message. Home rows are the
// destination rows here, each taken from its own row. `by_forward_rank`: [ranks * ranks], the
// layout's loads on the diagonal.
ContextMove context_in_place(const PairLayout& layout, const std::vector<int64_t>& by_forward_rank,
                             const InstanceTable& table, const ProcessView& process,
                             bool with_instances);

}  // namespace lrmoe
