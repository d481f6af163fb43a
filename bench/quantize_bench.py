#!/usr/bin/env python3
"""Benchmark of `onnxkit quantize` (no numpy needed).

For each model and method: quantize on N seeded random samples
(--allow-random-calibration), read the output SQNR vs float32 from the
report, then check that ONNX Runtime runs the QDQ model with outputs close to
onnxkit's reference backend on the same model (ORT_NODE, bench/ort_outputs.js).
Also measures calibration memory: peak RSS with 16 vs 256 samples (--memory),
and runs `onnxkit check --full` and onnx.checker (full_check) on every result.

Usage: bench/quantize_bench.py [--onnxkit BIN] [--samples 32] [--models a.onnx ...]
"""
import argparse, glob, json, math, os, random, struct, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPES = {'bert_mini': ['input_ids=1x64', 'attention_mask=1x64', 'token_type_ids=1x64'],
          'bert_base': ['input_ids=1x64', 'attention_mask=1x64', 'token_type_ids=1x64']}


def varint(b, i):
    r = s = 0
    while True:
        c = b[i]; i += 1; r |= (c & 0x7f) << s; s += 7
        if c < 0x80: return r, i


def read_tensor(path):
    """dims and float values of a float TensorProto (.pb)."""
    b = open(path, 'rb').read(); i = 0; dims = []; raw = b''; floats = []
    while i < len(b):
        key, i = varint(b, i); field, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(b, i)
            if field == 1: dims.append(v)
        elif wt == 2:
            n, i = varint(b, i); chunk = b[i:i + n]; i += n
            if field == 9: raw = chunk
            elif field == 4: floats = list(struct.unpack('<%df' % (n // 4), chunk))
            elif field == 1:
                j = 0
                while j < len(chunk): v, j = varint(chunk, j); dims.append(v)
        elif wt == 5: i += 4
        elif wt == 1: i += 8
    if raw: floats = list(struct.unpack('<%df' % (len(raw) // 4), raw))
    return dims, floats


def write_npy(path, dtype, shape, values):
    code = {'float32': '<f4', 'int64': '<i8'}[dtype]
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        code, ''.join('%d, ' % d for d in shape))
    header += ' ' * (63 - (len(header) + 10) % 64) + '\n'
    fmt = '<%d%s' % (len(values), 'f' if dtype == 'float32' else 'q')
    with open(path, 'wb') as f:
        f.write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(header)) + header.encode() + struct.pack(fmt, *values))


def model_inputs(bin_, model, shapes):
    out = subprocess.run([bin_, 'inspect', model, '--json'], capture_output=True, text=True).stdout
    ins = json.loads(out).get('inputs', [])
    fixed = {s.split('=')[0]: [int(d) for d in s.split('=')[1].split('x')] for s in shapes}
    res = []
    for x in ins:
        if x.get('initializer'): continue
        dims = fixed.get(x['name']) or [d if isinstance(d, int) and d > 0 else 1 for d in x.get('shape', [])]
        res.append((x['name'], 'int64' if 'int64' in json.dumps(x) else 'float32', dims))
    return res


def ort_agreement(bin_, qmodel, shapes, work):
    res = {}
    for level in ('disabled', 'all'):
        for k, v in ort_agreement_at(bin_, qmodel, shapes, work, level).items():
            res['%s_%s' % (k, level)] = v
    return res


def ort_agreement_at(bin_, qmodel, shapes, work, level):
    rnd = random.Random(7); spec = {}; flags = []
    for name, dtype, dims in model_inputs(bin_, qmodel, shapes):
        n = math.prod(dims)
        vals = [rnd.randint(0, 1) for _ in range(n)] if dtype == 'int64' else [rnd.random() for _ in range(n)]
        spec[name] = {'dtype': dtype, 'shape': dims, 'values': vals}
        npy = os.path.join(work, 'in%d.npy' % len(spec))
        write_npy(npy, dtype, dims, vals)
        flags += ['--input', '%s=%s' % (name, npy)]
    json.dump(spec, open(os.path.join(work, 'in.json'), 'w'))
    r = subprocess.run(['node', os.path.join(ROOT, 'bench/ort_outputs.js'), qmodel, os.path.join(work, 'in.json'),
                        os.path.join(work, 'ort.json'), level], capture_output=True, text=True)
    if r.returncode != 0: return {'ort_error': r.stderr[-400:]}
    outdir = os.path.join(work, 'ok'); subprocess.run([bin_, 'run', qmodel, *flags, '--backend', 'reference', '--save-outputs', outdir, '-q'], check=True)
    ort = json.load(open(os.path.join(work, 'ort.json')))
    worst = 0.0; sq = []
    for k, o in enumerate(ort):
        _, mine = read_tensor(os.path.join(outdir, 'output_%d.pb' % k))
        sig = sum(v * v for v in mine) or 1e-30
        noise = sum((a - b) ** 2 for a, b in zip(mine, o['values'])) or 1e-30
        worst = max(worst, max(abs(a - b) for a, b in zip(mine, o['values'])))
        sq.append(10 * math.log10(sig / noise))
    return {'ort_max_abs': worst, 'ort_vs_onnxkit_sqnr_db': min(sq)}


def upgrade(bin_, model, work):
    """Models below opset 10 (no QuantizeLinear) go through optimize + convert --opset 13 first."""
    out = subprocess.run([bin_, 'inspect', model, '--json'], capture_output=True, text=True).stdout
    try:
        version = 99
        for o in json.loads(out).get('opset_import', []):
            if o.get('domain', '') in ('', 'ai.onnx'): version = o.get('version', 99)
    except ValueError:
        return model
    if version >= 10: return model
    base = os.path.join(work, os.path.basename(model)[:-5])
    subprocess.run([bin_, 'optimize', model, '-o', base + '.opt.onnx', '-q'], check=True)
    subprocess.run([bin_, 'convert', base + '.opt.onnx', '--opset', '13', '-o', base + '.13.onnx'], check=True,
                   capture_output=True)
    return base + '.13.onnx'


def onnx_checker(path):
    """python3-onnx's full check (Debian's /usr/bin/python3 carries it), or 'unavailable'."""
    code = 'import onnx,sys; onnx.checker.check_model(onnx.load(sys.argv[1]), full_check=True)'
    try:
        r = subprocess.run(['/usr/bin/python3', '-c', code, path], capture_output=True, text=True)
    except OSError:
        return 'unavailable'
    if 'No module named' in r.stderr: return 'unavailable'
    return 'ok' if r.returncode == 0 else r.stderr.strip().splitlines()[-1][:200]


def quantize(bin_, model, method, samples, shapes, out, report):
    cmd = [bin_, 'quantize', model, '-o', out, '--allow-random-calibration', '--samples', str(samples),
           '--method', method, '--report', report, '-q'] + sum([['--shape', s] for s in shapes], [])
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0: return {'error': r.stderr.strip()[-300:]}
    rep = json.load(open(report))
    return {'sqnr_db': rep['output_sqnr_db'], 'peak_rss_mb': rep['peak_rss_mb'],
            'top1': [o.get('top1_agreement') for o in rep['outputs']]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--onnxkit', default=os.path.join(ROOT, 'build/apps/onnxkit/onnxkit'))
    ap.add_argument('--samples', type=int, default=32)
    ap.add_argument('--methods', default='minmax,entropy')
    ap.add_argument('--models', nargs='*')
    ap.add_argument('--no-ort', action='store_true')
    ap.add_argument('--memory', action='store_true', help='also compare peak RSS of 16 vs 256 samples')
    a = ap.parse_args()
    models = a.models or ([os.path.join(ROOT, 'bench/models', m + '.onnx') for m in ('resnet50', 'mobilenet_v2', 'bert_mini')]
                          + sorted(glob.glob(os.path.join(ROOT, 'testdata/models/light/*.onnx'))))
    work = tempfile.mkdtemp(prefix='quant_bench_')
    rows = []
    for m in models:
        base = os.path.basename(m)[:-5]; shapes = SHAPES.get(base, [])
        m = upgrade(a.onnxkit, m, work)
        for method in a.methods.split(','):
            out = os.path.join(work, '%s.%s.onnx' % (base, method))
            row = {'model': base, 'method': method}
            row.update(quantize(a.onnxkit, m, method, a.samples, shapes, out, out + '.json'))
            if 'error' not in row:
                row['onnx_checker'] = onnx_checker(out)
                chk = subprocess.run([a.onnxkit, 'check', '--full', out], capture_output=True, text=True)
                row['onnxkit_check_full'] = 'ok' if chk.returncode == 0 else 'exit %d' % chk.returncode
            if 'error' not in row and not a.no_ort and method == a.methods.split(',')[0]:
                d = os.path.join(work, base + '_ort'); os.makedirs(d, exist_ok=True)
                try:
                    row.update(ort_agreement(a.onnxkit, out, shapes, d))
                except (OSError, subprocess.CalledProcessError, ValueError, KeyError) as e:
                    row['ort_error'] = str(e)[:200]
            rows.append(row); print(json.dumps(row), flush=True)
        if a.memory:
            r16 = quantize(a.onnxkit, m, 'entropy', 16, shapes, os.path.join(work, 'm16.onnx'), os.path.join(work, 'm16.json'))
            r256 = quantize(a.onnxkit, m, 'entropy', 256, shapes, os.path.join(work, 'm256.onnx'), os.path.join(work, 'm256.json'))
            print(json.dumps({'model': base, 'rss16_mb': r16.get('peak_rss_mb'), 'rss256_mb': r256.get('peak_rss_mb')}), flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
