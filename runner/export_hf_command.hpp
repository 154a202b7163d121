#pragma once
// `lrmoe export-hf RUN [--step N] DIR [--dtype float32|bfloat16] [--db PATH]`: a run's
// checkpoint as a Hugging Face model folder that transformers loads (`from_pretrained(DIR)`):
// config.json, safetensors shards in the Hub layout, and their index (Note [Hugging Face
// models] in docs/notes.md). With expert-sharded state each process's part of the checkpoint
// becomes its own shard, converted one at a time.

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

namespace lrmoe {

struct ExportHfOptions {
  int64_t run = 0;
  std::optional<int64_t> step;  // none: the newest checkpoint that verifies
  std::string folder;
  std::string dtype = "float32";  // float32 | bfloat16
  std::string database = "lrmoe.db";
};

// Registers `export-hf` and its options on `app`; main runs export_hf_command when it is parsed.
CLI::App* add_export_hf_command(CLI::App& app, ExportHfOptions& options);

// Writes the folder and says what it wrote on `out`. Throws std::invalid_argument (no such run
// or checkpoint, a folder that is not empty), CheckpointError and HfError, each naming the file.
int export_hf_command(const ExportHfOptions& options, std::ostream& out);

}  // namespace lrmoe
