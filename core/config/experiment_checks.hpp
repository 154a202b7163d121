#pragma once
// Checks between fields of a resolved experiment (each field's own range is checked as it is
// read), with errors placed where the conflicting value was last written.

#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "core/config/experiment.hpp"

namespace lrmoe {

// Where each field got its value: the place of its last assignment, in resolution order.
class FieldPlaces {
 public:
  explicit FieldPlaces(std::string experiment_name);

  // `field` is "section.key"; a later call is a later assignment.
  void record(const std::string& field, const std::string& place);
  bool assigned(std::string_view field) const;
  // The place of whichever of `fields` was assigned last: the value most likely to be the
  // mistake. The experiment's name when none was assigned (all defaults).
  std::string latest(std::initializer_list<std::string_view> fields) const;

 private:
  std::string experiment_name_;
  std::map<std::string, std::pair<int, std::string>, std::less<>> places_;  // field: order, place
  int next_order_ = 0;
};

// Throws ConfigError for the first inconsistency between fields.
void check_consistency(const Experiment& experiment, const FieldPlaces& places);

}  // namespace lrmoe
