#pragma once
// Finding and loading policy plugins.
//
// A plugin folder holds shared libraries (*.so), each one policy built with LRMOE_PLUGIN
// (core/include/lrmoe/plugin.hpp). Discovery loads every library in the folders it is given,
// checks its plugin-API and LibTorch versions before calling into it, and reads its descriptor.
// Every problem a user can cause (a folder or library that is missing, a library without the
// entry points, another API or LibTorch version, two plugins with one name) is a PluginError
// with a one-line message naming the file and what to do. Versions, entry points and library
// lifetime: Note [Plugin ABI] in docs/notes.md.

#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "lrmoe/plugin.hpp"

namespace boost::dll {
class shared_library;
}

namespace lrmoe {

class PluginError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct PluginInfo {
  // First, so that it is destroyed last: the descriptor's factory is code in the library (Note
  // [Plugin ABI]).
  std::shared_ptr<boost::dll::shared_library> library;
  PluginDescriptor descriptor;
  std::filesystem::path path;
  std::string sha256;  // of the library file
};

// "placement", "metric", "selection", "routing".
std::string kind_name(PolicyKind kind);

class PluginCatalog {
 public:
  // Loads every *.so in `folders`, in order. A folder that does not exist is an error.
  static PluginCatalog discover(const std::vector<std::filesystem::path>& folders);

  const std::vector<PluginInfo>& plugins() const { return plugins_; }
  // nullptr when no plugin of that kind has that name.
  const PluginInfo* find(PolicyKind kind, const std::string& name) const;
  // The names of the plugins of one kind, for "did you mean" and listings.
  std::vector<std::string> names(PolicyKind kind) const;
  const std::vector<std::filesystem::path>& folders() const { return folders_; }

 private:
  std::vector<PluginInfo> plugins_;
  std::vector<std::filesystem::path> folders_;
};

// Creates a policy from a plugin with checked parameter values (see policy_parameters.hpp);
// the returned object keeps its library loaded for as long as it lives.
std::shared_ptr<Policy> create_policy(const PluginInfo& plugin, const Parameters& parameters);

}  // namespace lrmoe
