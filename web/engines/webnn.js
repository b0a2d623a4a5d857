// WebNN runner: builds out = x @ transpose(dequantize(W)) with the data types Python chose,
// times build apart from compute, then warm-ups and timed dispatch + readTensor iterations
// (readTensor is the sync point), and returns the output read back once.
import {jsHeap} from '../memory.js';
import {timeIterations} from '../timing.js';
import {errorText, openContext, typedView} from './webnn_graph.js';

export async function run(spec, client) {
  const nn = spec.options;
  const {m, k, n} = spec.options;
  const {context, reply} = await openContext(nn);
  if (reply) return reply;
  let stage = 'tensor fetch';
  try {
    const tensors = {};
    for (const name of spec.bindings) tensors[name] = await client.tensor(name);
    stage = 'graph building';
    const tBuild = performance.now();
    const builder = new MLGraphBuilder(context);
    const x = builder.input('x', {dataType: 'float32', shape: [m, k]});
    let weight;
    let stored;  // the operand holding the weights as stored: its dataType is what runs
    if (nn.weight_dtype === 'float32' || nn.weight_dtype === 'float16') {
      weight = builder.constant({dataType: nn.weight_dtype, shape: [n, k]},
                                typedView(nn.weight_dtype, tensors.w, n * k));
      stored = weight;
    } else {
      const blocks = k / nn.block_size;
      const q = builder.constant({dataType: nn.weight_dtype, shape: [n, k]},
                                 typedView(nn.weight_dtype, tensors.w, n * k));
      const scale = builder.constant({dataType: nn.scale_dtype, shape: [n, blocks]},
                                     typedView(nn.scale_dtype, tensors.scales, n * blocks));
      const zeroPoint = builder.constant({dataType: nn.zero_point_dtype, shape: [n, blocks]},
                                         typedView(nn.zero_point_dtype, tensors.zero_points, n * blocks));
      weight = builder.dequantizeLinear(q, scale, zeroPoint);
      stored = q;
    }
    let lhs = x;
    if (nn.matmul_dtype !== nn.weight_dtype && (nn.weight_dtype === 'float16')) {
      weight = builder.cast(weight, nn.matmul_dtype);
    }
    if (nn.matmul_dtype === 'float16') {
      lhs = builder.cast(x, 'float16');
      if (nn.weight_dtype !== 'float16') weight = builder.cast(weight, 'float16');
    }
    let out = builder.matmul(lhs, builder.transpose(weight));
    if (nn.matmul_dtype !== 'float32') out = builder.cast(out, 'float32');
    stage = 'build';
    const graph = await builder.build({out});
    const buildMs = performance.now() - tBuild;

    stage = 'dispatch';
    const xTensor = await context.createTensor({dataType: 'float32', shape: [m, k], writable: true});
    context.writeTensor(xTensor, new Float32Array(tensors.x));
    const outTensor = await context.createTensor({dataType: 'float32', shape: [m, n], readable: true});
    const once = async (_index) => {
      const t0 = performance.now();
      context.dispatch(graph, {x: xTensor}, {out: outTensor});
      await context.readTensor(outTensor);
      return performance.now() - t0;
    };
    const {coldMs, wallMs} = await timeIterations(spec, once);
    const output = await context.readTensor(outTensor);
    const heap = await jsHeap();
    return {
      status: 'ok',
      shader: '',
      compute_dtype: nn.matmul_dtype === 'float16' ? 'f16' : 'f32',
      weight_operand_dtype: String(stored.dataType),
      timestamp_query: false,
      compile_ms: buildMs,
      cold_ms: coldMs,
      wall_ms: wallMs,
      gpu_ms: null,
      gpu_buffer_bytes: null,
      js_heap: heap,
      output,
    };
  } catch (e) {
    return {status: 'failed', stage, reason: `WebNN ${stage} error: ${errorText(e)}`};
  } finally {
    if (context.destroy) context.destroy();
  }
}
