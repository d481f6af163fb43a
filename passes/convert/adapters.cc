// The adapter table (adapters.def) as data, and its lookup.
#include "passes/convert/adapter.h"
#include "passes/convert/adapter_list.h"

namespace onnxkit::passes::convert {

const std::vector<AdapterRow>& AllAdapters() {
  static const std::vector<AdapterRow>* rows = new std::vector<AdapterRow>{
#define ONNXKIT_ADAPTER(op, boundary, dir, name, fn) AdapterRow{op, boundary, Direction::dir, name, &fn},
#include "passes/convert/adapters.def"
#undef ONNXKIT_ADAPTER
  };
  return *rows;
}

const AdapterRow* FindAdapter(std::string_view op, int64_t boundary, Direction direction) {
  for (const AdapterRow& r : AllAdapters()) {
    if (r.op == op && r.boundary == boundary && r.direction == direction) return &r;
  }
  return nullptr;
}

}  // namespace onnxkit::passes::convert
