// The verification flags optimize and convert share (see commands.h).
#include "apps/onnxkit/commands.h"
#include "runner/inputs.h"

namespace onnxkit::app {

void AddRangeFlag(CLI::App* sub, runner::InputSpec* inputs) {
  sub->add_option_function<std::vector<double>>(
         "--range",
         [inputs](const std::vector<double>& r) {
           inputs->low = r[0];
           inputs->high = r[1];
         },
         "LOW,HIGH: range of --random values (default 0,1; integer inputs use the integers in it)")
      ->delimiter(',')
      ->expected(2);
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
  sub->add_option("--atol", *atol, "Absolute tolerance of the verification (default 1e-4)");
  sub->add_option("--rtol", *rtol, "Relative tolerance of the verification (default 1e-3)");
  sub->add_option(
         "--timeout", *timeout,
         "Fail the verification when one run of a model takes longer than this many seconds (default: "
         "no limit)")
      ->check(CLI::NonNegativeNumber);
}

}  // namespace onnxkit::app
