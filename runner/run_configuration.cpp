#include "runner/run_configuration.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <sstream>
#include <vector>

namespace lrmoe {
namespace {

const std::vector<std::string> kRecordingKeys = {
    "experiment.name",       "experiment.seed",
    "experiment.notes",      "store.path",
    "train.threads",         "train.checkpoint_every",
    "train.checkpoint_keep", "train.keep_final_checkpoint",
    "train.log_every",       "cluster.master_addr",
    "cluster.master_port",   "cluster.timeout",
    "policies.plugin_path",  "policies.check_plugin_outputs"};

bool is_recording_key(const std::string& key) {
  return std::find(kRecordingKeys.begin(), kRecordingKeys.end(), key) != kRecordingKeys.end();
}

std::string value_text(const toml::node& node) {
  if (const auto* s = node.as_string()) return s->get();
  std::ostringstream text;
  node.visit([&](const auto& value) { text << value; });
  return text.str();
}

void add(RunConfiguration& configuration, const std::string& key, std::string value) {
  if (is_recording_key(key)) return;
  auto& into = key.rfind("model.", 0) == 0 ? configuration.model : configuration.settings;
  into.emplace(key, std::move(value));  // the first holds: the resolved experiment's
}

void flatten(const toml::table& table, const std::string& prefix, RunConfiguration& into) {
  for (const auto& [key, node] : table) {
    const std::string name = prefix + std::string(key.str());
    if (const toml::table* inner = node.as_table()) {
      flatten(*inner, name + ".", into);
    } else {
      add(into, name, value_text(node));
    }
  }
}

}  // namespace

RunConfiguration run_configuration(const RunFigures& run) {
  RunConfiguration configuration;
  try {
    flatten(toml::parse(run.resolved_toml), "", configuration);
  } catch (const toml::parse_error&) {
    add(configuration, "resolved experiment", run.resolved_toml);  // compared as text
  }
  for (const PluginRecordRow& plugin : run.plugins) {
    try {
      flatten(toml::parse(plugin.parameters), "policies." + plugin.kind + "." + plugin.name + ".",
              configuration);
    } catch (const toml::parse_error&) {
      add(configuration, "policies." + plugin.kind + "." + plugin.name, plugin.parameters);
    }
  }
  for (const auto& [key, value] : run.cell_values) add(configuration, key, value);
  return configuration;
}

}  // namespace lrmoe
