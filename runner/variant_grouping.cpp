#include "runner/variant_grouping.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace lrmoe {
namespace {

using Settings = std::map<std::string, std::string>;

// The keys whose values differ between `sets` (a key one of them lacks differs).
std::vector<std::string> differing_keys(const std::vector<const Settings*>& sets) {
  std::set<std::string> keys;
  for (const Settings* s : sets)
    for (const auto& [key, value] : *s) keys.insert(key);
  std::vector<std::string> differing;
  for (const std::string& key : keys) {
    const auto first = sets.front()->find(key);
    const bool same = std::all_of(sets.begin(), sets.end(), [&](const Settings* s) {
      const auto it = s->find(key);
      return first == sets.front()->end() ? it == s->end()
                                          : it != s->end() && it->second == first->second;
    });
    if (!same) differing.push_back(key);
  }
  return differing;
}

std::string last_part(const std::string& key) {
  return key.substr(key.rfind('.') + 1);
}

// "keep_fraction=0.25": the keys by their last part, or in full where two share it.
std::string settings_text(const Settings& settings, const std::vector<std::string>& keys) {
  std::vector<std::string> parts;
  for (const std::string& key : keys) {
    const bool shared = std::count_if(keys.begin(), keys.end(), [&](const std::string& other) {
                          return last_part(other) == last_part(key);
                        }) > 1;
    const auto it = settings.find(key);
    parts.push_back((shared ? key : last_part(key)) + "=" +
                    (it == settings.end() ? "-" : it->second));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

// Adds to each name that several members of `named` share the settings they differ in.
template <typename Member>
void disambiguate(std::vector<Member>& named, const Settings& (*settings_of)(const Member&)) {
  for (std::size_t i = 0; i < named.size(); ++i) {
    std::vector<std::size_t> same{i};
    for (std::size_t j = i + 1; j < named.size(); ++j)
      if (named[j].name == named[i].name) same.push_back(j);
    if (same.size() < 2) continue;
    std::vector<const Settings*> sets;
    for (std::size_t k : same) sets.push_back(&settings_of(named[k]));
    const std::vector<std::string> keys = differing_keys(sets);
    const std::string shared_name = named[i].name;
    for (std::size_t k : same)
      named[k].name =
          fmt::format("{} ({})", shared_name, settings_text(settings_of(named[k]), keys));
  }
}

struct Named {
  std::string name;
  const Settings* settings;
  std::vector<std::size_t> runs;
};

const Settings& settings_of_named(const Named& n) {
  return *n.settings;
}

// `runs` split by equal `key_of`, each part named by its first run's `name_of`.
template <typename KeyOf, typename NameOf>
std::vector<Named> split(const std::vector<GroupedRun>& all, const std::vector<std::size_t>& runs,
                         KeyOf key_of, NameOf name_of) {
  std::vector<Named> parts;
  for (std::size_t r : runs) {
    const Settings& key = key_of(all[r]);
    auto part = std::find_if(parts.begin(), parts.end(),
                             [&](const Named& p) { return *p.settings == key; });
    if (part == parts.end()) part = parts.insert(parts.end(), Named{name_of(all[r]), &key, {}});
    part->runs.push_back(r);
  }
  disambiguate(parts, settings_of_named);
  return parts;
}

}  // namespace

Grouping group_by_configuration(const std::vector<GroupedRun>& runs) {
  std::vector<std::size_t> every(runs.size());
  for (std::size_t i = 0; i < runs.size(); ++i) every[i] = i;
  std::vector<Named> models = split(
      runs, every, [](const GroupedRun& r) -> const Settings& { return r.configuration.model; },
      [](const GroupedRun& r) { return r.model_name; });
  std::stable_sort(models.begin(), models.end(),
                   [](const Named& a, const Named& b) { return a.name < b.name; });
  Grouping grouping;
  for (const Named& model : models) {
    const std::vector<Named> variants = split(
        runs, model.runs,
        [](const GroupedRun& r) -> const Settings& { return r.configuration.settings; },
        [](const GroupedRun& r) { return r.variant_name; });
    std::vector<const Settings*> sets;
    for (const Named& v : variants) {
      grouping.groups.push_back({model.name, v.name, v.runs});
      sets.push_back(v.settings);
    }
    if (sets.size() > 1) grouping.differing[model.name] = differing_keys(sets);
  }
  return grouping;
}

}  // namespace lrmoe
