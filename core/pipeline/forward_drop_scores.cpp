#include "core/pipeline/forward_drop_scores.hpp"

#include "lrmoe/counter_random.hpp"

namespace lrmoe {
namespace {

// Mixed into the pass's seed, so that the forward's draws are not the random metric's.
constexpr uint64_t kForwardDropStream = 0x66776444726f70ULL;  // "fwdDrop"

}  // namespace

torch::Tensor forward_drop_scores(ForwardDrop rule, const torch::Tensor& gates,
                                  const torch::Tensor& pair_ids, uint64_t seed) {
  if (rule == ForwardDrop::LowestGate) return gates.detach();
  const torch::Tensor ids = pair_ids.to(torch::kCPU).contiguous();
  torch::Tensor scores = torch::empty({ids.numel()}, torch::kFloat32);
  const int64_t* id = ids.data_ptr<int64_t>();
  float* score = scores.data_ptr<float>();
  for (int64_t i = 0; i < ids.numel(); ++i)
    score[i] = uniform_at(seed ^ kForwardDropStream, static_cast<uint64_t>(id[i]));
  return scores.to(gates.device());
}

}  // namespace lrmoe
