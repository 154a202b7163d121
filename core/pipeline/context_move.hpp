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

// A piece of the kept pairs that lies within one forward run and one backward run (Note [Layout
// runs]): consecutive kept pairs whose backward rows count up by one, and whose forward rows are
// their indices among the forward's pairs shifted alike.
struct ContextSegment {
  int64_t first_kept = 0;  // its first kept pair, among this process's kept pairs (kept order)
  int64_t pairs = 0;
  int64_t forward_process = 0;  // the process of its forward instance
  // A kept pair's forward destination row is its index among the forward's pairs plus this.
  int64_t forward_shift = 0;
  int64_t backward_row = 0;  // its first pair's backward destination row, global
};

// This process's kept pairs as the context move needs them, read off the runs of both layouts
// without a pass over a pair's own fields.
struct ContextSources {
  torch::Tensor kept;  // [k] int64 on the host: the kept pairs' indices among the forward's pairs
  std::vector<ContextSegment> segments;  // in kept order, covering [0, k)
  // This process's kept pairs from home rank h whose forward instance is on rank s, at
  // [h * ranks + s]; and from forward rank s to backward rank (or, by instance, to backward
  // instance) d, at [s * columns + d]. Summed over processes, the move's counts, which the
  // caller takes out; context_move reads neither.
  std::vector<int64_t> home_forward;
  std::vector<int64_t> forward_backward;
};

// `forward`: the forward layout (count_pair_layout over the computed pairs); `kept`: [k] int64,
// strictly increasing (as the threshold search gives them, not checked), the kept pairs among
// them, any device; `backward`: the backward layout
// (count_pair_layout over the kept pairs). `by_instance`: forward_backward by backward instance.
ContextSources context_sources(const PairLayout& forward, const torch::Tensor& kept,
                               const PairLayout& backward, const InstanceTable& table,
                               const ProcessView& process, bool by_instance);

// On every process, for its kept pairs (`sources`, from context_sources): `backward`, the
// backward layout; `by_forward_rank`: [ranks * ranks] kept pairs from forward rank s to backward
// rank d, and `home_forward`: kept pairs homed on rank h whose forward instance is on rank s,
// both summed over processes; `forward_first_row`: the first forward destination row here;
// `device`: where the move's tensors go. Collective: one all-to-all-v of indices, 16 + 8 bytes
// per kept pair moved. `with_instances`: sets ContextMove::instance.
ContextMove context_move(Collectives& collectives, const ContextSources& sources,
                         const PairLayout& backward, const std::vector<int64_t>& by_forward_rank,
                         const std::vector<int64_t>& home_forward, int64_t forward_first_row,
                         const InstanceTable& table, const ProcessView& process,
                         const torch::Device& device, bool with_instances);

// The move when every kept pair's backward instance is its forward one (Note [Context in
// place]): the backward layout is the forward's `layout`, and each process's rows stay where they
// are, in the order they are, which every process knows without a message. Home rows are the
// destination rows here, each taken from its own row. `by_forward_rank`: [ranks * ranks], the
// layout's loads on the diagonal.
ContextMove context_in_place(const PairLayout& layout, const std::vector<int64_t>& by_forward_rank,
                             const InstanceTable& table, const ProcessView& process,
                             bool with_instances);

}  // namespace lrmoe
