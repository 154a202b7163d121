#pragma once
// The [cluster] section of an experiment: ranks, memory, cost model, rendezvous. Field meanings,
// defaults and ranges are documented once, in the schema table (core/config/experiment_schema.cpp;
// `lrmoe schema` prints it).

#include <cstdint>
#include <string>

namespace lrmoe {

// The c10d backend of multi-process runs: Gloo on CPU, NCCL in builds against a CUDA LibTorch;
// auto is NCCL when training runs on CUDA, else Gloo (core/device/compute_device.hpp).
enum class CollectiveBackend { Auto, Gloo, Nccl };

// Where the experts' weights, gradients and optimizer state live in a multi-process run.
// Replicated: every process holds every expert (the emulation of expert parallelism, until
// sharding is complete). Sharded: each process holds its home experts only, and the others it
// computes are fetched for the pass (docs/ARCHITECTURE.md, "Expert-sharded state").
enum class ExpertState { Replicated, Sharded };

// How the cost model's cluster runs an all-to-all (Note [Cost model]); the processes of a run
// execute flat all-to-all-v either way. Flat: every rank sends straight to every other, over the
// link between them. Hierarchical: rows for another node go first, within the node, to the rank
// whose local index is the destination's, which sends all its node has for that destination
// across in one message.
enum class AllToAllAlgorithm { Flat, Hierarchical };

struct ClusterConfig {
  int64_t ranks = 1;                      // expert-parallel ranks
  std::string memory_per_rank = "80GiB";  // a size, or "<f>x fixed" (core/config/memory_spec.hpp)
  int64_t slots_per_rank = 0;             // expert slots per MoE layer; 0: experts/ranks
  // cost model's hardware profile (experiments/hardware/)
  std::string profile = "h100-sxm-8gpu-ib400";
  std::string master_addr = "127.0.0.1";  // rendezvous host when the launcher names none
  int64_t master_port = 29500;            // rendezvous port when the launcher names none
  // seconds a process waits for a peer before failing
  double timeout = 30;
  CollectiveBackend backend = CollectiveBackend::Auto;
  ExpertState expert_state = ExpertState::Sharded;
  // sharded: a pass's replica weights travel while its pairs are dispatched (Note [Overlapped
  // expert fetch]); false: they arrive before the pairs leave
  bool overlap_expert_fetch = true;
  // sharded: a layer's replica gradients go home while the layers below it compute their
  // backward, waited for before the gradients are summed; false: within the layer's backward
  bool overlap_gradient_return = true;
  AllToAllAlgorithm modeled_all_to_all = AllToAllAlgorithm::Flat;
  // each pass's all-to-alls and expert compute in this many chunks of instances, overlapped
  // (Note [Chunked exchange]); 1: one after the other
  int64_t exchange_chunks = 1;
};

}  // namespace lrmoe
