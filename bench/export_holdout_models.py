#!/usr/bin/python3
"""Export a holdout set of torchvision networks with random (seeded) weights, for speed and
transformation sweeps on architectures that the benchmark set does not have: densenet121 (channel
concatenation), efficientnet_b0 and mobilenet_v3_small (squeeze-and-excitation, SiLU and hard
activations), convnext_tiny (7x7 depthwise, LayerNorm over NHWC, GELU), regnet_y_400mf and
resnext50 (grouped convolutions), googlenet and inception_v3 (branch concatenation), shufflenet_v2
(channel shuffle), mnasnet (channel counts not multiples of 16) and lraspp (a segmentation head with
bilinear Resize). Each is written as OUT_DIR/tv_NAME.onnx, opset 17, input 'input' [1, 3, S, S].

  export_holdout_models.py OUT_DIR [NAME,NAME...]

bench/ort_compare.py measures them with --models holdout (every tv_*.onnx of bench/models) or
tv_NAME. Weights are random: outputs are not meaningful predictions, and the activations of networks
without trained normalization statistics grow large (float16 conversion then keeps more nodes in
float32 than it would on trained weights)."""
import inspect, os, sys
import torch, torchvision

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
wanted = set(sys.argv[2].split(',')) if len(sys.argv) > 2 else None
exporter = {'dynamo': False} if 'dynamo' in inspect.signature(torch.onnx.export).parameters else {}
tv = torchvision.models
networks = [
    ('densenet121', lambda: tv.densenet121(), 224),
    ('efficientnet_b0', lambda: tv.efficientnet_b0(), 224),
    ('mobilenet_v3_small', lambda: tv.mobilenet_v3_small(), 224),
    ('convnext_tiny', lambda: tv.convnext_tiny(), 224),
    ('regnet_y_400mf', lambda: tv.regnet_y_400mf(), 224),
    ('googlenet', lambda: tv.googlenet(aux_logits=False, init_weights=True), 224),
    ('shufflenet_v2', lambda: tv.shufflenet_v2_x1_0(), 224),
    ('mnasnet', lambda: tv.mnasnet1_0(), 224),
    ('resnext50', lambda: tv.resnext50_32x4d(), 224),
    ('inception_v3', lambda: tv.inception_v3(aux_logits=False, init_weights=True), 299),
    ('lraspp', lambda: tv.segmentation.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None), 224),
]
for name, build, size in networks:
    if wanted is not None and name not in wanted:
        continue
    torch.manual_seed(0)  # each network's weights independent of which others are written
    net = build().eval()
    path = os.path.join(out, 'tv_' + name + '.onnx')
    torch.onnx.export(net, torch.randn(1, 3, size, size), path, input_names=['input'], opset_version=17,
                      do_constant_folding=False, **exporter)
    print('wrote', path, os.path.getsize(path), flush=True)
