#pragma once
// A pass's exchanges and expert compute in chunks (cluster.exchange_chunks; Note [Chunked
// exchange] in docs/notes.md): each rank's instances go in `chunks` contiguous groups of about
// equal rows, and chunk c of every rank travels and computes as one unit, so that chunk c + 1's
// dispatch and chunk c - 1's return travel while chunk c is multiplied. Every instance is in
// one chunk, so its GEMMs are the same as unchunked.

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "core/pipeline/instance_table.hpp"
#include "core/pipeline/pair_layout.hpp"

namespace lrmoe {

// One chunk of a ProcessSlice: a slice of its own for the chunk's rows (home rows as the whole
// slice's, so [home rows] tensors index both; its sent rows, counts and arrival; its
// instance_offsets over the chunk's destination rows, from 0), and where its rows sit in the
// whole slice's orders, so that chunks reassemble into what the whole slice gives.
struct ChunkSlice {
  ProcessSlice slice;
  torch::Tensor sent_positions;         // [chunk's sent rows] int64: in the whole send order
  torch::Tensor destination_positions;  // [chunk's destination rows] int64: among the whole's
};

// [instances]: the chunk of each instance. Each rank's instances (contiguous in the table), in
// order, form `chunks` contiguous groups: an instance goes to the chunk its middle row falls in
// when the rank's rows (`instance_offsets` [instances + 1]) are cut in `chunks` equal parts; a
// rank without rows cuts its instances by count.
std::vector<int64_t> instance_chunks(const InstanceTable& table,
                                     const std::vector<int64_t>& instance_offsets, int64_t chunks);

// [ranks * ranks]: the pairs of chunk `chunk` from home rank s to rank d, at [s * ranks + d], from
// a layout's home_instance [ranks * instances].
std::vector<int64_t> chunk_matrix(const std::vector<int64_t>& home_instance,
                                  const InstanceTable& table,
                                  const std::vector<int64_t>& instance_chunk, int64_t chunk,
                                  int64_t ranks);

// `slice` split by the chunks of its rows' destination instances, one ChunkSlice per chunk in
// chunk order. `pair_instance`: [pairs] int64, the instance of each pair of the layout the
// slice was made from (PairLayout::instance), on the slice's device.
std::vector<ChunkSlice> split_slice(const ProcessSlice& slice, const torch::Tensor& pair_instance,
                                    const std::vector<int64_t>& instance_chunk, int64_t chunks);

}  // namespace lrmoe
