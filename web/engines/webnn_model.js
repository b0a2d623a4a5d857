// WebNN whole-model runner: ONE MLGraph for a BERT-style encoder's forward pass (embeddings,
// every layer, mean pooling, L2 normalisation), with dequantizeLinear -> matmul/gemm for every
// quantized linear layer and WebNN ops for the rest. The data types of each layer were chosen in
// Python (engines/webnn/encoder.py); the page builds exactly that and reports the dataType of each
// layer's stored weight operand. The forward is the architecture's graph (architectures/bert/graph.py),
// lowered by engines/webnn/lower.py and built op by op by webnn_ops.js.
//
// Graph forms of a linear layer (options.graph_form) and int8 activations: see webnn_graph.js.
import {timeIterations} from '../timing.js';
import {errorText, linearLayers, modelReply, openModel, typedView} from './webnn_graph.js';
import {buildOps} from './webnn_ops.js';

// Each pass's input tensors (its rows of every int32 input, [B, S]) and an output tensor [B, H].
async function passTensors(context, nn, tensors, passes, inShape, outShape) {
  const elements = inShape[0] * inShape[1];
  const passInputs = [];
  const passOutputs = [];
  for (let pass = 0; pass < passes; pass++) {
    const feeds = {};
    for (const name of nn.inputs) {
      const t = await context.createTensor({dataType: 'int32', shape: inShape, writable: true});
      context.writeTensor(t, typedView('int32', tensors[name], elements, pass * elements * 4));
      feeds[name] = t;
    }
    passInputs.push(feeds);
    passOutputs.push(await context.createTensor({dataType: 'float32', shape: outShape, readable: true}));
  }
  return {passInputs, passOutputs};
}

export async function run(spec, client) {
  const opened = await openModel(spec, client);
  if (opened.reply) return opened.reply;
  const {nn, form, linears, plans, context, tensors} = opened;
  const cfg = nn.model;
  const B = cfg.batch, S = cfg.seq, H = cfg.hidden;
  const passes = cfg.passes;
  let stage = 'tensor fetch';
  try {
    stage = 'graph building';
    const tBuild = performance.now();
    const builder = new MLGraphBuilder(context);
    const f32 = (buffer, shape, elements) =>
      builder.constant({dataType: 'float32', shape}, typedView('float32', buffer, elements));
    const scalar = (value) => builder.constant({dataType: 'float32', shape: []}, new Float32Array([value]));
    const param = (name, shape) => {
      const elements = shape.reduce((a, b) => a * b, 1);
      if (!tensors[name]) throw new Error(`tensor ${name} was not sent`);
      return f32(tensors[name], shape, elements);
    };

    const {linear, layerFacts} = linearLayers(builder, tensors, {linears, plans, form, act: nn.webnn_act});
    // Inputs of one forward pass: int32 [B, S] each; the mask also as float32.
    const ids = builder.input('input_ids', {dataType: 'int32', shape: [B, S]});
    const maskIn = builder.input('attention_mask', {dataType: 'int32', shape: [B, S]});
    const types = builder.input('token_type_ids', {dataType: 'int32', shape: [B, S]});
    const env = {'pass.input_ids': ids, 'pass.attention_mask': builder.cast(maskIn, 'float32'), 'pass.token_type_ids': types};
    let used = 0;
    buildOps(builder, nn.ops, env, {
      param, scalar,
      rows: (name, rows, width) => f32(tensors[name], [rows, width], rows * width),
      linear: (x, index) => { used++; return linear(x, index); },
    });
    if (used !== linears.length) throw new Error(`the graph used ${used} linear layers, the job lists ${linears.length}`);
    const out = env[nn.result];
    stage = 'build';
    const graph = await builder.build({out});
    const buildMs = performance.now() - tBuild;

    stage = 'dispatch';
    const {passInputs, passOutputs} = await passTensors(context, nn, tensors, passes, [B, S], [B, H]);
    const once = async (_index) => {
      const t0 = performance.now();
      context.dispatch(graph, passInputs[0], {out: passOutputs[0]});
      await context.readTensor(passOutputs[0]);
      return performance.now() - t0;
    };
    const timed = await timeIterations(spec, once);
    for (let pass = 0; pass < passes; pass++) context.dispatch(graph, passInputs[pass], {out: passOutputs[pass]});
    const output = new Float32Array(passes * B * H);
    for (let pass = 0; pass < passes; pass++) {
      output.set(new Float32Array(await context.readTensor(passOutputs[pass])), pass * B * H);
    }
    return {
      ...await modelReply({form, plans, layers: layerFacts, gpuNote: 'WebNN has no GPU timestamps', compileMs: buildMs,
                           timed}),
      output: output.buffer,
    };
  } catch (e) {
    return {status: 'failed', stage, reason: `WebNN ${stage} error: ${errorText(e)}`};
  } finally {
    if (context.destroy) context.destroy();
  }
}
