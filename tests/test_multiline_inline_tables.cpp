// Inline tables over several lines (TOML 1.1) joined for the TOML 1.0 parser: lines keep their
// numbers after a joined table, and strings and comments outside tables pass unchanged.

#include <catch2/catch.hpp>

#include <string>

#include "core/config/multiline_inline_tables.hpp"

using lrmoe::join_multiline_inline_tables;

TEST_CASE("an inline table over several lines becomes one line, its newlines after it",
          "[config]") {
  CHECK(join_multiline_inline_tables("a = { x = 1,\n  y = 2,\n}\nb = 3\n") ==
        "a = { x = 1,   y = 2 }\n\n\nb = 3\n");
}

TEST_CASE("comments inside an inline table go, those outside stay", "[config]") {
  CHECK(join_multiline_inline_tables("v = [ # list\n { x = 1, # one\n y = 2 },\n]\n") ==
        "v = [ # list\n { x = 1,   y = 2  }\n,\n]\n");
}

TEST_CASE("braces and newlines inside strings are not a table's", "[config]") {
  const std::string text =
      "a = \"{ not\"\nb = '{'\nc = \"\"\"\n{\n\"\"\"\nd = '''\n{ '''\ne = { s = \"}\\\"\" }\n";
  CHECK(join_multiline_inline_tables(text) ==
        "a = \"{ not\"\nb = '{'\nc = \"\"\"\n{\n\"\"\"\nd = '''\n{ '''\ne = { s = \"}\\\"\"  }\n");
}

TEST_CASE("nested inline tables join as one, arrays' trailing commas stay", "[config]") {
  CHECK(join_multiline_inline_tables("t = { a = { b = [1,\n 2,] },\n}\n") ==
        "t = { a = { b = [1,  2,]  } }\n\n\n");
}
