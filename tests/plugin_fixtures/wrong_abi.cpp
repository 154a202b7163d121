// A plugin that claims another plugin-API or LibTorch version than the runner's, as a library
// built against another lrmoe or LibTorch would. The loader must refuse it before calling into
// anything but its ABI entry point (Note [Plugin ABI] in docs/notes.md).
#include <lrmoe/plugin.hpp>

#ifndef LRMOE_FIXTURE_API_OFFSET
#define LRMOE_FIXTURE_API_OFFSET 0
#endif
#ifndef LRMOE_FIXTURE_TORCH_OFFSET
#define LRMOE_FIXTURE_TORCH_OFFSET 0
#endif

namespace {

lrmoe::PluginAbi other_abi() {
  lrmoe::PluginAbi abi = lrmoe::kCompiledAbi;
  abi.api_version += LRMOE_FIXTURE_API_OFFSET;
  abi.torch_minor += LRMOE_FIXTURE_TORCH_OFFSET;
  return abi;
}

lrmoe::PluginDescriptor describe() {
  lrmoe::PluginDescriptor descriptor;
  descriptor.name = "never_read";
  return descriptor;
}

}  // namespace

BOOST_DLL_ALIAS(other_abi, lrmoe_plugin_abi)
BOOST_DLL_ALIAS(describe, lrmoe_plugin_descriptor)
