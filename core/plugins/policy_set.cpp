#include "core/plugins/policy_set.hpp"

#include <fmt/format.h>

#include <cstdlib>

#include "core/config/did_you_mean.hpp"
#include "core/config/policy_sections.hpp"
#include "core/plugins/plugin_boundary.hpp"
#include "core/plugins/policy_parameters.hpp"
#include "core/system/search_folders.hpp"

namespace fs = std::filesystem;

namespace lrmoe {
namespace {

const PluginInfo& find_plugin(const PluginCatalog& catalog, PolicyKind kind,
                              const std::string& name) {
  if (const PluginInfo* plugin = catalog.find(kind, name)) return *plugin;
  const std::vector<std::string> names = catalog.names(kind);
  std::string folders;
  for (const fs::path& folder : catalog.folders())
    folders += (folders.empty() ? "" : ", ") + folder.string();
  const std::string suggestion = did_you_mean(name, names);
  throw PluginError(fmt::format(
      "[policies.{0}] name = \"{1}\": no {0} plugin has this name{2} (searched {3}); "
      "`lrmoe plugins` lists what is found",
      kind_name(kind), name,
      suggestion.empty() ? "; found " + (names.empty() ? "none" : quoted_list(names)) : suggestion,
      folders.empty() ? "no folder" : folders));
}

// The tables an experiment writes for plugins of this kind other than the chosen one: each is
// checked against its plugin, so a mistake in it is found now, not when that plugin is chosen
// (Note [Plugin parameters] in docs/notes.md).
void check_other_tables(const PluginCatalog& catalog, PolicyKind kind, const PolicyChoice& choice) {
  for (const auto& [name, settings] : choice.settings) {
    if (name == choice.name) continue;
    const PluginInfo* plugin = catalog.find(kind, name);
    if (plugin == nullptr) {
      const std::vector<std::string> names = catalog.names(kind);
      const std::string suggestion = did_you_mean(name, names);
      throw PluginError(fmt::format(
          "{}: [policies.{}.{}]: a table of parameters is named after its plugin, and no {} "
          "plugin is named '{}'{}",
          settings.place, kind_name(kind), name, kind_name(kind), name,
          suggestion.empty() ? "; `lrmoe plugins` lists them" : suggestion));
    }
    resolve_parameters(*plugin, settings.parameters);
  }
}

std::string parameters_toml(const Parameters& parameters) {
  std::string toml;
  for (const auto& [name, value] : parameters.values())
    toml += name + " = " + setting_toml(value) + "\n";
  return toml;
}

// The policy of one kind; T is that kind's interface.
template <typename T>
std::shared_ptr<T> create(const PluginCatalog& catalog, PolicyKind kind, const PolicyChoice& choice,
                          std::vector<PluginRecord>& records) {
  const PluginInfo& plugin = find_plugin(catalog, kind, choice.name);
  check_other_tables(catalog, kind, choice);
  const Parameters parameters = resolve_parameters(plugin, choice.chosen_parameters());
  records.push_back({kind_name(kind), plugin.descriptor.name, plugin.descriptor.version,
                     parameters_toml(parameters), plugin.path.string(), plugin.sha256,
                     plugin.descriptor.inputs,
                     plugin_label(kind_name(kind), plugin.descriptor.name, plugin.path.string())});
  // A hand-written descriptor can name a kind its object does not implement (Note [Plugin
  // boundary] in docs/notes.md).
  std::shared_ptr<T> policy = std::dynamic_pointer_cast<T>(create_policy(plugin, parameters));
  if (policy == nullptr) {
    throw PluginError(fmt::format(
        "{}: its descriptor says {} but its factory made an object of another kind; describe it "
        "with lrmoe::describe_policy",
        records.back().label, kind_name(kind)));
  }
  return policy;
}

// The scalable plan needs `interface` of the plugin `record` describes; `does` says what for.
void require_for_scalable_plan(bool implemented, const PluginRecord& record, const char* does,
                               const char* interface, const char* instead) {
  if (implemented) return;
  throw PluginError(fmt::format(
      "policies.planning = \"scalable\" {}, which {} does not do (it does not implement "
      "lrmoe::{}); use {}, or planning = \"exact\"",
      does, record.label, interface, instead));
}

}  // namespace

fs::path runner_plugin_folder() {
  return folder_beside_executable({"plugins", fs::path("..") / "lib" / "lrmoe" / "plugins"});
}

std::vector<fs::path> plugin_folders(const PoliciesConfig& policies) {
  std::vector<fs::path> folders;
  if (fs::path own = runner_plugin_folder(); !own.empty()) folders.push_back(own);
  if (const char* path = std::getenv("LRMOE_PLUGIN_PATH")) append_folder_list(folders, path);
  append_folder_list(folders, policies.plugin_path);
  return folders;
}

PolicySet create_policy_set(const PoliciesConfig& policies, const PluginCatalog& catalog) {
  PolicySet set;
  set.placement =
      create<PlacementPolicy>(catalog, PolicyKind::Placement, policies.placement, set.records);
  set.metric = create<MetricPolicy>(catalog, PolicyKind::Metric, policies.metric, set.records);
  set.selection =
      create<SelectionPolicy>(catalog, PolicyKind::Selection, policies.selection, set.records);
  set.routing = create<RoutingPolicy>(catalog, PolicyKind::Routing, policies.routing, set.records);
  set.count_routing = std::dynamic_pointer_cast<CountRoutingPolicy>(set.routing);
  set.ranked_selection = std::dynamic_pointer_cast<RankedSelectionPolicy>(set.selection);
  if (policies.planning == Planning::Scalable) {
    // The scalable plan never sees another process's pairs (Note [Scalable planning]).
    require_for_scalable_plan(set.count_routing != nullptr,
                              set.records[static_cast<std::size_t>(PolicyKind::Routing)],
                              "routes from counts", scalable_interface(PolicyKind::Routing),
                              "routing owner, round_robin or capacity_aware");
    require_for_scalable_plan(set.ranked_selection != nullptr,
                              set.records[static_cast<std::size_t>(PolicyKind::Selection)],
                              "selects by a threshold per expert",
                              scalable_interface(PolicyKind::Selection),
                              "selection keep_all or quota_topk");
  }
  return set;
}

const char* scalable_interface(PolicyKind kind) {
  switch (kind) {
    case PolicyKind::Routing:
      return "CountRoutingPolicy";
    case PolicyKind::Selection:
      return "RankedSelectionPolicy";
    case PolicyKind::Placement:
    case PolicyKind::Metric:
      break;
  }
  return nullptr;
}

bool plans_scalably(const PluginInfo& plugin) {
  const PolicyKind kind = plugin.descriptor.kind;
  if (scalable_interface(kind) == nullptr) return true;
  const std::shared_ptr<Policy> policy = create_policy(plugin, resolve_parameters(plugin, {}));
  return kind == PolicyKind::Routing
             ? std::dynamic_pointer_cast<CountRoutingPolicy>(policy) != nullptr
             : std::dynamic_pointer_cast<RankedSelectionPolicy>(policy) != nullptr;
}

PolicySet load_policy_set(const PoliciesConfig& policies) {
  return create_policy_set(policies, PluginCatalog::discover(plugin_folders(policies)));
}

std::string policy_names(const PoliciesConfig& policies) {
  return fmt::format("{}/{}/{}/{}", policies.placement.name, policies.metric.name,
                     policies.selection.name, policies.routing.name);
}

}  // namespace lrmoe
