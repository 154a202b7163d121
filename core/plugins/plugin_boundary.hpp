#pragma once
// Calls into plugin code: whatever a plugin throws, of any type, comes out as one PluginError
// naming the plugin, its library and the call (Note [Plugin boundary] in docs/notes.md).

#include <exception>
#include <string>
#include <string_view>
#include <utility>

#include "core/plugins/plugin_call_watch.hpp"
#include "core/plugins/plugin_catalog.hpp"

namespace lrmoe {

// "the metric plugin 'gate' (/path/gate.so)"
std::string plugin_label(std::string_view kind, std::string_view name, std::string_view library);

// Rethrows `thrown`, an exception that left plugin code during `call`, as a PluginError saying
// what it was: a std::exception's message (LibTorch's without its backtrace), or that it was not
// a std::exception.
[[noreturn]] void throw_plugin_failure(const std::string& label, std::string_view call,
                                       std::exception_ptr thrown);

// Runs `body`, a call into plugin code named `call` ("score"), of the plugin `label` names
// (plugin_label). While it runs the call is marked for the crash and hang reports (Note [Plugin
// failures]), so `label` must outlive it; `place` says where in training it is called.
template <typename Body>
decltype(auto) call_plugin(const std::string& label, const char* call, PluginCallPlace place,
                           Body&& body) {
  PluginCallScope scope(label, call, place);
  try {
    return std::forward<Body>(body)();
  } catch (...) {
    throw_plugin_failure(label, call, std::current_exception());
  }
}

template <typename Body>
decltype(auto) call_plugin(const std::string& label, const char* call, Body&& body) {
  return call_plugin(label, call, PluginCallPlace{}, std::forward<Body>(body));
}

}  // namespace lrmoe
