#pragma once
// A sweep file (`lrmoe sweep SWEEP.toml`): a base experiment and axes of `--set`-style settings;
// every cell of the axes' product is one run. The format, with its rules:
//
//   name = "keep-fraction"             # optional; default: the file's name without .toml
//   experiment = "../tiny-moe.toml"    # the base experiment, relative to this file
//   set = ["train.max_steps=60"]       # optional: for every cell, before the axes' settings
//   processes = 1                      # optional: each cell on P processes (lrmoe launch)
//
//   [[axis]]                           # one key and its values
//   key = "policies.placement.keep_fraction"
//   values = [1.0, 0.5, 0.25]
//
//   [[axis]]                           # zipped keys: the i-th tuple sets them together
//   keys = ["policies.bundle", "cluster.slots_per_rank"]
//   values = [["fixed", 2], ["lrmoe", 3]]
//
//   [[axis]]                           # variants: each value its own keys (a policy's own
//   variants = [                       # parameters beside its bundle); nested tables flatten
//     { "policies.bundle" = "fixed" },
//     { label = "SYMI fit", "policies.bundle" = "symi",
//       "policies.placement.fit_budget" = true },  # an inline table may span lines
//   ]
//
//   [[axis]]                           # the same as array-of-tables, one setting a line
//   [[axis.variants]]
//   label = "wide experts"
//   "model.expert_ffn_size" = 512
//
// An axis has a kind: "model" (its values name the model trained: every key is model.*, or
// kind = "model"), "seed" (its one key is experiment.seed) or "variant" (the rest). The model
// and variant labels of a cell join its values' labels over the axes of that kind; a value's
// label is its `label` (variants) or its entry in `labels = [...]` (key and keys axes), else
// its settings, "keep_fraction=0.5" (a model.preset value alone: the preset's name). `lrmoe
// compare` names a cell's model and variant by them; a model axis's keys are never part of a
// variant's name.
//
// Cells are numbered in product order, the first axis varying slowest. A key may appear in one
// axis only. Values are TOML strings, integers, floats or booleans.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace lrmoe {

// One key's value in a cell.
struct SweepSetting {
  std::string key;    // "policies.placement.keep_fraction"
  std::string toml;   // the value as TOML text: `0.5`, `"lrmoe"`
  std::string text;   // as shown and recorded: strings without quotes
  std::string place;  // where the sweep file sets it, "FILE:LINE:COLUMN"
};

struct SweepCell {
  int64_t index = 0;                   // from 0, in product order
  std::vector<SweepSetting> settings;  // one per axis key, in axis order
  std::string model;    // its model axes' labels, ", "-joined; empty without a model axis
  std::string variant;  // its variant axes' labels, ", "-joined; empty without one

  // "keep_fraction=0.5, seed=2": the keys' last parts, for progress and error lines.
  std::string label() const;
};

struct SweepSpec {
  std::string file;  // the sweep file as given
  std::string name;
  std::filesystem::path experiment;     // the base experiment, resolved against the sweep's folder
  std::vector<std::string> set;         // "section.key=value", for every cell
  std::vector<std::string> set_places;  // where the sweep file has each of `set`
  int64_t processes = 1;
  std::vector<SweepCell> cells;

  // The cell's overrides, "section.key=value", in the order to apply them: `set`, then its
  // settings.
  std::vector<std::string> overrides(const SweepCell& cell) const;
  // Where the sweep file sets what `error` (a message of loading the cell's experiment) is
  // about: the place of the setting it names as "--set KEY", else the sweep file.
  std::string place_of(const SweepCell& cell, const std::string& error) const;
};

// Why `name` cannot name a sweep (it names a folder of logs and a row of the database): empty,
// a path separator, a leading dot, a control character or over 100 bytes; "" when it can.
std::string sweep_name_problem(const std::string& name);

// Reads and checks a sweep file. Throws ConfigError naming the file, line and column. The
// settings' keys and values are checked when the cells' experiments are loaded.
SweepSpec load_sweep_spec(const std::filesystem::path& file);

}  // namespace lrmoe
