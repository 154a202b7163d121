#include "core/replay/replay_pairs.hpp"

#include <cmath>
#include <utility>

#include "core/data/seeded_rng.hpp"

namespace lrmoe {
namespace {

constexpr uint64_t kSignalStream = 0x7369676e616c73ULL;  // "signals"
constexpr double kPi = 3.14159265358979323846;

torch::Tensor int64_tensor(const std::vector<int64_t>& values) {
  return torch::tensor(values, torch::kInt64);
}

// exp(0.5 * z), z standard normal (Box-Muller).
float log_normal(SplitMix64& random) {
  const double u = 1.0 - random.uniform();  // (0, 1]
  const double v = random.uniform();
  const double z = std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * kPi * v);
  return static_cast<float>(std::exp(0.5 * z));
}

}  // namespace

ReplayPairs replay_pairs(const std::vector<int64_t>& counts, int64_t tokens, int64_t top_k,
                         int64_t ranks, uint64_t seed) {
  // Every slot's expert, then dealt to the slots in a random order (Fisher-Yates).
  std::vector<int64_t> slot_expert;
  slot_expert.reserve(static_cast<std::size_t>(tokens * top_k));
  for (std::size_t e = 0; e < counts.size(); ++e)
    slot_expert.insert(slot_expert.end(), static_cast<std::size_t>(counts[e]),
                       static_cast<int64_t>(e));
  SplitMix64 random(mix64(seed));
  for (auto i = static_cast<int64_t>(slot_expert.size()) - 1; i > 0; --i)
    std::swap(slot_expert[static_cast<std::size_t>(i)],
              slot_expert[static_cast<std::size_t>(random.below(i + 1))]);

  // Pair order: by expert, then by token (slots are token-major, so a scan keeps token order).
  std::vector<int64_t> offsets(counts.size() + 1, 0);
  for (std::size_t e = 0; e < counts.size(); ++e) offsets[e + 1] = offsets[e] + counts[e];
  std::vector<int64_t> fill(offsets.begin(), offsets.end() - 1);
  std::vector<int64_t> experts(slot_expert.size()), home(slot_expert.size());
  for (std::size_t slot = 0; slot < slot_expert.size(); ++slot) {
    const int64_t e = slot_expert[slot];
    const auto at = static_cast<std::size_t>(fill[static_cast<std::size_t>(e)]++);
    const auto token = static_cast<int64_t>(slot) / top_k;
    experts[at] = e;
    home[at] = token * ranks / tokens;
  }
  std::vector<float> gates(slot_expert.size());
  for (float& g : gates)
    g = static_cast<float>((0.5 + random.uniform()) / static_cast<double>(top_k));
  return {int64_tensor(experts), torch::tensor(gates, torch::kFloat32), int64_tensor(home)};
}

PairBatch replay_signals(const torch::Tensor& gates, uint64_t seed) {
  const int64_t n = gates.numel();
  SplitMix64 random(mix64(seed ^ kSignalStream));
  torch::Tensor norms = torch::empty({3, n}, torch::kFloat32);
  float* values = norms.data_ptr<float>();
  for (int64_t i = 0; i < 3 * n; ++i) values[i] = log_normal(random);
  PairBatch batch;
  batch.gates = gates;
  batch.upstream_norm = norms[0];
  batch.input_norm = norms[1];
  batch.hidden_norm = norms[2];
  return batch;
}

}  // namespace lrmoe
