#include "core/config/experiment_loader.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <optional>
#include <set>

#include "core/config/did_you_mean.hpp"
#include "core/config/experiment_checks.hpp"
#include "core/config/experiment_sources.hpp"
#include "core/config/field_value.hpp"
#include "core/config/policy_sections.hpp"

namespace lrmoe {
namespace {

// The index of the last assignment of model.preset or model.hf_config: the one that wins. Both
// in one file is refused: a TOML table's keys have no order to decide by.
std::optional<std::size_t> last_model_source(const std::vector<Assignment>& assignments) {
  std::optional<std::size_t> source;
  for (std::size_t i = 0; i < assignments.size(); ++i) {
    if (!is_model_source(*assignments[i].field)) continue;
    if (source) {
      const auto& before = assignments[*source].value->source().path;
      const auto& now = assignments[i].value->source().path;
      if (before && now && *before == *now && assignments[*source].field != assignments[i].field) {
        throw ConfigError(assignments[i].place + ": " + assignments[i].field->name() + " and " +
                          assignments[*source].field->name() +
                          " both name the model in this file; keep one");
      }
    }
    source = i;
  }
  return source;
}

// Placed at the first [model] key when there is one: a model described without a preset.
ConfigError missing_model_source(const ExperimentSources& sources) {
  std::string place = sources.experiment_name();
  for (const Assignment& assignment : sources.assignments()) {
    if (assignment.field->section == model_preset_field().section) {
      place = assignment.place;
      break;
    }
  }
  return ConfigError(place + ": set model.preset to one of " +
                     quoted_list(model_preset_field().choices) +
                     ", or model.hf_config to a Hugging Face config.json");
}

// A model read from a config.json has not been through the schema's ranges: each numeric
// [model] field is checked here, the message naming the file it came from.
void check_model_ranges(const Experiment& experiment, const std::string& place) {
  for (const FieldDescriptor& field : experiment_schema()) {
    if (field.section != model_preset_field().section) continue;
    if (field.kind != FieldKind::Integer && field.kind != FieldKind::Float) continue;
    const FieldValue value = field.read(experiment);
    const double number = std::holds_alternative<int64_t>(value)
                              ? static_cast<double>(std::get<int64_t>(value))
                              : std::get<double>(value);
    if (!field.range.contains(number)) {
      throw ConfigError(fmt::format("{}: {} gives {} = {}, which must be {}", place,
                                    experiment.model.hf_config, field.name(),
                                    field_value_toml(value), field.range.describe()));
    }
  }
}

// Whether every [model] field but the sources is assigned: a resolved TOML assigns them all, so
// its config.json, whose values would all be replaced, need not be read (nor exist any more).
bool assigns_whole_model(const std::vector<Assignment>& assignments) {
  std::set<const FieldDescriptor*> assigned;
  for (const Assignment& assignment : assignments) assigned.insert(assignment.field);
  for (const FieldDescriptor& field : experiment_schema()) {
    if (field.section == model_preset_field().section && !is_model_source(field) &&
        assigned.count(&field) == 0)
      return false;
  }
  return true;
}

// Applies the model source that wins (a preset, or a config.json), naming its place in any
// error.
void apply_model_source(Experiment& experiment, const std::vector<Assignment>& assignments,
                        std::size_t source, const FieldValue& value) {
  const Assignment& assignment = assignments[source];
  if (assignment.field == &model_hf_config_field() && assigns_whole_model(assignments)) {
    experiment.model.hf_config = std::get<std::string>(value);
    return;
  }
  try {
    assignment.field->write(experiment, value);
  } catch (const ConfigError& e) {
    throw ConfigError(assignment.place + ": " + e.what());
  }
  if (assignment.field == &model_hf_config_field())
    check_model_ranges(experiment, assignment.place);
}

// A warm-up longer than the run is shortened to the run, with a note, rather than refused: a short
// run (`--set train.max_steps=5`) keeps every other setting, and the resolved experiment recorded
// with it says what it trained with. The learning rate then peaks at the last step.
void shorten_warmup(TrainConfig& train, const FieldPlaces& places) {
  if (train.warmup_steps <= train.max_steps) return;
  spdlog::warn(
      "{}: train.warmup_steps ({}) is longer than the run (train.max_steps = {}): shortened to "
      "{}, so the learning rate reaches train.lr only at the last step",
      places.latest({"train.warmup_steps", "train.max_steps"}), train.warmup_steps, train.max_steps,
      train.max_steps);
  train.warmup_steps = train.max_steps;
}

// Applies the assignments in order onto a default Experiment, the model preset first, and
// checks the result.
Experiment resolve(const ExperimentSources& sources) {
  const std::vector<Assignment>& assignments = sources.assignments();
  // Every value is checked, including those a later layer overrides: each file must be valid
  // on its own.
  std::vector<FieldValue> values;
  values.reserve(assignments.size());
  for (const Assignment& assignment : assignments) {
    values.push_back(read_field_value(*assignment.field, *assignment.value, assignment.place));
  }

  // The preset or config.json gives every model field its value, so it applies before any of
  // them, whichever layer names it.
  const std::optional<std::size_t> source = last_model_source(assignments);
  if (!source) throw missing_model_source(sources);
  Experiment experiment;
  FieldPlaces places(sources.experiment_name());
  apply_model_source(experiment, assignments, *source, values[*source]);
  for (const FieldDescriptor& field : experiment_schema()) {
    if (field.section == model_preset_field().section) {
      places.record(field.name(), assignments[*source].place);
    }
  }
  for (std::size_t i = 0; i < assignments.size(); ++i) {
    if (is_model_source(*assignments[i].field)) continue;
    assignments[i].field->write(experiment, values[i]);
    places.record(assignments[i].field->name(), assignments[i].place);
  }
  for (const SettingAssignment& setting : sources.settings()) {
    PluginSettings& plugin = (experiment.policies.*setting.choice).settings[setting.plugin];
    if (plugin.place.empty()) plugin.place = setting.plugin_place;
    if (setting.value == nullptr) continue;  // the table named, nothing in it
    plugin.parameters[setting.key] =
        PolicySetting{setting_value(*setting.value, setting.place), setting.place};
  }
  apply_bundle(experiment.policies);
  shorten_warmup(experiment.train, places);
  check_consistency(experiment, places);
  return experiment;
}

Experiment load(ExperimentSources sources, const std::vector<std::string>& overrides) {
  for (const std::string& override_text : overrides) sources.add_override(override_text);
  return resolve(sources);
}

}  // namespace

Experiment load_experiment(const std::filesystem::path& file,
                           const std::vector<std::string>& overrides) {
  return load(ExperimentSources::from_file(file), overrides);
}

Experiment load_experiment_text(std::string_view toml, const std::string& source_name,
                                const std::vector<std::string>& overrides,
                                const std::filesystem::path& base_dir) {
  return load(ExperimentSources::from_text(toml, source_name, base_dir), overrides);
}

}  // namespace lrmoe
