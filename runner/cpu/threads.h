// Process-wide settings and facts of the cpu backend. Threads: oneDNN
// (OpenMP runtime) and the backend's own loops share one OpenMP pool sized
// here.
#ifndef ONNXKIT_RUNNER_CPU_THREADS_H_
#define ONNXKIT_RUNNER_CPU_THREADS_H_

namespace onnxkit::runner::cpu {

// Sets the OpenMP threads of this process (at least 1).
void SetThreads(int threads);

// While alive, the calling thread's OpenMP pool is `threads` wide (at
// least 1); the width before comes back at the end of the scope. oneDNN
// sizes a primitive's partition when the primitive is created, so a kernel
// that builds and runs its primitives inside the scope uses that width.
class ThreadsScope {
 public:
  explicit ThreadsScope(int threads);
  ~ThreadsScope();
  ThreadsScope(const ThreadsScope&) = delete;
  ThreadsScope& operator=(const ThreadsScope&) = delete;

 private:
  int saved_;
};

// True when this CPU has bfloat16 dot-product instructions (AVX512_BF16 or
// AMX) that oneDNN uses: only then do sessions asking for bfloat16
// (SessionOptions::bf16) compute in it; elsewhere oneDNN would emulate
// bfloat16 more slowly than float32 runs.
bool Bf16Supported();
// True where oneDNN runs bfloat16 products on AMX tiles (about eight times
// the multiply-adds of AVX512_BF16's dot products a cycle).
bool AmxSupported();

}  // namespace onnxkit::runner::cpu

#endif  // ONNXKIT_RUNNER_CPU_THREADS_H_
