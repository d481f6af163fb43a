"""Writes a small network (opset 14, seeded weights) whose ONNX Runtime
'extended' optimization uses com.microsoft ops: FusedConv (Relu, Clip),
FusedMatMul (transBatch), Gelu, SkipLayerNormalization.

testdata/models/contrib/{original,ort_extended}.onnx were made with it:
  /usr/bin/python3 bench/make_contrib_model.py original.onnx
  ORT_NODE=<onnxruntime-node 1.30> node bench/ort_optimize.js original.onnx ort_extended.onnx extended
"""
import sys
import torch
import torch.nn as nn

torch.manual_seed(0)

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.conv3 = nn.Conv2d(8, 16, 2, stride=2)
        self.q = nn.Linear(16, 16)
        self.k = nn.Linear(16, 16)
        self.v = nn.Linear(16, 16)
        self.ln1 = nn.LayerNorm(16)
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 16)
        self.ln2 = nn.LayerNorm(16)
        self.head = nn.Linear(16, 5)
        self.bn.running_mean.uniform_(-0.5, 0.5)
        self.bn.running_var.uniform_(0.5, 1.5)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv1(x)))
        y = torch.relu(self.conv2(y) + y)
        y = torch.clamp(self.conv3(y), 0.0, 6.0)          # [1, 16, 4, 4]
        t = y.flatten(2).transpose(1, 2)                  # [1, 16, 16] tokens
        b, n, c = t.shape
        q = self.q(t).reshape(b, n, 2, 8).transpose(1, 2)
        k = self.k(t).reshape(b, n, 2, 8).transpose(1, 2)
        v = self.v(t).reshape(b, n, 2, 8).transpose(1, 2)
        a = torch.softmax(q @ k.transpose(-1, -2) * 0.35, dim=-1) @ v
        a = a.transpose(1, 2).reshape(b, n, c)
        t = self.ln1(t + a)
        t = self.ln2(t + self.fc2(nn.functional.gelu(self.fc1(t))))
        return self.head(torch.relu(t.mean(dim=1)))

m = Block().eval()
x = torch.randn(1, 3, 8, 8)
torch.onnx.export(m, x, sys.argv[1], input_names=["image"], output_names=["scores"], opset_version=14)
