#pragma once
// Calls into plugin code: whatever a plugin throws, of any type, comes out as one PluginError
// naming the plugin, its library and the call (Note [Plugin boundary] in docs/notes.md).

#include <exception>
#include <string>
#include <string_view>
#include <utility>

#include "core/plugins/plugin_catalog.hpp"

namespace lrmoe {

// "the metric plugin 'gate' (/path/gate.so)"
std::string plugin_label(std::string_view kind, std::string_view name, std::string_view library);

// Rethrows `thrown`, an exception that left plugin code during `call`, as a PluginError saying
// what it was: a std::exception's message (LibTorch's without its backtrace), or that it was not
// a std::exception.
[[noreturn]] void throw_plugin_failure(const std::string& label, std::string_view call,
                                       std::exception_ptr thrown);

// Runs `body`, a call into plugin code, `call` being its name ("score"). `label()` names the
// plugin; it runs only when `body` throws, so the calls of every pass format no text.
template <typename Label, typename Body>
decltype(auto) call_plugin(Label&& label, std::string_view call, Body&& body) {
  try {
    return std::forward<Body>(body)();
  } catch (...) {
    throw_plugin_failure(label(), call, std::current_exception());
  }
}

}  // namespace lrmoe
