#include "core/config/experiment_schema.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include <spdlog/spdlog.h>
#include "core/config/field_value.hpp"

#include "core/config/hf_model_config.hpp"
#include "core/config/model_presets.hpp"
#include "core/config/policy_sections.hpp"

namespace lrmoe {
namespace {

// Where a section's defaults come from: the member initialisers in experiment.hpp (read from a
// default-constructed Experiment), or, in [model], the preset.
enum class Defaults { FromMemberInitialisers, FromPreset };

// Appends the descriptors of one section, each binding a key to a member of the section's struct.
template <typename Section>
class SectionRows {
 public:
  SectionRows(std::vector<FieldDescriptor>& rows, std::string section, Section Experiment::*member,
              Defaults defaults)
      : rows_(rows), section_(std::move(section)), member_(member), defaults_(defaults) {}

  template <typename Integer>
  SectionRows& integer(std::string key, Integer Section::*field, Range range, std::string meaning) {
    return add(
        std::move(key), FieldKind::Integer, field, range, {}, std::move(meaning),
        [](Integer v) { return FieldValue{static_cast<int64_t>(v)}; },
        [](const FieldValue& v) { return static_cast<Integer>(std::get<int64_t>(v)); });
  }

  SectionRows& real(std::string key, double Section::*field, Range range, std::string meaning) {
    return add(
        std::move(key), FieldKind::Float, field, range, {}, std::move(meaning),
        [](double v) { return FieldValue{v}; },
        [](const FieldValue& v) { return std::get<double>(v); });
  }

  SectionRows& boolean(std::string key, bool Section::*field, std::string meaning) {
    return add(
        std::move(key), FieldKind::Bool, field, {}, {}, std::move(meaning),
        [](bool v) { return FieldValue{v}; },
        [](const FieldValue& v) { return std::get<bool>(v); });
  }

  SectionRows& text(std::string key, std::string Section::*field, std::string meaning) {
    return add(
        std::move(key), FieldKind::String, field, {}, {}, std::move(meaning),
        [](const std::string& v) { return FieldValue{v}; },
        [](const FieldValue& v) { return std::get<std::string>(v); });
  }

  // `names` lists the enum's values in declaration order: the enum value is the name's index.
  template <typename Enum>
  SectionRows& choice(std::string key, Enum Section::*field, std::vector<std::string> names,
                      std::string meaning) {
    return add(
        std::move(key), FieldKind::Choice, field, {}, names, std::move(meaning),
        [names](Enum v) { return FieldValue{names.at(static_cast<std::size_t>(v))}; },
        [names](const FieldValue& v) {
          const auto it = std::find(names.begin(), names.end(), std::get<std::string>(v));
          return static_cast<Enum>(it - names.begin());
        });
  }

  SectionRows& byte_size(std::string key, uint64_t Section::*field, Range range,
                         std::string meaning) {
    return add(
        std::move(key), FieldKind::ByteSize, field, range, {}, std::move(meaning),
        [](uint64_t v) { return FieldValue{v}; },
        [](const FieldValue& v) { return std::get<uint64_t>(v); });
  }

 private:
  template <typename Member, typename ToValue, typename FromValue>
  SectionRows& add(std::string key, FieldKind kind, Member Section::*field, Range range,
                   std::vector<std::string> choices, std::string meaning, ToValue to_value,
                   FromValue from_value) {
    Section Experiment::*member = member_;
    FieldDescriptor row{
        section_,
        std::move(key),
        kind,
        "",
        range,
        std::move(choices),
        std::move(meaning),
        [member, field, to_value](const Experiment& e) { return to_value(e.*member.*field); },
        [member, field, from_value](Experiment& e, const FieldValue& v) {
          e.*member.*field = from_value(v);
        }};
    row.default_text = defaults_ == Defaults::FromPreset ? "from preset"
                                                         : field_value_toml(row.read(Experiment{}));
    rows_.push_back(std::move(row));
    return *this;
  }

  std::vector<FieldDescriptor>& rows_;
  std::string section_;
  Section Experiment::*member_;
  Defaults defaults_;
};

FieldDescriptor preset_row() {
  return FieldDescriptor{"model",
                         "preset",
                         FieldKind::Choice,
                         "this or hf_config",
                         {},
                         preset_names(),
                         "named model whose dimensions every other [model] key starts from",
                         [](const Experiment& e) { return FieldValue{e.model.preset}; },
                         [](Experiment& e, const FieldValue& v) {
                           // Only names from preset_names() get past read_field_value, so the
                           // preset exists.
                           e.model = *find_preset(std::get<std::string>(v));
                         }};
}

FieldDescriptor hf_config_row() {
  return FieldDescriptor{
      "model",
      "hf_config",
      FieldKind::String,
      "this or preset",
      {},
      {},
      "a Hugging Face config.json, or a folder holding one, of a Qwen3-MoE or GLM-4.5 model "
      "(relative to the working directory): every other [model] key starts from it instead of a "
      "preset; a field that changes the computation and that lrmoe does not implement is an error",
      [](const Experiment& e) { return FieldValue{e.model.hf_config}; },
      [](Experiment& e, const FieldValue& v) {
        const HfModel hf = read_hf_config(std::get<std::string>(v));
        for (const std::string& note : hf.notes) spdlog::warn("{}", note);
        e.model = hf.model;
      }};
}

// [policies.<kind>] name: the plugin of that kind; empty until the bundle fills it in.
FieldDescriptor policy_name_row(const PolicySection& policy) {
  const auto choice = policy.choice;
  return FieldDescriptor{
      policy.section,
      "name",
      FieldKind::String,
      "from bundle",
      {},
      {},
      "the " + policy.kind + " plugin; its parameters are the other keys of this table",
      [choice](const Experiment& e) { return FieldValue{(e.policies.*choice).name}; },
      [choice](Experiment& e, const FieldValue& v) {
        (e.policies.*choice).name = std::get<std::string>(v);
      }};
}

// Upper bounds of the counts that multiply work or memory: far above any model or run this
// harness is for (Qwen3-30B-A3B: 48 layers, 2048 wide, 128 experts; the paper: 64 ranks), so
// that a slip (2^30 ranks, 2^63 micro-batches) is refused before any work starts, not run for
// hours or until memory runs out.
constexpr double kMostLayers = 1024, kMostHeads = 1024, kMostWidth = 1 << 20;
constexpr double kMostExperts = 1 << 16, kMostRanks = 1 << 16;
constexpr double kMostBatch = 1 << 20, kMostBatches = 1 << 16, kMostSequence = 1 << 20;
constexpr double kMostSteps = 1e9;
// Rates the optimizer computes with in float32: at most a round number under the largest float32
// (3.4e38), so that a slip (1e300) is refused with its key, not by LibTorch's conversion with
// none.
constexpr double kMostRate = 1e38;

std::vector<FieldDescriptor> build_schema() {
  std::vector<FieldDescriptor> rows;

  SectionRows<ExperimentInfo>(rows, "experiment", &Experiment::experiment,
                              Defaults::FromMemberInitialisers)
      .text("name", &ExperimentInfo::name, "name the run is stored under")
      .integer("seed", &ExperimentInfo::seed, at_least(0),
               "seed of every random choice (initialisation, data)")
      .text("notes", &ExperimentInfo::notes, "free text stored with the run");

  rows.push_back(preset_row());
  rows.push_back(hf_config_row());
  SectionRows<ModelConfig>(rows, "model", &Experiment::model, Defaults::FromPreset)
      .integer("vocab_size", &ModelConfig::vocab_size, at_least(0),
               "vocabulary size; 0: take the vocabulary of the data source")
      .integer("hidden_size", &ModelConfig::hidden_size, between(1, kMostWidth),
               "width of the residual stream")
      .integer("num_layers", &ModelConfig::num_layers, between(1, kMostLayers),
               "transformer layers")
      .integer("num_heads", &ModelConfig::num_heads, between(1, kMostHeads),
               "query heads per layer")
      .integer("num_kv_heads", &ModelConfig::num_kv_heads, between(1, kMostHeads),
               "key/value heads per layer (grouped-query attention)")
      .integer("head_dim", &ModelConfig::head_dim, between(1, kMostWidth),
               "dimensions per attention head")
      .real("rope_theta", &ModelConfig::rope_theta, above(0), "RoPE base frequency")
      .real("partial_rotary", &ModelConfig::partial_rotary, {inclusive(0), inclusive(1)},
            "fraction of each head's dimensions that RoPE rotates")
      .boolean("qk_norm", &ModelConfig::qk_norm, "RMS-normalise queries and keys per head")
      .boolean("qkv_bias", &ModelConfig::qkv_bias, "bias on the query/key/value projections")
      .real("rms_eps", &ModelConfig::rms_eps, above(0), "epsilon of every RMSNorm")
      .integer("first_k_dense", &ModelConfig::first_k_dense, at_least(0),
               "the first k layers use a dense SwiGLU FFN instead of experts")
      .integer("dense_ffn_size", &ModelConfig::dense_ffn_size, between(0, kMostWidth),
               "hidden width of the dense FFN")
      .integer("num_experts", &ModelConfig::num_experts, between(0, kMostExperts),
               "routed experts per MoE layer")
      .integer("top_k", &ModelConfig::top_k, between(0, kMostExperts),
               "experts each token is routed to")
      .integer("expert_ffn_size", &ModelConfig::expert_ffn_size, between(0, kMostWidth),
               "hidden width of each expert (routed and shared)")
      .integer("shared_experts", &ModelConfig::shared_experts, at_least(0),
               "experts every token passes through, each of size expert_ffn_size")
      .boolean("moe_as_dense", &ModelConfig::moe_as_dense,
               "every MoE layer a dense SwiGLU FFN of its active width, (top_k + shared_experts) "
               "x expert_ffn_size: the dense model of the same active parameters per token")
      .choice("router", &ModelConfig::router, {"softmax", "sigmoid"}, "gate function of the router")
      .boolean("norm_topk", &ModelConfig::norm_topk,
               "renormalise the top-k gates to sum to one (refused with top_k = 1, where every "
               "gate would be 1 and the router learn nothing from the loss)")
      .real("routed_scaling_factor", &ModelConfig::routed_scaling_factor, above(0),
            "scale of the routed experts' combined output")
      .real("aux_loss_coef", &ModelConfig::aux_loss_coef, at_least(0),
            "weight of the load-balancing auxiliary loss")
      .real("z_loss_coef", &ModelConfig::z_loss_coef, at_least(0), "weight of the router z-loss")
      .real("bias_update_rate", &ModelConfig::bias_update_rate, at_least(0),
            "step of the aux-loss-free selection-bias update (sigmoid router)")
      .boolean("tie_embeddings", &ModelConfig::tie_embeddings,
               "share the input embedding with the output projection")
      .real("init_std", &ModelConfig::init_std, above(0),
            "standard deviation of the weight initialisation")
      .text("init_from", &ModelConfig::init_from,
            "a Hugging Face folder (config.json, safetensors shards; `lrmoe export-hf` writes "
            "one) whose weights the run starts from instead of random ones, each process reading "
            "the experts it holds; its config.json must give this model; empty: random");
  // No preset starts from weights: the run's own choice, empty unless set.
  rows.back().default_text = "\"\"";

  SectionRows<DataConfig>(rows, "data", &Experiment::data, Defaults::FromMemberInitialisers)
      .choice("kind", &DataConfig::kind, {"synthetic", "text", "tokens"},
              "synthetic topic-Markov data, a text file or folder (bytes), or a token file")
      .text("path", &DataConfig::path, "text: file or folder; tokens: flat binary token file")
      .choice("token_dtype", &DataConfig::token_dtype, {"uint16", "uint32"},
              "tokens: integer type of each token in the file")
      .integer("vocab_size", &DataConfig::vocab_size, at_least(1),
               "tokens: the file's vocabulary; synthetic: the generated vocabulary")
      .real("val_fraction", &DataConfig::val_fraction, {exclusive(0), exclusive(1)},
            "text/tokens: fraction held out for evaluation, from the tails of up to 20 equal parts "
            "of the data, the same for every seed")
      .integer("topics", &DataConfig::topics, at_least(1),
               "synthetic: number of topic-specific Markov sources")
      .integer("topic_vocab", &DataConfig::topic_vocab, at_least(1),
               "synthetic: tokens each topic uses")
      .integer("branching", &DataConfig::branching, at_least(1),
               "synthetic: successors of each token within a topic")
      .text("tokenizer", &DataConfig::tokenizer,
            "a Hugging Face tokenizer.json the tokens were made with: its SHA-256 and vocabulary "
            "are recorded with the run; it must be the tokenizer a corpus manifest names, and "
            "its vocabulary must fit model.vocab_size; empty: none");

  SectionRows<TrainConfig>(rows, "train", &Experiment::train, Defaults::FromMemberInitialisers)
      .integer("batch_size", &TrainConfig::batch_size, between(1, kMostBatch),
               "sequences per micro-batch")
      .integer("micro_batches", &TrainConfig::micro_batches, between(1, kMostBatches),
               "micro-batches accumulated into each optimiser step")
      .integer("seq_len", &TrainConfig::seq_len, between(1, kMostSequence), "tokens per sequence")
      .integer("max_steps", &TrainConfig::max_steps, between(1, kMostSteps),
               "optimiser steps at most")
      .integer("warmup_steps", &TrainConfig::warmup_steps, at_least(0),
               "steps of linear learning-rate warm-up; one longer than train.max_steps is "
               "shortened to it, with a warning")
      .real("lr", &TrainConfig::lr, {exclusive(0), inclusive(kMostRate)}, "peak learning rate")
      .real("min_lr", &TrainConfig::min_lr, between(0, kMostRate),
            "learning rate at the end of the decay")
      .real("weight_decay", &TrainConfig::weight_decay, between(0, kMostRate), "AdamW weight decay")
      .real("beta1", &TrainConfig::beta1, {inclusive(0), exclusive(1)}, "AdamW beta1")
      .real("beta2", &TrainConfig::beta2, {inclusive(0), exclusive(1)}, "AdamW beta2")
      .real("eps", &TrainConfig::eps, {exclusive(0), inclusive(kMostRate)}, "AdamW epsilon")
      .real("grad_clip", &TrainConfig::grad_clip, between(0, kMostRate),
            "clip the gradient norm to this; 0 disables clipping")
      .integer("eval_every", &TrainConfig::eval_every, at_least(1), "steps between evaluations")
      .integer("eval_batches", &TrainConfig::eval_batches, between(1, kMostBatches),
               "batches per evaluation")
      .real("target_loss", &TrainConfig::target_loss, at_least(0),
            "stop when the evaluation loss reaches it; 0: run to max_steps")
      .real("near_target_margin", &TrainConfig::near_target_margin, at_least(0),
            "evaluate after every step once the last training loss read (the step before's) or "
            "the last evaluation loss is within this fraction above target_loss, so that the "
            "step the target is reached is found exactly; 0: every eval_every steps only")
      .integer("log_every", &TrainConfig::log_every, at_least(1), "steps between log lines")
      .integer("trace_every", &TrainConfig::trace_every, at_least(0),
               "record the timeline of steps 1, 1 + n, 1 + 2n, ...: every process's spans of "
               "compute, exchange, planning and transfers, which `lrmoe trace RUN --step N` "
               "writes for Perfetto; 0: none")
      .integer("checkpoint_every", &TrainConfig::checkpoint_every, at_least(0),
               "write a checkpoint every this many steps, beside the database, for `lrmoe "
               "resume`; 0: none")
      .integer("checkpoint_keep", &TrainConfig::checkpoint_keep, at_least(1),
               "checkpoints kept per run: the newest")
      .boolean("keep_final_checkpoint", &TrainConfig::keep_final_checkpoint,
               "checkpoint the run's last step too (target reached or max_steps) and keep that "
               "checkpoint once the run finished, for `lrmoe export-hf`; false: a finished run's "
               "checkpoints are removed")
      .integer("threads", &TrainConfig::threads, at_least(0), "intra-op threads; 0: one per core")
      .choice("device", &TrainConfig::device, {"auto", "cpu", "cuda"},
              "where the model, batches, optimizer state and pipeline tensors live; auto: "
              "cuda:LOCAL_RANK when a GPU is visible to a CUDA build, else cpu")
      .choice("precision", &TrainConfig::precision, {"fp32", "bf16"},
              "compute precision; bf16: bfloat16 GEMMs and activations over fp32 master weights, "
              "optimizer state and router")
      .choice("grouped_gemm", &TrainConfig::grouped_gemm, {"auto", "slice-loop", "grouped-mm"},
              "expert GEMM kernel: one GEMM per expert slice, or at::_grouped_mm (LibTorch 2.9+); "
              "auto: grouped-mm on CUDA where it has it, slice-loop on the CPU");

  SectionRows<ClusterConfig>(rows, "cluster", &Experiment::cluster,
                             Defaults::FromMemberInitialisers)
      .integer(
          "ranks", &ClusterConfig::ranks, between(1, kMostRanks),
          "expert-parallel ranks: a divisor of model.num_experts (each owns experts / ranks) or a "
          "multiple of it (ranks from num_experts on own none and hold replicas only)")
      .text("memory_per_rank", &ClusterConfig::memory_per_rank,
            "memory of each rank: \"80GiB\", \"512MB\", bytes, or a multiple of what fixed "
            "ownership needs at "
            "balanced load for the MoE layers' experts and token buffers, on top of the dense and "
            "optimizer state "
            "(\"0.8x fixed\")")
      .integer(
          "slots_per_rank", &ClusterConfig::slots_per_rank, between(0, kMostExperts),
          "expert slots per MoE layer on each rank (owners and replicas); 0: ceil(experts / ranks)")
      .text("profile", &ClusterConfig::profile,
            "cost model's hardware profile: a name in experiments/hardware (h100-sxm-8gpu-ib400, "
            "h200-sxm-8gpu-ib400, ...), a path to a profile .toml, or this-machine (probed once "
            "per run)")
      .text("master_addr", &ClusterConfig::master_addr,
            "multi-process runs: rendezvous host when the launcher sets no MASTER_ADDR (Slurm)")
      .integer("master_port", &ClusterConfig::master_port, {inclusive(1), inclusive(65535)},
               "multi-process runs: rendezvous port when the launcher sets no MASTER_PORT (Slurm)")
      .real("timeout", &ClusterConfig::timeout, above(0),
            "multi-process runs: seconds a process waits for a peer (rendezvous, each collective) "
            "before the "
            "run fails; `lrmoe launch` gives the others this long to stop after one rank fails")
      .choice("backend", &ClusterConfig::backend, {"auto", "gloo", "nccl"},
              "multi-process runs: c10d backend; auto: nccl when training runs on CUDA, else "
              "gloo; nccl needs a build against a CUDA LibTorch (LRMOE_WITH_NCCL)")
      .choice("expert_state", &ClusterConfig::expert_state, {"replicated", "sharded"},
              "multi-process runs: sharded: each process holds only its ranks' static owners' "
              "experts with their gradients and optimizer state (and checkpoints them in its "
              "own part) and fetches the others it computes for each pass through c10d; "
              "replicated (a harness-made variant: data parallelism emulating expert "
              "parallelism): every process holds and updates every expert")
      .boolean("overlap_expert_fetch", &ClusterConfig::overlap_expert_fetch,
               "fetch a pass's replica weights while its pairs are dispatched, waiting for them "
               "only before the expert compute, and for a placement that reads no counts of the "
               "pass (SYMI, fixed) plan it during the previous MoE layer's forward and fetch "
               "behind that layer's expert compute (modeled so); false: fetch before the "
               "dispatch")
      .boolean("overlap_gradient_return", &ClusterConfig::overlap_gradient_return,
               "sharded: send a layer's replica gradients home while the layers below it run "
               "their backward, waiting for them only before the gradients are summed; false: "
               "within the layer's backward")
      .choice("modeled_all_to_all", &ClusterConfig::modeled_all_to_all, {"flat", "hierarchical"},
              "how the cost model's cluster runs each all-to-all: flat, every rank straight to "
              "every other; hierarchical, within each node to the rank of the destination's local "
              "index, then across nodes in one message per node pair and local index (modeled "
              "only: the processes execute flat all-to-all-v)")
      .integer("exchange_chunks", &ClusterConfig::exchange_chunks, between(1, 64),
               "split each pass's all-to-alls and expert compute into this many chunks of each "
               "rank's instances, so that the next chunk's dispatch and the last chunk's return "
               "travel while a chunk is multiplied, executed and modeled (Note [Chunked "
               "exchange]); 1: each exchange waits for the compute before it");

  SectionRows<PoliciesConfig>(rows, "policies", &Experiment::policies,
                              Defaults::FromMemberInitialisers)
      .choice("bundle", &PoliciesConfig::bundle, bundle_names(),
              "names the four policies at once; [policies.<kind>] name overrides one")
      .text("plugin_path", &PoliciesConfig::plugin_path,
            "extra plugin folders, ':'-separated, searched after the runner's own and "
            "LRMOE_PLUGIN_PATH")
      .boolean("recompute", &PoliciesConfig::recompute,
               "recompute kept pairs' expert activations in backward instead of saving them for "
               "all pairs")
      .choice("dropped_pair_keeps", &PoliciesConfig::dropped_pair_keeps, {"nothing", "input_grad"},
              "what a pair whose backward work is dropped still gets through its expert")
      .choice("optimizer_state", &PoliciesConfig::optimizer_state, {"bundle", "device", "host"},
              "where the routed experts' optimizer state lives: device memory (counted in the "
              "budget), or host memory (not counted; its gradients go down to the host and the "
              "updated weights come up every step, modeled over the profile's host link); "
              "bundle: host for symi (its paper's), device for fixed and lrmoe")
      .boolean("check_plugin_outputs", &PoliciesConfig::check_plugin_outputs,
               "check the values plugins return (finite, non-negative scores and weights, no "
               "expert above its quota), not only their shapes; false saves one small reduction "
               "per pass")
      .choice("planning", &PoliciesConfig::planning, {"exact", "scalable"},
              "how the processes agree on each pass's plan: exact gathers every pair's expert, "
              "gate and signals on every process; scalable sums counts and finds each expert's "
              "quota threshold from summed histograms, so no process sees another's pairs (needs "
              "a count routing and a ranked selection: owner, round_robin, capacity_aware; "
              "keep_all, quota_topk)")
      .real("call_timeout", &PoliciesConfig::call_timeout, between(1, 1e6),
            "seconds one call into a plugin (a plan, a score, a selection) may run before the "
            "run fails as hung, naming the plugin and the call");
  for (const PolicySection& policy : policy_sections()) rows.push_back(policy_name_row(policy));

  SectionRows<StoreConfig>(rows, "store", &Experiment::store, Defaults::FromMemberInitialisers)
      .text("path", &StoreConfig::path, "SQLite results database");

  return rows;
}

std::string format_bound(double value) {
  return fmt::format("{}", value);
}

}  // namespace

std::string_view kind_name(FieldKind kind) {
  switch (kind) {
    case FieldKind::Integer:
      return "integer";
    case FieldKind::Float:
      return "float";
    case FieldKind::Bool:
      return "bool";
    case FieldKind::String:
      return "string";
    case FieldKind::Choice:
      return "choice";
    case FieldKind::ByteSize:
      return "byte size";
  }
  return "?";
}

bool Range::contains(double value) const {
  if (low && !(low->inclusive ? value >= low->value : value > low->value)) return false;
  if (high && !(high->inclusive ? value <= high->value : value < high->value)) return false;
  return true;
}

std::string Range::describe() const {
  std::string text;
  if (low) text = (low->inclusive ? ">= " : "> ") + format_bound(low->value);
  if (high) {
    if (!text.empty()) text += " and ";
    text += (high->inclusive ? "<= " : "< ") + format_bound(high->value);
  }
  return text;
}

const std::vector<FieldDescriptor>& experiment_schema() {
  static const std::vector<FieldDescriptor> schema = build_schema();
  return schema;
}

const std::vector<std::string>& section_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> sections;
    for (const FieldDescriptor& field : experiment_schema()) {
      if (sections.empty() || sections.back() != field.section) sections.push_back(field.section);
    }
    return sections;
  }();
  return names;
}

std::vector<std::string> section_keys(std::string_view section) {
  std::vector<std::string> keys;
  for (const FieldDescriptor& field : experiment_schema()) {
    if (field.section == section) keys.push_back(field.key);
  }
  return keys;
}

const FieldDescriptor* find_field(std::string_view section, std::string_view key) {
  for (const FieldDescriptor& field : experiment_schema()) {
    if (field.section == section && field.key == key) return &field;
  }
  return nullptr;
}

const FieldDescriptor& model_preset_field() {
  static const FieldDescriptor& preset = *find_field("model", "preset");
  return preset;
}

const FieldDescriptor& model_hf_config_field() {
  static const FieldDescriptor& hf_config = *find_field("model", "hf_config");
  return hf_config;
}

bool is_model_source(const FieldDescriptor& field) {
  return &field == &model_preset_field() || &field == &model_hf_config_field();
}

}  // namespace lrmoe
