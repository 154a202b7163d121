#include "plugin_failure_record_command.hpp"

#include "store/results_store.hpp"

namespace lrmoe {

CLI::App* add_record_plugin_failure_command(CLI::App& app, PluginFailureRecord& record) {
  CLI::App* command = app.add_subcommand("record-plugin-failure", "")->group("");
  command->add_option("--db", record.database)->required();
  command->add_option("--run", record.run)->required();
  command->add_option("message", record.message)->required();
  return command;
}

int record_plugin_failure_command(const PluginFailureRecord& record) {
  auto store = ResultsStore::open(record.database);
  const std::optional<RunSummary> run = store->find_run(record.run);
  if (!run || run->status != "running") return 3;
  store->add_event(record.run, "error", record.message);
  store->finish_run(record.run, "failed", std::nullopt);
  return 0;
}

}  // namespace lrmoe
