#include "plugins_command.hpp"

#include <fmt/format.h>

#include <string>

#include <stdexcept>
#include "core/config/policy_sections.hpp"
#include "core/plugins/parameter_text.hpp"
#include "core/plugins/policy_set.hpp"

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

// `text` in lines of at most `width` characters, each starting with `indent`.
std::string wrapped(const std::string& text, std::size_t width, const std::string& indent) {
  std::string out, line;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(start, end - start);
    if (!line.empty() && indent.size() + line.size() + 1 + word.size() > width) {
      out += indent + line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
    start = end + 1;
  }
  if (!line.empty()) out += indent + line + "\n";
  return out;
}

const PolicyKind kKinds[] = {PolicyKind::Placement, PolicyKind::Metric, PolicyKind::Selection,
                             PolicyKind::Routing};

}  // namespace

int plugins_command(const std::vector<std::string>& extra_folders,
                    const std::optional<std::string>& kind_asked) {
  std::vector<PolicyKind> kinds;
  for (const PolicyKind kind : kKinds)
    if (!kind_asked || kind_name(kind) == *kind_asked) kinds.push_back(kind);
  if (kinds.empty())
    throw std::invalid_argument(fmt::format(
        "plugins: --kind {}: use placement, metric, selection or routing", *kind_asked));
  PoliciesConfig search;
  for (const std::string& folder : extra_folders)
    search.plugin_path += (search.plugin_path.empty() ? "" : ":") + folder;
  const PluginCatalog catalog = PluginCatalog::discover(plugin_folders(search));
  if (catalog.plugins().empty()) {
    fmt::print(
        "no plugins found; the runner's own folder is missing and LRMOE_PLUGIN_PATH is empty\n");
    return 0;
  }
  for (const PolicyKind kind : kinds) {
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
      // Each parameter, then its meaning in full, wrapped under it.
      for (const ParameterSpec& spec : d.parameters) {
        fmt::print("  {} ({}, default {}{})\n", spec.name, parameter_type_name(spec.type),
                   setting_toml(spec.default_value),
                   parameter_allowed_text(spec).empty()
                       ? ""
                       : ", allowed " + parameter_allowed_text(spec));
        fmt::print("{}", wrapped(spec.meaning, 100, "      "));
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
