// ONNX Runtime latency on one model (the yardstick of bench/ort_compare.py).
// Usage: node bench/ort_bench.js MODEL INPUTS.json RUNS THREADS
// INPUTS.json: {"name": {"dtype": "float32"|"int64"|"bool", "shape": [...], "values": [...] }}
// (values flattened; the same values onnxkit gets). Prints one JSON line.
const ort = require(process.env.ORT_NODE || 'onnxruntime-node');
const fs = require('fs');

async function main() {
  const [model, inputsPath, runsArg, threadsArg] = process.argv.slice(2);
  const runs = Number(runsArg || 20);
  const threads = Number(threadsArg || 1);
  const spec = JSON.parse(fs.readFileSync(inputsPath, 'utf8'));
  const feeds = {};
  for (const name of Object.keys(spec)) {
    const {dtype, shape, values} = spec[name];
    const data = dtype === 'int64' ? BigInt64Array.from(values.map((v) => BigInt(v)))
               : dtype === 'bool' ? Uint8Array.from(values.map((v) => (v ? 1 : 0)))
               : Float32Array.from(values);
    feeds[name] = new ort.Tensor(dtype, data, shape);
  }
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: 'sequential', graphOptimizationLevel: 'all'});
  for (let i = 0; i < 3; i++) await session.run(feeds);
  const times = [];
  for (let i = 0; i < runs; i++) {
    const start = process.hrtime.bigint();
    await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  times.sort((a, b) => a - b);
  const pick = (p) => times[Math.min(times.length - 1, Math.floor(p * (times.length - 1) + 0.5))];
  console.log(JSON.stringify({min: times[0], median: pick(0.5), p90: pick(0.9)}));
}
main().catch((e) => { console.error(String(e)); process.exit(1); });
