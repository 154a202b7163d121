#pragma once
// Per-expert loads as CSV, the form in which lrmoe exports a run's routing (`lrmoe export RUN
// --format expert-loads`) and reads other tools' (`lrmoe replay --loads-csv FILE`): a header
// naming the columns step, layer, expert and pairs, in any order, then one row per step, MoE
// layer and expert, each cell a whole number:
//   step    the optimizer step (or any increasing index of a batch), >= 0
//   layer   the MoE layer, >= 0: the layers are taken in increasing order of this number, so
//           block indices and indices among the MoE layers both do
//   expert  the expert's index, 0 .. experts - 1 (experts: the largest index in the file + 1;
//           an expert without a row routed no pair)
//   pairs   the token-expert pairs routed to it, >= 0
// Every step lists the same layers. Note [Replay] in docs/notes.md.

#include <ostream>
#include <string>

#include "core/replay/expert_loads.hpp"

namespace lrmoe {

// The file's loads, `origin` naming it. Throws std::invalid_argument naming the file and line:
// a missing or repeated column, a cell that is not a whole number in range (pairs at most
// kMostPairs), a row repeated, a step whose layers differ from the first step's, more than
// kMostLoadCells loads.
RecordedExpertLoads read_expert_load_csv(const std::string& path);

// `loads` as the file above, layer the index among the MoE layers, every expert of a layer a row.
void write_expert_load_csv(const RecordedExpertLoads& loads, std::ostream& out);

// Steps x layers x experts the reader holds at most (a file naming expert 10^12 would ask for
// terabytes): 2^28 loads, 2 GiB.
inline constexpr int64_t kMostLoadCells = int64_t{1} << 28;
// Pairs one expert's load may hold: 2^40, far past any pass, so that the sums of a layer's loads
// stay within int64.
inline constexpr int64_t kMostPairs = int64_t{1} << 40;

}  // namespace lrmoe
