#pragma once
// `lrmoe record-plugin-failure --db=PATH --run N -- MESSAGE`: what a run's process starts when a
// plugin crashed, ended the process or hung in it (runner/plugin_failure_report.cpp), never a
// user. A fresh process, because the failing one may have a corrupt heap and cannot be trusted to
// write the database: it records MESSAGE as the run's error event and the run as failed.

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace lrmoe {

struct PluginFailureRecord {
  std::string database;
  int64_t run = 0;
  std::string message;
};

// Registers the command, hidden from --help; its options fill `record`.
CLI::App* add_record_plugin_failure_command(CLI::App& app, PluginFailureRecord& record);

// 0 when recorded; 3 when the run is not running (it ended and recorded its own status first),
// and nothing is changed.
int record_plugin_failure_command(const PluginFailureRecord& record);

}  // namespace lrmoe
