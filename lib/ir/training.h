// Graphs a Gradient (ai.onnx.preview.training) differentiates.
//
// A Gradient reads the nodes of its own graph that compute the value its
// attribute y names from the values xs and zs name: by name, not as inputs.
// Rewriting those nodes (a fusion, dead-node removal, inserted quantization)
// changes what it computes, so transformations leave such a graph as it is.
#ifndef ONNXKIT_LIB_IR_TRAINING_H_
#define ONNXKIT_LIB_IR_TRAINING_H_

namespace onnxkit::ir {

class Graph;

// True when a node of `graph` (not of its subgraphs) is a Gradient.
bool DifferentiatedByGradient(const Graph& graph);

}  // namespace onnxkit::ir

#endif  // ONNXKIT_LIB_IR_TRAINING_H_
