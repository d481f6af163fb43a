// The onnxkit IR in one include: Model, Graph, Node, Value, conversion from
// and to the pb mirror, topological order, verification, name generation.
#ifndef ONNXKIT_LIB_IR_IR_H_
#define ONNXKIT_LIB_IR_IR_H_

#include "lib/ir/graph.h"
#include "lib/ir/model.h"
#include "lib/ir/names.h"
#include "lib/ir/node.h"
#include "lib/ir/topo.h"
#include "lib/ir/value.h"
#include "lib/ir/verify.h"

#endif  // ONNXKIT_LIB_IR_IR_H_
