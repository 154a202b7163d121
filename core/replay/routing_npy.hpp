#pragma once
// Routing as inference servers return it: every token's expert ids in every MoE layer, an integer
// array [tokens, layers, top_k] saved by numpy.save (a .npy file: int8 to int64 or uint8 to
// uint64, little-endian, C order). `lrmoe replay --routing-npy FILE` reads it as a load source
// (Note [Replay] in docs/notes.md): consecutive runs of a replay step's tokens are its steps,
// their ids counted per layer and expert.

#include <string>

#include "core/replay/expert_loads.hpp"

namespace lrmoe {

// The file's routing as per-expert loads: step s (from 1) counts tokens [(s - 1) * T, s * T) of
// the array, T = tokens_per_step (>= 1); a last, shorter run is left out unless it is the only
// one. The experts are 0 .. the largest id + 1. Throws std::invalid_argument naming the file: not
// a .npy file, a dtype or layout other than the above, a shape other than three positive sizes,
// data shorter or longer than the shape, an id below 0 (naming its token, layer and place), or
// more than kMostLoadCells loads.
RecordedExpertLoads read_routing_npy(const std::string& path, int64_t tokens_per_step);

}  // namespace lrmoe
