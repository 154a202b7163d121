#include "core/plugins/plugin_boundary.hpp"

#include <c10/util/Exception.h>
#include <fmt/format.h>

namespace lrmoe {

std::string plugin_label(std::string_view kind, std::string_view name, std::string_view library) {
  return fmt::format("the {} plugin '{}' ({})", kind, name, library);
}

void throw_plugin_failure(const std::string& label, std::string_view call,
                          std::exception_ptr thrown) {
  std::string what;
  try {
    std::rethrow_exception(std::move(thrown));
  } catch (const PluginError&) {
    throw;  // already says which plugin (a nested call through the boundary)
  } catch (const c10::Error& error) {
    what = fmt::format("failed: {}", error.what_without_backtrace());
  } catch (const std::exception& error) {
    what = fmt::format("failed: {}", error.what());
  } catch (...) {
    what = "threw something that is not a std::exception";
  }
  throw PluginError(
      fmt::format("{}: {} {}; fix the plugin, or choose another in [policies]", label, call, what));
}

}  // namespace lrmoe
