#pragma once
// The device and precision training runs with: train.device, train.precision and
// cluster.backend resolved against what this build and this machine have.

#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "core/config/cluster_config.hpp"
#include "core/config/train_config.hpp"

namespace lrmoe {

// train.device resolved for the process with local rank `local_rank`: auto is cuda:local_rank
// when this build has CUDA and a GPU is visible, else the CPU. Throws std::invalid_argument
// naming train.device when cuda is asked for and cannot be had.
torch::Device resolve_device(DeviceChoice choice, int64_t local_rank);

// cluster.backend resolved: auto is nccl on a CUDA device in builds with NCCL, else gloo.
CollectiveBackend resolve_backend(CollectiveBackend backend, const torch::Device& device);
const char* backend_name(CollectiveBackend backend);  // "auto", "gloo", "nccl"

// The dtype of the experts' and dense layers' GEMMs and activations.
torch::ScalarType compute_dtype(Precision precision);
const char* precision_name(Precision precision);  // "fp32", "bf16"

// "cpu", or "cuda:0 (NVIDIA H200, sm90, 139.8 GiB)".
std::string device_description(const torch::Device& device);

}  // namespace lrmoe
