// Factories of the cpu backend's kernels, as named in runner/cpu/*.def.
#ifndef ONNXKIT_RUNNER_CPU_FAMILIES_H_
#define ONNXKIT_RUNNER_CPU_FAMILIES_H_

#include "runner/cpu/conv.h"
#include "runner/cpu/math.h"

#endif  // ONNXKIT_RUNNER_CPU_FAMILIES_H_
