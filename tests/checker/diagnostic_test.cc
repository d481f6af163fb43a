// Tests of the rule table (checker/diagnostic.cc, checker/rules.def) and of
// README's rule table being generated from it (scripts/rules_table.py).
#include "checker/diagnostic.h"

#include <cstdio>
#include <regex>
#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/util/test_paths.h"

namespace onnxkit::testing {
namespace {

TEST(RuleTableTest, CodesAndNamesAreWellFormedAndUnique) {
  std::set<std::string_view> codes, names;
  const std::regex code_re("E[0-9]{4}"), name_re("[a-z0-9]+(-[a-z0-9]+)*");
  ASSERT_EQ(checker::AllRules().size(), static_cast<size_t>(checker::rules::kRuleCount));
  for (const checker::Rule& rule : checker::AllRules()) {
    EXPECT_TRUE(std::regex_match(std::string(rule.code), code_re)) << rule.code;
    EXPECT_TRUE(std::regex_match(std::string(rule.name), name_re)) << rule.name;
    EXPECT_TRUE(codes.insert(rule.code).second) << rule.code;
    EXPECT_TRUE(names.insert(rule.name).second) << rule.name;
    EXPECT_FALSE(rule.summary.empty()) << rule.code;
  }
}

TEST(RuleTableTest, EnumIndexesTheTable) {
  EXPECT_EQ(checker::RuleFor(checker::rules::kE0300).name, "ssa-unique-outputs");
  EXPECT_EQ(checker::RuleFor(checker::rules::kE0100).kind, checker::RuleKind::kRefused);
  EXPECT_EQ(checker::RuleFor(checker::rules::kE0409).kind, checker::RuleKind::kWarning);
}

TEST(RuleTableTest, FindRuleByCodeOrName) {
  ASSERT_NE(checker::FindRule("E0303"), nullptr);
  EXPECT_EQ(checker::FindRule("E0303")->name, "graph-acyclic");
  EXPECT_EQ(checker::FindRule("graph-acyclic")->code, "E0303");
  EXPECT_EQ(checker::FindRule("E9999"), nullptr);
  EXPECT_EQ(checker::FindRule(""), nullptr);
}

TEST(RuleTableTest, ReadmeTableIsUpToDate) {
  const std::string command = "python3 " + (TestdataPath("") / ".." / "scripts" / "rules_table.py").string() +
                              " --check " + (TestdataPath("") / ".." / "README.md").string() + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof(buffer), pipe)) output.append(buffer, n);
  const int status = ::pclose(pipe);
  EXPECT_EQ(status, 0) << output;
}

}  // namespace
}  // namespace onnxkit::testing
