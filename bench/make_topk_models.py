#!/usr/bin/python3
"""Write TopK models for bench/ort_compare.py into OUT_DIR (default bench/models):

  topk_100x80000_k100  [100, 80000], k 100: a batch of vocabulary-sized rows (top-k sampling)
  topk_1x1000_k5       [64, 1000], k 5: classifier scores, k within the insertion limit
  topk_inner           [8, 4000, 16], k 50 along axis 1: strided rows
  topk_k2000           [20, 10000], k 2000: k a large share of the row

  make_topk_models.py [OUT_DIR]
  ort_compare.py --models topk_100x80000_k100,topk_1x1000_k5,topk_inner,topk_k2000 --backends cpu
"""
import os
import sys

import onnx
from onnx import TensorProto, helper

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "models")
os.makedirs(out, exist_ok=True)
for name, shape, k in [("topk_100x80000_k100", [100, 80000], 100), ("topk_1x1000_k5", [64, 1000], 5),
                       ("topk_inner", [8, 4000, 16], 50), ("topk_k2000", [20, 10000], 2000)]:
    node = helper.make_node("TopK", ["x", "k"], ["values", "indices"], axis=1)
    graph = helper.make_graph([node], name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("values", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("indices", TensorProto.INT64, None)],
                              initializer=[helper.make_tensor("k", TensorProto.INT64, [1], [k])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 7
    path = os.path.join(out, name + ".onnx")
    onnx.save(model, path)
    print("wrote", path)
