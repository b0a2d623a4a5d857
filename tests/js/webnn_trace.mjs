// Runs a WebNN page runner (web/engines/webnn_*.js) under node against a fake WebNN that records
// every graph-builder call, for tests/test_webnn_traces.py: the graphs a job builds, call by call,
// with no browser. argv[2]: the page module's file URL; argv[3]: a folder holding spec.json
// (the job's spec), limits.json (the context's opSupportLimits()) and one file per tensor (its
// name). Prints {"reply": the page's reply without its samples and output, "builds": [[call, ...]
// per built graph]}, a call being "op(arguments) -> dataType[shape]" with operands named by their
// number in that graph, constants by dataType, shape and a digest of their bytes, except floating-point
// constants of at most SMALL elements (scales, epsilons), written by value: a calibrated scale's last
// bit follows the CPU that computed it, and the test compares such numbers at float32's precision.
import {createHash} from 'node:crypto';
import {readFileSync} from 'node:fs';
import {join} from 'node:path';

const [, , pageUrl, folder] = process.argv;
const spec = JSON.parse(readFileSync(join(folder, 'spec.json'), 'utf8'));
const limits = JSON.parse(readFileSync(join(folder, 'limits.json'), 'utf8'));
const builds = [];

const broadcast = (a, b) => {
  const n = Math.max(a.length, b.length);
  const pa = Array(n - a.length).fill(1).concat(a);
  const pb = Array(n - b.length).fill(1).concat(b);
  return pa.map((x, i) => (x === 1 ? pb[i] : x));
};
const reduced = (shape, axes, keep) => shape.flatMap((d, i) => (axes.includes(i) ? (keep ? [1] : []) : [d]));

// Output [dataType, shape] of each op from its operands' (an MLOperand here is {dataType, shape}).
const SHAPES = {
  input: (name, desc) => [desc.dataType, desc.shape],
  constant: (desc) => [desc.dataType, desc.shape],
  reshape: (x, shape) => [x.dataType, shape],
  transpose: (x, o = {}) => [x.dataType, (o.permutation || x.shape.map((_, i) => x.shape.length - 1 - i)).map((p) => x.shape[p])],
  matmul: (a, b) => [a.dataType, [...broadcast(a.shape.slice(0, -2), b.shape.slice(0, -2)), a.shape.at(-2), b.shape.at(-1)]],
  gemm: (a, b, o = {}) => [a.dataType, [o.aTranspose ? a.shape[1] : a.shape[0], o.bTranspose ? b.shape[0] : b.shape[1]]],
  gather: (x, idx, o = {}) => {
    const axis = o.axis || 0;
    return [x.dataType, [...x.shape.slice(0, axis), ...idx.shape, ...x.shape.slice(axis + 1)]];
  },
  slice: (x, starts, sizes) => [x.dataType, sizes],
  cast: (x, type) => [type, x.shape],
  pad: (x, begin, end) => [x.dataType, x.shape.map((d, i) => d + begin[i] + end[i])],
  concat: (xs, axis) => [xs[0].dataType, xs[0].shape.map((d, i) => (i === axis ? xs.reduce((s, x) => s + x.shape[i], 0) : d))],
  reduceSum: (x, o = {}) => [x.dataType, reduced(x.shape, o.axes ?? x.shape.map((_, i) => i), o.keepDimensions)],
  argMax: (x, axis, o = {}) => [o.outputDataType || 'int32', reduced(x.shape, [axis], o.keepDimensions)],
  conv2d: (x, w, o = {}) => {
    const [s0, s1] = o.strides || [1, 1];
    const [pt, pb, pl, pr] = o.padding || [0, 0, 0, 0];
    const h = Math.floor((x.shape[2] + pt + pb - w.shape[2]) / s0) + 1;
    const wd = Math.floor((x.shape[3] + pl + pr - w.shape[3]) / s1) + 1;
    return [x.dataType, [x.shape[0], w.shape[0], h, wd]];
  },
  dequantizeLinear: (x, scale) => [scale.dataType, x.shape],
  quantizeLinear: (x, scale, zero) => [zero.dataType, x.shape],
};
for (const op of ['add', 'sub', 'mul', 'div', 'max', 'min', 'pow']) SHAPES[op] = (a, b) => [a.dataType, broadcast(a.shape, b.shape)];
for (const op of ['softmax', 'gelu', 'sigmoid', 'sqrt', 'tanh', 'exp', 'neg', 'relu', 'layerNormalization', 'identity']) {
  SHAPES[op] = (x) => [x.dataType, x.shape];
}
SHAPES.reduceMean = SHAPES.reduceSum;
SHAPES.reduceL2 = SHAPES.reduceSum;

class Operand {
  constructor(id, dataType, shape) { this.id = id; this.dataType = dataType; this.shape = [...shape]; }
}

const digest = (view) => createHash('sha256')
    .update(Buffer.from(view.buffer, view.byteOffset, view.byteLength)).digest('hex').slice(0, 12);

const SMALL = 4;
const byValue = (view) => (view instanceof Float32Array || view instanceof Float64Array) && view.length <= SMALL;

function describe(value) {
  if (value instanceof Operand) return `%${value.id}`;
  if (ArrayBuffer.isView(value)) return byValue(value) ? `=[${Array.from(value).join(',')}]` : `<${digest(value)}>`;
  if (Array.isArray(value)) return `[${value.map(describe).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.keys(value).sort().map((k) => `${k}:${describe(value[k])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

class FakeBuilder {
  constructor() {
    this.calls = [];
    this.count = 0;
    return new Proxy(this, {
      get: (target, name) => {
        if (name in target) return target[name];
        if (!(name in SHAPES)) throw new Error(`the fake WebNN has no builder op ${String(name)}`);
        return (...args) => {
          const [dataType, shape] = SHAPES[name](...args);
          const out = new Operand(target.count++, dataType, shape);
          target.calls.push(`${name}(${args.map(describe).join(', ')}) -> ${dataType}[${shape.join(',')}]`);
          return out;
        };
      },
    });
  }

  async build(outputs) {
    this.calls.push(`build(${describe(outputs)})`);
    builds.push(this.calls);
    return {outputs: Object.keys(outputs)};
  }
}

const byteSize = (desc) => {
  const bytes = {float32: 4, int32: 4, uint32: 4, float16: 2, int8: 1, uint8: 1}[desc.dataType] || 1;
  return bytes * desc.shape.reduce((a, b) => a * b, 1);
};

class FakeContext {
  opSupportLimits() { return limits; }
  async createTensor(desc) { return {desc}; }
  writeTensor() {}
  dispatch() {}
  async readTensor(tensor) { return new ArrayBuffer(byteSize(tensor.desc)); }
  destroy() {}
}

globalThis.MLGraphBuilder = FakeBuilder;
Object.defineProperty(globalThis, 'navigator', {value: {ml: {createContext: async () => new FakeContext()}}});
const client = {tensor: async (name) => {
  const bytes = readFileSync(join(folder, name));
  return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
}};

const page = await import(pageUrl);
const reply = await page.run(spec, client);
for (const key of ['output', 'wall_ms', 'start_ms', 'gpu_ms', 'compile_ms', 'cold_ms', 'js_heap', 'decoder', 'speech']) {
  delete reply[key];
}
process.stdout.write(JSON.stringify({reply, builds}));
