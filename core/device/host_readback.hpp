#pragma once
// Device values read on the host without making the host wait for the device: the copy is
// queued now, into pinned host memory, and read later, when the device has passed it (Note
// [Device timing] in docs/notes.md: the trainer reads a step's figures one step late).

#include <torch/torch.h>

#include <memory>

#include "core/device/cuda_runtime.hpp"

namespace lrmoe {

class HostReadback {
 public:
  HostReadback() = default;
  // Queues the copy of `values` (any device) to the host. On the CPU it is `values` itself.
  explicit HostReadback(const torch::Tensor& values);
  // The values on the host. Waits for the copy if the device has not reached its end yet, and
  // then sets `waited` when given (left as it is otherwise).
  torch::Tensor read(bool* waited = nullptr) const;

 private:
  torch::Tensor host_;
  std::shared_ptr<DeviceEvent> copied_;  // none on the CPU
};

}  // namespace lrmoe
