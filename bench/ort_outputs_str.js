// ONNX Runtime's outputs of one model, string tensors allowed.
// Usage: node bench/ort_outputs_str.js MODEL INPUTS.json OUT.json
// INPUTS.json: {name: {dtype, shape, values}} with dtype float32, float64,
// int32, int64 or string; OUT.json gets [{"name", "dtype", "dims", "values"}]
// in output order.
const ort = require(process.env.ORT_NODE || 'onnxruntime-node');
const fs = require('fs');

async function main() {
  const [model, inputsPath, outPath] = process.argv.slice(2);
  const spec = JSON.parse(fs.readFileSync(inputsPath, 'utf8'));
  const feeds = {};
  for (const name of Object.keys(spec)) {
    const {dtype, shape, values} = spec[name];
    const arrays = {float32: Float32Array, float64: Float64Array, int32: Int32Array};
    let data;
    if (dtype === 'int64') data = BigInt64Array.from(values.map((v) => BigInt(v)));
    else if (dtype === 'string') data = values;
    else data = arrays[dtype].from(values);
    feeds[name] = new ort.Tensor(dtype, data, shape);
  }
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: 1, interOpNumThreads: 1, graphOptimizationLevel: 'disabled'});
  const result = await session.run(feeds);
  const out = session.outputNames.map((name) => {
    const t = result[name];
    const values = Array.from(t.data, (v) => (typeof v === 'bigint' ? Number(v) : v));
    return {name, dtype: t.type, dims: t.dims, values};
  });
  fs.writeFileSync(outPath, JSON.stringify(out));
}
main().catch((e) => { console.error(String(e)); process.exit(1); });
