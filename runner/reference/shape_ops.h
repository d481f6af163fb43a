// Reference kernels: shape and data-movement ops (factories listed in
// shape_ops.def), plus the few helpers their files share.
//
// Data-movement kernels are type-generic: they copy elements with
// ElementCopier (dispatch.h), so every element type works, strings, bool,
// float8 and packed sub-byte types included.
#ifndef ONNXKIT_RUNNER_REFERENCE_SHAPE_OPS_H_
#define ONNXKIT_RUNNER_REFERENCE_SHAPE_OPS_H_

#include <string>
#include <string_view>
#include <vector>

#include "runner/kernel.h"

namespace onnxkit::runner::reference {

// shape_ops_view.cc: views and shape queries.
absl::StatusOr<std::unique_ptr<Kernel>> MakeReshape(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeFlatten(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeSqueeze(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeUnsqueeze(const ir::Node& node, const KernelInfo& info);
absl::Status Shape(KernelContext& ctx);
absl::Status Size(KernelContext& ctx);
absl::StatusOr<std::unique_ptr<Kernel>> MakeDropout(const ir::Node& node, const KernelInfo& info);

// shape_ops_fill.cc: tensors made from shapes and values.
absl::Status Expand(KernelContext& ctx);
absl::Status Tile(KernelContext& ctx);
absl::StatusOr<std::unique_ptr<Kernel>> MakeConstantOfShape(const ir::Node& node, const KernelInfo& info);
absl::Status Range(KernelContext& ctx);
absl::Status EyeLike(KernelContext& ctx);
absl::Status OneHot(KernelContext& ctx);
absl::Status Trilu(KernelContext& ctx);
absl::Status CumSum(KernelContext& ctx);
absl::Status CumProd(KernelContext& ctx);

// shape_ops_layout.cc: copies that rearrange elements.
absl::Status Transpose(KernelContext& ctx);
absl::Status Concat(KernelContext& ctx);
absl::Status Split(KernelContext& ctx);
absl::Status Slice(KernelContext& ctx);
absl::Status Compress(KernelContext& ctx);
absl::Status ReverseSequence(KernelContext& ctx);
absl::StatusOr<std::unique_ptr<Kernel>> MakeDepthToSpace(const ir::Node& node, const KernelInfo& info);
absl::Status SpaceToDepth(KernelContext& ctx);

// shape_ops_pad.cc: padding and cropping.
absl::StatusOr<std::unique_ptr<Kernel>> MakePad(const ir::Node& node, const KernelInfo& info);
absl::Status CenterCropPad(KernelContext& ctx);

// shape_ops_gather.cc: indexing.
absl::Status Gather(KernelContext& ctx);
absl::Status GatherElements(KernelContext& ctx);
absl::Status GatherND(KernelContext& ctx);
absl::StatusOr<std::unique_ptr<Kernel>> MakeScatterElements(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeScatterND(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeTensorScatter(const ir::Node& node, const KernelInfo& info);
absl::Status NonZero(KernelContext& ctx);

// shape_ops_sort.cc: ordering.
absl::Status TopK(KernelContext& ctx);
absl::Status Unique(KernelContext& ctx);

// shape_ops_resize.cc: Resize and Upsample.
absl::StatusOr<std::unique_ptr<Kernel>> MakeResize(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeUpsample(const ir::Node& node, const KernelInfo& info);

// shape_ops_sample.cc: sampling grids and image patches.
absl::StatusOr<std::unique_ptr<Kernel>> MakeGridSample(const ir::Node& node, const KernelInfo& info);
absl::Status AffineGrid(KernelContext& ctx);
absl::Status Col2Im(KernelContext& ctx);

// shape_ops_random.cc: seeded random generators.
absl::StatusOr<std::unique_ptr<Kernel>> MakeRandomNormal(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeRandomUniform(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeRandomNormalLike(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeRandomUniformLike(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeBernoulli(const ir::Node& node, const KernelInfo& info);
absl::StatusOr<std::unique_ptr<Kernel>> MakeMultinomial(const ir::Node& node, const KernelInfo& info);

// Helpers shared by the shape_ops_*.cc files (shape_ops_common.cc).
namespace shape_ops {

// "[2, 3]"
std::string ShapeString(const std::vector<int64_t>& shape);
// An int32/int64 tensor's values; InvalidArgument naming `what` otherwise.
absl::StatusOr<std::vector<int64_t>> ReadInts(const Tensor& t, std::string_view what);
// Any numeric tensor's values as doubles; InvalidArgument naming `what` for
// other element types.
absl::StatusOr<std::vector<double>> ReadDoubles(const Tensor& t, std::string_view what);
// The single value of a scalar or one-element tensor, as a double.
absl::StatusOr<double> ReadScalar(const Tensor& t, std::string_view what);
// Axes (each in [-rank, rank-1]) normalized, rejecting duplicates.
absl::StatusOr<std::vector<int64_t>> NormalizeAxes(const std::vector<int64_t>& axes, int64_t rank,
                                                   std::string_view what = "axes");
// The element count of `shape`; InvalidArgument naming `what` on a negative
// dim or an overflow.
absl::StatusOr<int64_t> CheckedCount(const std::vector<int64_t>& shape, std::string_view what);
// Writes `value` (converted from double) into element i of a numeric tensor.
absl::Status StoreDouble(Tensor& t, int64_t i, double value);
// Element i of a numeric tensor as a double.
double LoadDouble(const Tensor& t, int64_t i);
// Product of dims [from, to) of `shape` (1 for an empty range).
int64_t DimProduct(const std::vector<int64_t>& shape, size_t from, size_t to);

// Slice's window on an input of `shape`: the first element and step along
// each axis and the output shape, from the starts/ends/axes/steps
// attributes (before opset 10) or inputs 1 to 4 (read on the host),
// clamped as the spec says.
struct SliceGeometry {
  std::vector<int64_t> start, step, out_shape;
};
absl::StatusOr<SliceGeometry> ResolveSlice(KernelContext& ctx, const std::vector<int64_t>& shape);

// The random stream of numpy's legacy RandomState: MT19937 seeded like
// np.random.seed(seed), doubles like random_sample and normals like
// standard_normal. Random kernels use it so that a seeded node reproduces
// what numpy-based references (the ONNX backend tests) draw.
class LegacyRandom {
 public:
  explicit LegacyRandom(uint32_t seed);
  uint32_t Next32();
  double Uniform();  // [0, 1)
  double Normal();   // mean 0, deviation 1

 private:
  uint32_t state_[624];
  int pos_ = 624;
  bool has_gauss_ = false;
  double gauss_ = 0;
};

// A seed for LegacyRandom: the node's seed attribute (float or int) when
// present, a fresh nondeterministic one otherwise.
uint32_t SeedOf(const ir::Node& node);

}  // namespace shape_ops
}  // namespace onnxkit::runner::reference

#endif  // ONNXKIT_RUNNER_REFERENCE_SHAPE_OPS_H_
