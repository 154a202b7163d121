#pragma once
// `lrmoe hf-compute EXPERIMENT --tokens FILE --out DIR [--set k=v]`: one forward and backward
// of given tokens through the experiment's model and pipeline, as a training step makes them but
// without the optimizer step, written where a reference implementation's can be compared with
// them (tests/hf/compare_with_transformers.py). Hidden from --help: a tool of the numerics tier.
//
// FILE is a safetensors file with "tokens" [batch, seq + 1] int64; DIR receives
// outputs.safetensors ("logits" [batch, seq, vocab] and "loss" [1], float32, the cross-entropy
// of tokens[:, 1:] given tokens[:, :-1]) and gradients.safetensors (each parameter's gradient
// under its Hugging Face name, float32).

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace lrmoe {

struct HfComputeOptions {
  std::string experiment;
  std::vector<std::string> overrides;
  std::string tokens;
  std::string out;
};

// Registers the command, hidden from --help; its options fill `options`.
CLI::App* add_hf_compute_command(CLI::App& app, HfComputeOptions& options);

int hf_compute_command(const HfComputeOptions& options);

}  // namespace lrmoe
