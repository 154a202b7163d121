#pragma once
// Versions a plugin is checked against when it is loaded.
//
// kPluginApiVersion changes whenever an interface in core/include/lrmoe/ changes in a way that
// breaks binary compatibility; the loader refuses a plugin built against another value.

namespace lrmoe {

inline constexpr int kPluginApiVersion = 1;

}  // namespace lrmoe
