// A shared library without lrmoe's entry points, dropped in a plugin folder by mistake.
extern "C" int not_a_plugin_answer() {
  return 42;
}
