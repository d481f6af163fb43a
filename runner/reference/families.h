// Declarations of every reference kernel factory, one header per op family.
#ifndef ONNXKIT_RUNNER_REFERENCE_FAMILIES_H_
#define ONNXKIT_RUNNER_REFERENCE_FAMILIES_H_

#include "runner/reference/control_flow.h"
#include "runner/reference/elementwise.h"
#include "runner/reference/ml.h"
#include "runner/reference/nn.h"
#include "runner/reference/quantization.h"
#include "runner/reference/reduction.h"
#include "runner/reference/sequence.h"
#include "runner/reference/shape_ops.h"
#include "runner/reference/signal.h"
#include "runner/reference/misc.h"

#endif  // ONNXKIT_RUNNER_REFERENCE_FAMILIES_H_
