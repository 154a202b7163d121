#pragma once
// Runs into variants, for lrmoe compare: runs are seeds of one variant exactly when their
// configurations (runner/run_configuration.hpp) are equal, so a comparison never pools runs that
// computed different things. Each variant is named by what its runs were given: a sweep cell's
// labels, else its sweep settings, else its policies; where two variants of a model would share
// a name, the settings in which they differ are added to it.

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "runner/run_configuration.hpp"

namespace lrmoe {

struct GroupedRun {
  std::string model_name;    // the name it would go by (sweep model label or preset)
  std::string variant_name;  // likewise (sweep variant label, cell settings or policies)
  RunConfiguration configuration;
};

struct VariantGroup {
  std::string model;
  std::string variant;
  std::vector<std::size_t> runs;  // indices into the runs grouped
};

struct Grouping {
  std::vector<VariantGroup> groups;  // by model, then in the order their first run came
  // Per model, the settings whose values are not the same in all of its variants.
  std::map<std::string, std::vector<std::string>> differing;
};

Grouping group_by_configuration(const std::vector<GroupedRun>& runs);

}  // namespace lrmoe
