# lrmoe_add_plugin(<target> <source>...): one policy plugin, a shared library built only against
# the public headers (lrmoe::api) and LibTorch. The runner loads it from a plugin folder
# (its own, LRMOE_PLUGIN_PATH, or [policies] plugin_path of an experiment).
function(lrmoe_add_plugin target)
  add_library(${target} MODULE ${ARGN})
  target_link_libraries(${target} PRIVATE lrmoe::api)
  # The file name is the plugin's own name, without a "lib" prefix: "symi.so".
  set_target_properties(${target} PROPERTIES PREFIX "" CXX_VISIBILITY_PRESET default)
endfunction()
