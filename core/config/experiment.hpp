#pragma once
// The typed experiment: what an experiment TOML resolves to. Field meanings, defaults and ranges
// are documented in one place, the schema table in core/config/experiment_schema.cpp
// (`lrmoe schema` prints it).

#include <cstdint>
#include <map>
#include <string>

#include "lrmoe/parameters.hpp"

namespace lrmoe {

enum class RouterKind { Softmax, Sigmoid };

struct ModelConfig {
  std::string preset;          // name the dimensions below were taken from
  int64_t vocab_size = 0;      // 0: take the vocabulary of the data source
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  double rope_theta = 1e6;
  double partial_rotary = 1.0;  // fraction of each head's dimensions that RoPE rotates
  bool qk_norm = false;
  bool qkv_bias = false;
  double rms_eps = 1e-6;
  int64_t first_k_dense = 0;    // the first k layers use a dense SwiGLU FFN
  int64_t dense_ffn_size = 0;
  int64_t num_experts = 0;
  int64_t top_k = 0;
  int64_t expert_ffn_size = 0;
  int64_t shared_experts = 0;   // each of size expert_ffn_size
  RouterKind router = RouterKind::Softmax;
  bool norm_topk = true;        // renormalise the top-k gates to sum to one
  double routed_scaling_factor = 1.0;
  double aux_loss_coef = 0.0;   // load-balancing auxiliary loss
  double z_loss_coef = 0.0;     // router z-loss
  double bias_update_rate = 0.0;  // aux-loss-free selection-bias update (sigmoid router)
  bool tie_embeddings = false;
  double init_std = 0.02;
};

enum class DataKind { Synthetic, Text, Tokens };
enum class TokenDtype { Uint16, Uint32 };

struct DataConfig {
  DataKind kind = DataKind::Synthetic;
  std::string path;                 // text: file or folder; tokens: flat binary file
  TokenDtype token_dtype = TokenDtype::Uint16;
  int64_t vocab_size = 512;         // tokens: declared vocabulary; synthetic: generated vocabulary
  double val_fraction = 0.1;        // text/tokens: tail of the data held out for evaluation
  int64_t topics = 8;               // synthetic: number of topic-specific Markov sources
  int64_t topic_vocab = 64;         // synthetic: tokens each topic uses
  int64_t branching = 4;            // synthetic: successors of each token within a topic
};

struct TrainConfig {
  int64_t batch_size = 16;    // sequences per micro-batch
  int64_t micro_batches = 1;  // gradient accumulation
  int64_t seq_len = 64;
  int64_t max_steps = 1000;
  int64_t warmup_steps = 20;
  double lr = 3e-3;
  double min_lr = 3e-4;
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double grad_clip = 1.0;     // 0 disables clipping
  int64_t eval_every = 25;
  int64_t eval_batches = 4;
  double target_loss = 0.0;   // stop when the evaluation loss reaches it; 0: run to max_steps
  double near_target_margin = 0.05;  // evaluate every step once a loss is within this fraction of the target
  int64_t log_every = 10;
  int64_t threads = 0;        // intra-op threads; 0: one per core
};

// The c10d backend of multi-process runs: Gloo on CPU, NCCL in builds against a CUDA LibTorch.
enum class CollectiveBackend { Gloo, Nccl };

struct ClusterConfig {
  int64_t ranks = 1;                              // expert-parallel ranks
  std::string memory_per_rank = "80GiB";          // a size, or "<f>x fixed" (core/config/memory_spec.hpp)
  int64_t slots_per_rank = 0;                     // expert slots per MoE layer; 0: experts/ranks
  std::string profile = "h100-sxm-8gpu-ib400";    // cost model's hardware profile (experiments/hardware/)
  std::string master_addr = "127.0.0.1";          // rendezvous host when the launcher names none
  int64_t master_port = 29500;                    // rendezvous port when the launcher names none
  double timeout = 30;                            // seconds a process waits for a peer before failing
  CollectiveBackend backend = CollectiveBackend::Gloo;
};

// A policy plugin's parameter as an experiment sets it, with where it was set (for messages).
struct PolicySetting {
  ParameterValue value;
  std::string place;  // "exp.toml:12:3" or "--set policies.placement.capacity_factor"
};

struct PolicyChoice {
  std::string name;  // plugin name; resolved from the bundle when the experiment names none
  std::map<std::string, PolicySetting> settings;
};

// What a pair whose backward work is not kept still gets: nothing through its expert (neither
// weight nor input gradient), or its exact input gradient (only its weight-gradient
// contribution is dropped).
enum class DroppedPairKeeps { Nothing, InputGrad };

// Named sets of the four policies (core/config/policy_sections.cpp lists what each picks).
enum class PolicyBundle { Fixed, Symi, Lrmoe };

struct PoliciesConfig {
  PolicyBundle bundle = PolicyBundle::Fixed;
  std::string plugin_path;       // extra plugin folders, ':'-separated
  bool recompute = false;        // recompute kept pairs' expert activations in backward
  DroppedPairKeeps dropped_pair_keeps = DroppedPairKeeps::Nothing;
  PolicyChoice placement;
  PolicyChoice metric;
  PolicyChoice selection;
  PolicyChoice routing;
};

struct StoreConfig {
  std::string path = "lrmoe.db";
};

struct ExperimentInfo {
  std::string name = "experiment";
  uint64_t seed = 0;
  std::string notes;
};

struct Experiment {
  ExperimentInfo experiment;
  ModelConfig model;
  DataConfig data;
  TrainConfig train;
  ClusterConfig cluster;
  PoliciesConfig policies;
  StoreConfig store;
};

}  // namespace lrmoe
