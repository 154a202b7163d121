#pragma once
// Converting one schema field between TOML and FieldValue: reading a node with the type, range
// and choice checks of its descriptor, and writing a value back as TOML text.

#include <toml++/toml.h>

#include <string>

#include "core/config/experiment_schema.hpp"

namespace lrmoe {

// Reads `node` as a value of `field`. An integer is accepted where a float is expected. Throws
// ConfigError whose message starts with `place` ("FILE:LINE:COLUMN" or "--set section.key").
FieldValue read_field_value(const FieldDescriptor& field, const toml::node& node,
                            const std::string& place);

// The value as TOML text that reads back to the identical value: `3`, `0.003`, `1000000.0`,
// `true`, `"softmax"`, `"80GiB"`.
std::string field_value_toml(const FieldValue& value);

// "string", "integer", "float", "boolean", "table", "array", "date", "time", "date-time".
std::string toml_type_name(const toml::node& node);

}  // namespace lrmoe
