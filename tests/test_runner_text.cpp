// Terminal rendering of the read-side commands: sparklines and plain-text tables.

#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "sparkline.hpp"
#include "text_table.hpp"

namespace {

size_t code_points(const std::string& utf8) {
  size_t count = 0;
  for (const char c : utf8) count += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return count;
}

}  // namespace

TEST_CASE("sparkline draws one block per value, lowest to highest", "[runner]") {
  CHECK(lrmoe::sparkline({0, 1, 2, 3, 4, 5, 6, 7}, 8) == "▁▂▃▄▅▆▇█");
  CHECK(lrmoe::sparkline({7, 0}, 10) == "█▁");  // fewer values than width: nothing invented
}

TEST_CASE("sparkline handles empty, constant and non-finite input", "[runner]") {
  CHECK(lrmoe::sparkline({}, 10).empty());
  CHECK(lrmoe::sparkline({1, 2, 3}, 0).empty());
  CHECK(lrmoe::sparkline({2.5, 2.5, 2.5}, 10) == "▁▁▁");
  CHECK(lrmoe::sparkline({1, std::nan(""), 3}, 3) == "▁ █");
  CHECK(lrmoe::sparkline({1, INFINITY, 3}, 2) == "▁█");  // the infinity is left out of its bucket
}

TEST_CASE("sparkline averages buckets down to the width", "[runner]") {
  CHECK(lrmoe::sparkline({0, 0, 10, 10}, 2) == "▁█");
  CHECK(lrmoe::sparkline({0, 10, 0, 10}, 2) == "▁▁");  // equal means: flat
  std::vector<double> falling;
  for (int i = 1000; i > 0; --i) falling.push_back(i);
  const std::string line = lrmoe::sparkline(falling, 60);
  CHECK(code_points(line) == 60);
  CHECK(line.rfind("█", 0) == 0);
  CHECK(line.substr(line.size() - std::string("▁").size()) == "▁");
}

TEST_CASE("text tables align columns, numbers to the right", "[runner]") {
  lrmoe::QueryResult table;
  table.columns = {"id", "name", "loss"};
  table.rows = {{"1", "alpha", "2.5"}, {"10", "b", std::nullopt}};
  CHECK(lrmoe::render_text_table(table) ==
        "id  name   loss\n"
        "--  -----  ----\n"
        " 1  alpha   2.5\n"
        "10  b      NULL\n");
  CHECK(lrmoe::render_text_table(table, 40, "-") ==
        "id  name   loss\n"
        "--  -----  ----\n"
        " 1  alpha   2.5\n"
        "10  b         -\n");
}

TEST_CASE("text tables cut wide cells and keep every row on one line", "[runner]") {
  lrmoe::QueryResult table;
  table.columns = {"text"};
  table.rows = {{"abcdefghij"}, {"über"}, {"two\nlines"}, {"-1e-5"}};
  CHECK(lrmoe::render_text_table(table, 6) ==
        "text\n"
        "------\n"
        "abcde…\n"
        "über\n"
        "two↵l…\n"
        "-1e-5\n");
}

TEST_CASE("a table without columns renders as nothing", "[runner]") {
  CHECK(lrmoe::render_text_table(lrmoe::QueryResult{}).empty());
}
