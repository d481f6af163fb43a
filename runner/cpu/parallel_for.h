// ParallelFor: the cpu kernels' loops over independent work units.
// Included only where OpenMP is on (the cpu backend's own sources).
#ifndef ONNXKIT_RUNNER_CPU_PARALLEL_FOR_H_
#define ONNXKIT_RUNNER_CPU_PARALLEL_FOR_H_

#include <cstdint>

namespace onnxkit::runner::cpu {

// Calls body(i) for every i in [0, n): spread over the OpenMP threads when
// `parallel`, else in order on the calling thread without entering an
// OpenMP region (libgomp makes a system call for a region even when its
// `if` clause is false, which is a large part of a small tensor's op).
template <typename Body>
void ParallelFor(int64_t n, bool parallel, const Body& body) {
  if (!parallel || n <= 1) {
    for (int64_t i = 0; i < n; ++i) body(i);
    return;
  }
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) body(i);
}

// ParallelFor of a body returning bool: true when it returned true for any
// i (every i is visited either way).
template <typename Body>
bool ParallelAny(int64_t n, bool parallel, const Body& body) {
  bool any = false;
  if (!parallel || n <= 1) {
    for (int64_t i = 0; i < n; ++i) any = body(i) || any;
    return any;
  }
#pragma omp parallel for reduction(|| : any)
  for (int64_t i = 0; i < n; ++i) any = body(i) || any;
  return any;
}

}  // namespace onnxkit::runner::cpu

#endif  // ONNXKIT_RUNNER_CPU_PARALLEL_FOR_H_
