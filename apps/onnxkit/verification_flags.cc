// The verification flags optimize and convert share (see commands.h).
#include <cmath>

#include "absl/strings/numbers.h"
#include "apps/onnxkit/commands.h"
#include "runner/inputs.h"

namespace onnxkit::app {

namespace {

CLI::Validator NumberCheck(bool non_negative) {
  return CLI::Validator(
      [non_negative](std::string& text) -> std::string {
        double v = 0;
        if (!absl::SimpleAtod(text, &v)) return "not a number: " + text;
        if (!std::isfinite(v)) return "not a finite number: " + text;
        if (non_negative && v < 0) return "must not be negative: " + text;
        return "";
      },
      non_negative ? "NONNEGATIVE" : "NUMBER");
}

}  // namespace

const CLI::Validator& Finite() {
  static const CLI::Validator* const v = new CLI::Validator(NumberCheck(false));
  return *v;
}

const CLI::Validator& FiniteNonNegative() {
  static const CLI::Validator* const v = new CLI::Validator(NumberCheck(true));
  return *v;
}

void AddRangeFlag(CLI::App* sub, runner::InputSpec* inputs) {
  sub->add_option_function<std::vector<double>>(
         "--range",
         [inputs](const std::vector<double>& r) {
           inputs->low = r[0];
           inputs->high = r[1];
         },
         "LOW,HIGH: range of --random values (default 0,1; integer inputs use the integers in it)")
      ->delimiter(',')
      ->expected(2)
      ->check(Finite());
}

void AddVerificationFlags(CLI::App* sub, runner::InputSpec* inputs, double* atol, double* rtol,
                          double* timeout, const std::string& shape_flag) {
  sub->add_option("--inputs", inputs->dir, "Verification inputs: a test_data_set folder (input_<i>.pb)");
  sub->add_option("--input", inputs->files, "Verification input NAME=FILE (.pb, .npy) or FILE.npz; repeatable");
  sub->add_flag("--random", inputs->random, "Seeded random verification inputs (the default when none are given)");
  sub->add_option("--seed", inputs->seed, "Seed of the random inputs (default 0)");
  AddRangeFlag(sub, inputs);
  sub->add_option(
      shape_flag, inputs->shapes,
      "NAME=1x3x224x224: dims of the random verification inputs where the model's are symbolic (default "
      "1); repeatable");
  sub->add_option("--atol", *atol, "Absolute tolerance of the verification (default 1e-4)")
      ->check(FiniteNonNegative());
  sub->add_option("--rtol", *rtol, "Relative tolerance of the verification (default 1e-3)")
      ->check(FiniteNonNegative());
  sub->add_option(
         "--timeout", *timeout,
         "Fail the verification when one run of a model takes longer than this many seconds (default: "
         "no limit)")
      ->check(FiniteNonNegative());
}

}  // namespace onnxkit::app
