#pragma once
// The --db option of every command that reads or writes the results database. Where the command
// line has none, the environment variable LRMOE_DB gives it (the notebooks read the same one);
// then each command's own default (the experiment's store.path, or lrmoe.db).

#include <CLI/CLI.hpp>

#include <cstdlib>
#include <string>

namespace lrmoe {

inline constexpr const char* kDatabaseVariable = "LRMOE_DB";

// Sets `database` from LRMOE_DB when that is set, before the command line is parsed, so that a
// --db there wins. (Not CLI11's envname: commands that share one variable would have the
// variable's value written over the --db given to another.)
template <typename T>
CLI::Option* add_database_option(CLI::App* command, T& database, const std::string& description) {
  const char* from_environment = std::getenv(kDatabaseVariable);
  if (from_environment && *from_environment) database = std::string(from_environment);
  return command->add_option("--db", database, description + "; LRMOE_DB when not given");
}

}  // namespace lrmoe
