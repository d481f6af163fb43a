// Threads of the cpu backend: oneDNN (OpenMP runtime) and the backend's own
// loops share one OpenMP pool sized here.
#ifndef ONNXKIT_RUNNER_CPU_THREADS_H_
#define ONNXKIT_RUNNER_CPU_THREADS_H_

namespace onnxkit::runner::cpu {

// Sets the OpenMP threads of this process (at least 1).
void SetThreads(int threads);

}  // namespace onnxkit::runner::cpu

#endif  // ONNXKIT_RUNNER_CPU_THREADS_H_
