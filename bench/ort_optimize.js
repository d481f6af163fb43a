// ONNX Runtime's own offline optimization of one model (the anchor of
// bench/optimize_compare.py). Usage: node bench/ort_optimize.js MODEL OUT [basic|extended|all]
// 'basic' keeps standard ONNX ops.
const ort = require(process.env.ORT_NODE || 'onnxruntime-node');

async function main() {
  const [model, out, level] = process.argv.slice(2);
  await ort.InferenceSession.create(model, {
    graphOptimizationLevel: level || 'basic', optimizedModelFilePath: out, intraOpNumThreads: 1});
}
main().catch((e) => { console.error(String(e)); process.exit(1); });
