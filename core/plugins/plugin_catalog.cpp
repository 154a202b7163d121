#include "core/plugins/plugin_catalog.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <boost/dll/shared_library.hpp>
#include <fstream>
#include <sstream>

#include "core/config/toml_text.hpp"
#include "core/plugins/library_file_check.hpp"
#include "core/plugins/plugin_boundary.hpp"
#include "core/plugins/policy_parameters.hpp"
#include "core/system/sha256.hpp"

namespace fs = std::filesystem;

namespace lrmoe {
namespace {

constexpr const char* kRebuildHint =
    "rebuild it against this lrmoe (find_package(lrmoe)) or remove it from the folder";

std::string abi_text(const PluginAbi& abi) {
  return fmt::format("plugin API {} and LibTorch {}.{}.{}", abi.api_version, abi.torch_major,
                     abi.torch_minor, abi.torch_patch);
}

bool same_abi(const PluginAbi& a, const PluginAbi& b) {
  return a.api_version == b.api_version && a.torch_major == b.torch_major &&
         a.torch_minor == b.torch_minor && a.torch_patch == b.torch_patch;
}

std::shared_ptr<boost::dll::shared_library> open_library(const fs::path& path) {
  check_library_file(path);
  try {
    return std::make_shared<boost::dll::shared_library>(path);
  } catch (const std::exception& error) {
    throw PluginError(fmt::format("{}: cannot load this library ({}); {}", path.string(),
                                  error.what(), kRebuildHint));
  }
}

// Reads the library's ABI through a plain struct before anything that depends on it (Note
// [Plugin ABI] in docs/notes.md).
PluginInfo load_plugin(const fs::path& path) {
  auto library = open_library(path);
  for (const char* entry : {kAbiEntryPoint, kDescriptorEntryPoint}) {
    if (!library->has(entry)) {
      throw PluginError(fmt::format(
          "{}: not an lrmoe plugin (no '{}' entry point); build it with LRMOE_PLUGIN from "
          "<lrmoe/plugin.hpp>, or remove it from the plugin folder",
          path.string(), entry));
    }
  }
  const PluginAbi abi = library->get_alias<AbiFunction>(kAbiEntryPoint)();
  if (!same_abi(abi, kCompiledAbi)) {
    throw PluginError(fmt::format("{}: built for {}, but this runner uses {}; {}", path.string(),
                                  abi_text(abi), abi_text(kCompiledAbi), kRebuildHint));
  }
  PluginInfo info;
  const std::string label = fmt::format("the plugin library {}", path.string());
  info.descriptor = call_plugin(label, kDescriptorEntryPoint, [&] {
    return library->get_alias<DescriptorFunction>(kDescriptorEntryPoint)();
  });
  info.path = path;
  info.sha256 = sha256_file_hex(path);
  info.library = std::move(library);
  if (info.descriptor.name.empty() || !info.descriptor.create) {
    throw PluginError(
        fmt::format("{}: its descriptor has no name or no factory; describe it with "
                    "lrmoe::describe_policy",
                    path.string()));
  }
  // An experiment names the plugin as a bare key, in [policies.<kind>.<plugin>] and in
  // `--set policies.<kind>.<plugin>.key=value`.
  if (!is_bare_toml_key(info.descriptor.name)) {
    throw PluginError(
        fmt::format("{}: its descriptor names it '{}', which is not only letters, digits, '_' "
                    "and '-'; rename it and rebuild it",
                    path.string(), info.descriptor.name));
  }
  check_parameter_declarations(info.descriptor, path);
  return info;
}

std::vector<fs::path> libraries_in(const fs::path& folder) {
  if (!fs::is_directory(folder)) {
    // A relative folder is read from the working folder (as data.path is, not from the
    // experiment's file as `extends` is): the message says where that put it.
    const std::string resolved = folder.is_relative() ? fmt::format(" ({} from the working folder)",
                                                                    fs::absolute(folder).string())
                                                      : "";
    throw PluginError(
        fmt::format("plugin folder {}{} does not exist; fix LRMOE_PLUGIN_PATH or [policies] "
                    "plugin_path",
                    folder.string(), resolved));
  }
  std::vector<fs::path> libraries;
  for (const fs::directory_entry& entry : fs::directory_iterator(folder)) {
    if (entry.is_regular_file() && entry.path().extension() == ".so")
      libraries.push_back(entry.path());
  }
  std::sort(libraries.begin(), libraries.end());  // a stable order whatever the file system's
  return libraries;
}

}  // namespace

std::string kind_name(PolicyKind kind) {
  switch (kind) {
    case PolicyKind::Placement:
      return "placement";
    case PolicyKind::Metric:
      return "metric";
    case PolicyKind::Selection:
      return "selection";
    case PolicyKind::Routing:
      return "routing";
  }
  return "?";
}

PluginCatalog PluginCatalog::discover(const std::vector<fs::path>& folders) {
  PluginCatalog catalog;
  for (const fs::path& folder : folders) {
    const fs::path canonical = fs::weakly_canonical(folder);
    // The same folder named twice (e.g. in LRMOE_PLUGIN_PATH and an experiment) is read once.
    if (std::find(catalog.folders_.begin(), catalog.folders_.end(), canonical) !=
        catalog.folders_.end())
      continue;
    catalog.folders_.push_back(canonical);
    for (const fs::path& path : libraries_in(canonical)) {
      PluginInfo info = load_plugin(path);
      if (const PluginInfo* other = catalog.find(info.descriptor.kind, info.descriptor.name)) {
        throw PluginError(fmt::format(
            "{}: a {} plugin named '{}' is already loaded from {}; rename one or remove "
            "one of the folders",
            path.string(), kind_name(info.descriptor.kind), info.descriptor.name,
            other->path.string()));
      }
      catalog.plugins_.push_back(std::move(info));
    }
  }
  return catalog;
}

const PluginInfo* PluginCatalog::find(PolicyKind kind, const std::string& name) const {
  for (const PluginInfo& plugin : plugins_) {
    if (plugin.descriptor.kind == kind && plugin.descriptor.name == name) return &plugin;
  }
  return nullptr;
}

std::vector<std::string> PluginCatalog::names(PolicyKind kind) const {
  std::vector<std::string> names;
  for (const PluginInfo& plugin : plugins_) {
    if (plugin.descriptor.kind == kind) names.push_back(plugin.descriptor.name);
  }
  return names;
}

std::shared_ptr<Policy> create_policy(const PluginInfo& plugin, const Parameters& parameters) {
  const std::string label =
      plugin_label(kind_name(plugin.descriptor.kind), plugin.descriptor.name, plugin.path.string());
  std::unique_ptr<Policy> policy =
      call_plugin(label, "its factory", [&] { return plugin.descriptor.create(parameters); });
  if (policy == nullptr) {
    throw PluginError(fmt::format(
        "{}: its factory returned no object; describe it with lrmoe::describe_policy", label));
  }
  // The deleter holds the library, so its code outlives every object it made (Note [Plugin ABI]).
  return std::shared_ptr<Policy>(policy.release(),
                                 [library = plugin.library](Policy* p) { delete p; });
}

}  // namespace lrmoe
