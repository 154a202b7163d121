#pragma once
// The decoder-only MoE transformer: token embedding; L blocks of
// RMSNorm -> causal GQA attention -> residual -> RMSNorm -> FFN -> residual (the FFN is a dense
// SwiGLU for the first first_k_dense layers and an MoE layer after, or a dense SwiGLU of the
// MoE's active width when moe_as_dense); final RMSNorm; LM head (untied unless tie_embeddings).

#include <torch/torch.h>

#include <optional>
#include <vector>

#include "core/config/model_config.hpp"
#include "core/model/attention.hpp"
#include "core/model/moe_layer.hpp"
#include "core/model/rms_norm.hpp"
#include "core/model/swiglu.hpp"

namespace lrmoe {

struct ModelOutput {
  torch::Tensor logits;    // [batch, seq, vocab]
  torch::Tensor aux_loss;  // scalar: sum of the MoE layers' auxiliary losses
};

class BlockImpl : public torch::nn::Module {
 public:
  // A dense SwiGLU FFN of `dense_width` when it is positive, else an MoE layer. `shard`: the
  // experts an MoE block holds when expert state is sharded; none: every expert.
  BlockImpl(const ModelConfig& config, int64_t dense_width, std::optional<ExpertShard> shard);
  MoEOutput forward(const torch::Tensor& x);
  MoELayer moe() const { return moe_; }  // null for a dense block

 private:
  RMSNorm attention_norm_{nullptr}, ffn_norm_{nullptr};
  Attention attention_{nullptr};
  SwiGLU dense_ffn_{nullptr};
  MoELayer moe_{nullptr};
};
TORCH_MODULE(Block);

class TransformerImpl : public torch::nn::Module {
 public:
  // config.vocab_size must be resolved (non-zero) by the caller. `shard`: the experts every MoE
  // layer holds when expert state is sharded (MoELayerImpl); none: every expert, replicated.
  explicit TransformerImpl(const ModelConfig& config,
                           std::optional<ExpertShard> shard = std::nullopt);
  // tokens: [batch, seq] int64
  ModelOutput forward(const torch::Tensor& tokens);
  // The dtype of the activations and GEMMs (fp32 until set; Note [Mixed precision]).
  void set_compute_dtype(torch::ScalarType dtype) { compute_dtype_ = dtype; }

  // The MoE layers in depth order.
  const std::vector<MoELayer>& moe_layers() const { return moe_layers_; }
  // Index of each MoE layer among all blocks (for records that name a layer).
  const std::vector<int64_t>& moe_layer_indices() const { return moe_layer_indices_; }

 private:
  // Dense matrices from the global generator; each MoE layer's experts from generators keyed by
  // `expert_seed`, the layer and the expert (MoELayerImpl::initialise_experts).
  void initialise(double std, uint64_t expert_seed);

  torch::nn::Embedding embedding_{nullptr};
  std::vector<Block> blocks_;
  std::vector<MoELayer> moe_layers_;
  std::vector<int64_t> moe_layer_indices_;
  RMSNorm final_norm_{nullptr};
  torch::nn::Linear lm_head_{nullptr};  // null when tied to the embedding
  torch::ScalarType compute_dtype_ = torch::kFloat32;
};
TORCH_MODULE(Transformer);

}  // namespace lrmoe
