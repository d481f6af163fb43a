// dedupe-initializers: merges constant initializers with equal data_type,
// dims and bytes; the later one's uses read the first, and it goes.
// Before: initializers(%w1 = [1, 2], %w2 = [1, 2]); %a = Add(%x, %w1); %b = Mul(%x, %w2)
// After:  initializers(%w1 = [1, 2]); %a = Add(%x, %w1); %b = Mul(%x, %w1)
//
// Decisions:
//   - Only dense initializers that are constant (not listed as graph inputs:
//     those can be fed) and not graph outputs (a graph output keeps its
//     name and cannot be renamed onto an initializer).
//   - Bytes compare in the raw layout (typed fields converted, external data
//     read through the context's resolver), so a tensor stored in
//     float_data equals the same tensor in raw_data. String tensors compare
//     their encoded string_data.
//   - Fast on big models: tensors are grouped by (data_type, dims) first and
//     only groups of two or more are read; within a group a hash of the
//     size and both ends of the bytes picks candidates, and only equal
//     hashes are compared in full.
//   - Equal Constant nodes merge in cse (equal attribute bytes).
//   - Allow is anchored at the first node using the duplicate; unused
//     initializers are left to dce.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/hash/hash.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "lib/base/status_macros.h"
#include "lib/io/external_data.h"
#include "lib/io/proto_codec.h"
#include "lib/tensor/tensor_data.h"
#include "passes/pass_list.h"
#include "passes/util.h"

namespace onnxkit::passes {
namespace {

bool Candidate(const ir::Value& v) {
  return v.IsConstant() && v.initializer() != nullptr && v.has_uses() && !v.IsGraphOutput();
}

// The bytes that decide equality: the raw layout; strings as encoded.
absl::StatusOr<Bytes> ContentBytes(const pb::TensorProto& t, PassContext& ctx) {
  if (t.data_type == pb::kString) {
    pb::TensorProto copy;
    copy.string_data = t.string_data;
    return Bytes::Own(io::Encode(copy));
  }
  absl::StatusOr<Bytes> b = io::TensorRawBytes(t, ctx.resolver());  // a view: no copy
  if (b.ok() || !absl::IsNotFound(b.status())) return b;
  ONNXKIT_ASSIGN_OR_RETURN(std::string raw, tensor::ToRawBytes(t));
  return Bytes::Own(std::move(raw));
}

// A hash of the size and of up to 256 bytes at each end: cheap on 100 MB
// weights, and enough to tell apart tensors that differ (equal samples are
// compared in full).
size_t SampleHash(std::string_view bytes) {
  constexpr size_t kSample = 256;
  if (bytes.size() <= 2 * kSample) return absl::HashOf(bytes);
  return absl::HashOf(bytes.size(), bytes.substr(0, kSample), bytes.substr(bytes.size() - kSample));
}

struct Entry {
  ir::Value* value;
  Bytes bytes;
  size_t hash;
};

class DedupeInitializers : public Pass {
 public:
  absl::StatusOr<bool> Run(ir::Graph& graph, PassContext& ctx) override {
    // (data_type, dims) -> initializers, in initializer order.
    std::map<std::pair<int32_t, std::vector<int64_t>>, std::vector<ir::Value*>> groups;
    std::vector<const std::vector<ir::Value*>*> order;
    for (ir::Value* v : graph.initializers()) {
      if (!Candidate(*v)) continue;
      std::vector<ir::Value*>& group = groups[{v->initializer()->data_type, v->initializer()->dims}];
      group.push_back(v);
      if (group.size() == 2) order.push_back(&group);
    }
    bool changed = false;
    for (const std::vector<ir::Value*>* group : order) {
      ONNXKIT_ASSIGN_OR_RETURN(bool merged, DedupeGroup(graph, *group, ctx));
      changed = changed || merged;
    }
    return changed;
  }

 private:
  static absl::StatusOr<bool> DedupeGroup(ir::Graph& graph, const std::vector<ir::Value*>& group,
                                          PassContext& ctx) {
    std::vector<Entry> kept;
    bool changed = false;
    for (ir::Value* v : group) {
      absl::StatusOr<Bytes> bytes = ContentBytes(*v->initializer(), ctx);
      if (!bytes.ok()) continue;  // unreadable data: left for check to report
      size_t hash = SampleHash(bytes->view());
      const Entry* same = nullptr;
      for (const Entry& e : kept) {
        if (e.hash == hash && e.bytes.view() == bytes->view()) {
          same = &e;
          break;
        }
      }
      if (same == nullptr) {
        kept.push_back(Entry{v, *std::move(bytes), hash});
        continue;
      }
      ir::Node* anchor = v->uses().front().node;
      if (!ctx.Allow(*anchor, absl::StrCat("initializer '", v->name(), "' equals '", same->value->name(), "'"))) {
        continue;
      }
      ONNXKIT_RETURN_IF_ERROR(graph.ReplaceAllUsesWith(v, same->value));
      ONNXKIT_RETURN_IF_ERROR(graph.RemoveInitializer(v));
      changed = true;
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> CreateDedupeInitializers() { return std::make_unique<DedupeInitializers>(); }

}  // namespace onnxkit::passes
