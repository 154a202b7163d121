#include "plugins_command.hpp"

#include <fmt/format.h>

#include <string>

#include "core/config/policy_sections.hpp"
#include "core/plugins/parameter_text.hpp"
#include "core/plugins/policy_set.hpp"
#include "text_table.hpp"

namespace lrmoe {

namespace {

// Which plans can use the plugin (policies.planning), or why that is not known.
std::string planning_text(const PluginInfo& plugin) {
  try {
    if (plans_scalably(plugin)) return "planning: exact or scalable";
    return fmt::format("planning: exact only (it does not implement lrmoe::{})",
                       scalable_interface(plugin.descriptor.kind));
  } catch (const PluginError& error) {
    return fmt::format("planning: unknown, it cannot be created with its defaults: {}",
                       error.what());
  }
}

}  // namespace

int plugins_command(const std::vector<std::string>& extra_folders) {
  PoliciesConfig search;
  for (const std::string& folder : extra_folders)
    search.plugin_path += (search.plugin_path.empty() ? "" : ":") + folder;
  const PluginCatalog catalog = PluginCatalog::discover(plugin_folders(search));
  if (catalog.plugins().empty()) {
    fmt::print(
        "no plugins found; the runner's own folder is missing and LRMOE_PLUGIN_PATH is empty\n");
    return 0;
  }
  for (const PolicyKind kind :
       {PolicyKind::Placement, PolicyKind::Metric, PolicyKind::Selection, PolicyKind::Routing}) {
    for (const PluginInfo& plugin : catalog.plugins()) {
      const PluginDescriptor& d = plugin.descriptor;
      if (d.kind != kind) continue;
      fmt::print("{} {} {}  ({})\n  {}\n", kind_name(kind), d.name, d.version, plugin.path.string(),
                 d.description);
      if (d.inputs == TensorPlace::Host) fmt::print("  reads its tensors on the host\n");
      if (scalable_interface(kind) != nullptr) fmt::print("  {}\n", planning_text(plugin));
      if (d.parameters.empty()) {
        fmt::print("  no parameters\n\n");
        continue;
      }
      QueryResult table;
      table.columns = {"parameter", "type", "default", "allowed", "meaning"};
      for (const ParameterSpec& spec : d.parameters) {
        table.rows.push_back({spec.name, parameter_type_name(spec.type),
                              setting_toml(spec.default_value), parameter_allowed_text(spec),
                              spec.meaning});
      }
      const std::string text = render_text_table(table, 70, "");
      std::size_t start = 0;
      while (start < text.size()) {  // indented under the plugin
        const std::size_t end = text.find('\n', start);
        fmt::print("  {}\n", text.substr(start, end - start));
        start = end + 1;
      }
      fmt::print("\n");
    }
  }
  fmt::print("searched: ");
  for (std::size_t i = 0; i < catalog.folders().size(); ++i) {
    fmt::print("{}{}", i ? ", " : "", catalog.folders()[i].string());
  }
  fmt::print("\n");
  return 0;
}

}  // namespace lrmoe
