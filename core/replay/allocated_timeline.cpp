#include "core/replay/allocated_timeline.hpp"

#include <cmath>
#include <deque>

#include "core/device/cuda_runtime.hpp"

namespace lrmoe {
namespace {

// The walk's buffers, allocated and freed by name.
class Buffers {
 public:
  explicit Buffers(const torch::Device& device) : device_(device) {}

  torch::Tensor allocate(double bytes) {
    ++count_;
    const auto size = static_cast<int64_t>(std::llround(bytes));
    return torch::empty({size}, torch::TensorOptions().dtype(torch::kUInt8).device(device_));
  }
  int64_t count() const { return count_; }

 private:
  torch::Device device_;
  int64_t count_ = 0;
};

}  // namespace

std::optional<AllocatedPeak> allocate_timeline(const MemoryCosts& c,
                                               const std::vector<LayerHolding>& layers,
                                               const StaticMemory& fixed,
                                               const torch::Device& device) {
  reset_peak_allocated_bytes(device);
  const std::optional<int64_t> before = peak_allocated_bytes(device);
  Buffers buffers(device);
  const auto e = static_cast<double>(c.expert_bytes);
  {
    // All step: the dense state, the owned experts' Adam state, parameters and gradients.
    std::vector<torch::Tensor> resident{buffers.allocate(static_cast<double>(fixed.dense)),
                                        buffers.allocate(static_cast<double>(fixed.optimizer))};
    for (const LayerHolding& h : layers) {
      resident.push_back(buffers.allocate(static_cast<double>(h.owned) * e));
      resident.push_back(buffers.allocate(static_cast<double>(h.owned) * e));
    }
    // Per layer, from its forward to its backward: replica parameters and saved activations.
    std::deque<std::vector<torch::Tensor>> carried;
    for (const LayerHolding& h : layers) {
      carried.push_back(
          {buffers.allocate(static_cast<double>(h.replicas) * e),
           buffers.allocate(h.forward_pairs * static_cast<double>(c.saved_pair_bytes))});
      // The forward token buffers live during the layer's forward only.
      buffers.allocate(forward_transient_bytes(c, h));
    }
    for (auto h = layers.rbegin(); h != layers.rend(); ++h) {
      // The backward token buffers and replica gradients, during the layer's backward; then the
      // layer's carried buffers end with it.
      const torch::Tensor tokens =
          buffers.allocate(h->backward_pairs * static_cast<double>(c.backward_pair_bytes));
      const torch::Tensor replica_gradients =
          buffers.allocate(static_cast<double>(h->replicas) * e);
      carried.pop_back();
    }
  }
  const std::optional<int64_t> peak = peak_allocated_bytes(device);
  if (!peak || !before) return std::nullopt;
  return AllocatedPeak{pass_peak(c, layers, fixed).at_peak.total(), *peak - *before,
                       buffers.count()};
}

}  // namespace lrmoe
