#pragma once
// Where a replay's routing comes from (Note [Replay] in docs/notes.md): per step and MoE layer,
// each expert's share of the routed pairs, for the target model's experts. Two sources:
//   - SkewedLoads: a Zipf law with a stated exponent over a fixed, seeded order of the experts
//     per layer (the same every step: popular experts stay popular, as a placement that learns
//     from history assumes);
//   - RecordedLoads: the per-expert pairs a run recorded (table expert_load), rescaled to the
//     target's experts.
// expert_counts_from_shares turns shares into whole pairs for a pass of `tokens` tokens.

#include <cstdint>
#include <string>
#include <vector>

namespace lrmoe {

class ExpertLoads {
 public:
  virtual ~ExpertLoads() = default;
  // [experts] non-negative, summing to 1: expert e's share of the routed pairs of MoE layer
  // `moe_layer` (index among the MoE layers) at replay step `step` (from 1).
  virtual std::vector<double> shares(int64_t step, int64_t moe_layer) const = 0;
  // One line for the output and the database: what drives the replay, with its parameters.
  virtual std::string describe() const = 0;
};

// share(e) proportional to 1 / (1 + position(e))^exponent, where position is a seeded
// permutation of the experts, one per MoE layer. Exponent 0: balanced routing.
class SkewedLoads : public ExpertLoads {
 public:
  // Throws std::invalid_argument for a negative or non-finite exponent.
  SkewedLoads(double exponent, int64_t experts, uint64_t seed);
  std::vector<double> shares(int64_t step, int64_t moe_layer) const override;
  std::string describe() const override;

 private:
  double exponent_;
  int64_t experts_;
  uint64_t seed_;
};

// What a run recorded, as the store reads it: the pairs of every expert of every MoE layer, per
// recorded step.
struct RecordedExpertLoads {
  std::string origin;          // "run 12 (qwen3-mini, 32 experts) in lrmoe.db"
  std::vector<int64_t> steps;  // the recorded steps, in order
  // [step index][MoE layer][source expert]: pairs routed
  std::vector<std::vector<std::vector<int64_t>>> pairs;
};

// Replay step s reads recorded step index (s - 1) mod steps; target MoE layer l reads source
// layer l * source_layers / target_layers; the source's per-expert shares are rescaled to the
// target's experts by rescale_shares.
class RecordedLoads : public ExpertLoads {
 public:
  // Throws std::invalid_argument when `recorded` has no steps, an empty layer, or a layer
  // without pairs.
  RecordedLoads(RecordedExpertLoads recorded, int64_t experts, int64_t moe_layers);
  std::vector<double> shares(int64_t step, int64_t moe_layer) const override;
  std::string describe() const override;

 private:
  RecordedExpertLoads recorded_;
  int64_t experts_;
  int64_t moe_layers_;
};

// The shares of `target_experts` experts from `source_pairs` (per source expert): the source
// experts are laid end to end on [0, 1), each as wide as 1 / S, with its share spread evenly
// over its width; target expert j takes what lies in [j / T, (j + 1) / T). More target experts
// than source split each source expert into equal parts; fewer merge neighbours. The imbalance
// max / mean of the shares is kept when T is a multiple of S.
std::vector<double> rescale_shares(const std::vector<int64_t>& source_pairs,
                                   int64_t target_experts);

// Whole pairs per expert for a pass of `tokens` tokens that route `top_k` experts each: the
// counts sum to tokens * top_k, follow `shares` as closely as whole pairs allow (largest
// remainder), and no expert gets more than `tokens` pairs (a token picks an expert at most once;
// the excess goes to the others in proportion to their shares).
std::vector<int64_t> expert_counts_from_shares(const std::vector<double>& shares, int64_t tokens,
                                               int64_t top_k);

}  // namespace lrmoe
