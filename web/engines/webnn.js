// WebNN runner of the matmul kind: out = x @ W^T as one linear layer of webnn_graph.js (the graph
// forms, int8 activations and the output's quantizeLinear -> dequantizeLinear are the models'
// own), with the data types and form Python chose (engines/webnn/matmul.py). Times the build
// apart from compute, then warm-ups and timed dispatch + readTensor iterations (readTensor is the
// sync point), and returns the output read back once.
import {jsHeap} from '../memory.js';
import {timeIterations, timingReply} from '../timing.js';
import {FORMS, errorText, linearLayers, openContext} from './webnn_graph.js';

const LAYER = 'matmul';

export async function run(spec, client) {
  const nn = spec.options;
  const {m, k, n} = nn;
  const form = nn.graph_form || 'transpose';
  if (!FORMS.includes(form)) return {status: 'failed', stage: 'setup', reason: `unknown graph_form ${form}`};
  const {context, reply} = await openContext(nn);
  if (reply) return reply;
  let stage = 'tensor fetch';
  try {
    const tensors = {};
    for (const name of spec.bindings) tensors[name] = await client.tensor(name);
    for (const part of ['w', 'scales', 'zero_points']) {
      if (tensors[part]) tensors[`${LAYER}.${part}`] = tensors[part];
    }
    stage = 'graph building';
    const tBuild = performance.now();
    const builder = new MLGraphBuilder(context);
    const x = builder.input('x', {dataType: 'float32', shape: [m, k]});
    const linears = [{name: LAYER, k, n, act: nn.act || null, out: nn.out || null}];
    const plans = [{weight_dtype: nn.weight_dtype, scale_dtype: nn.scale_dtype,
                    zero_point_dtype: nn.zero_point_dtype, matmul_dtype: nn.matmul_dtype,
                    block_size: nn.block_size}];
    const {linear, layerFacts} = linearLayers(builder, tensors, {linears, plans, form, act: nn.webnn_act});
    const out = linear(x, 0);
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
    const timed = await timeIterations(spec, once);
    const output = await context.readTensor(outTensor);
    const heap = await jsHeap();
    return {
      status: 'ok',
      shader: '',
      compute_dtype: nn.matmul_dtype === 'float16' ? 'f16' : 'f32',
      weight_operand_dtype: layerFacts[0].weight_dtype,
      layers: layerFacts,
      timestamp_query: false,
      compile_ms: buildMs,
      ...timingReply(timed),
      js_heap: heap,
      output,
    };
  } catch (e) {
    return {status: 'failed', stage, reason: `WebNN ${stage} error: ${errorText(e)}`};
  } finally {
    if (context.destroy) context.destroy();
  }
}
