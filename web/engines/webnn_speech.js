// Whisper as the harness's own WebNN graphs (engines/webnn/speech.py chose every layer's data
// types). Three graphs with static shapes, built from the same tensors:
//   encoder  Python's log-mel features [1, mels, 1, frames] -> conv2d (1 x 3, padding 1) + GELU,
//            conv2d (stride 2) + GELU, + sinusoidal positions, the pre-norm layers, the final
//            layer norm ("encoder_out" [positions, d]); then every decoder layer's cross-attention
//            keys and values ("cross.<layer>.k/v", [heads, positions, head_dim]);
//   prompt   the prompt's P rows from position 0: the greedy id of the last row (argMax over the
//            first position's suppress bias), its logits, and every layer's keys and values padded
//            with zeros to the cache's C positions ("present.<layer>.k/v", [heads, C, head_dim]);
//   decode   one row at position p: its id, the caches ("past.*"), p's one-hot slot and mask;
//            the next id (the later positions' bias) and the caches with row p written.
// Per clip: the features written, the encoder dispatched and a one-value probe of its output read
// (the encoder's time), the prompt, then one step per id until the end of text or max_tokens, each
// new id read back (the per-token timestamps). The cross keys and values, the caches (two sets,
// read one and write the other) and each new id stay MLTensors. The first transcription (clip 0,
// cold) also reads its encoder output and first logits for the checks in Python. Timed iterations
// take the clips in turn; clips no timed iteration reached are transcribed afterwards, untimed.
// The forward is architectures/whisper/reference.py. Returns raw samples and facts.
import {jsHeap} from '../memory.js';
import {timeTranscriptions, writeTranscripts} from '../transcription.js';
import {errorText, linearLayers, openModel, typedView} from './webnn_graph.js';
import {timingReply} from '../timing.js';

const MASKED = -1e30;  // an additive attention mask's value for a position a row may not see
const EPS = 1e-5;

function product(shape) { return shape.reduce((a, b) => a * b, 1); }

export async function run(spec, client) {
  const opened = await openModel(spec, client);
  if (opened.reply) return opened.reply;
  const {nn, form, linears, plans, context, tensors} = opened;
  const cfg = nn.model;
  const d = cfg.d_model, heads = cfg.heads, D = cfg.head_dim, V = cfg.vocab, S = cfg.source_positions;
  const M = cfg.mels, F = 2 * S, L = cfg.decoder_layers, C = nn.context, P = nn.prompt.rows;
  const index = new Map(linears.map((l, i) => [l.name, i]));
  let stage = 'tensor fetch';
  try {
    const features = new Float32Array(tensors.features);
    if (features.length !== nn.clips * M * F) throw new Error(`features hold ${features.length} values, not ${nn.clips} clips`);
    const repacked = new Map();
    let constantMs = 0;
    let buildMs = 0;

    const newGraph = () => {
      const builder = new MLGraphBuilder(context);
      const {linear, layerFacts} = linearLayers(builder, tensors, {linears, plans, form, act: null, repacked});
      const g = {builder, layerFacts, floatBytes: 0};
      g.lin = (x, name) => {
        if (!index.has(name)) throw new Error(`the job lists no linear layer ${name}`);
        return linear(x, index.get(name));
      };
      g.param = (name, shape) => {
        if (!tensors[name]) throw new Error(`tensor ${name} was not sent`);
        g.floatBytes += product(shape) * 4;
        return builder.constant({dataType: 'float32', shape}, typedView('float32', tensors[name], product(shape)));
      };
      g.scalar = (value) => builder.constant({dataType: 'float32', shape: []}, new Float32Array([value]));
      g.norm = (x, name) => builder.layerNormalization(x, {
        scale: g.param(`${name}.weight`, [d]), bias: g.param(`${name}.bias`, [d]), axes: [1], epsilon: EPS});
      // softmax(q k^T / sqrt(D)) v per head: q [h, rows, D], k and v [h, keys, D] -> [rows, d]
      g.attend = (q, k, v, keys, mask) => {
        const rows = q.shape[1];
        let scores = builder.mul(builder.matmul(q, builder.transpose(k, {permutation: [0, 2, 1]})), g.scalar(1 / Math.sqrt(D)));
        if (mask) scores = builder.add(scores, mask);
        const probs = builder.reshape(builder.softmax(builder.reshape(scores, [heads * rows, keys]), 1), [heads, rows, keys]);
        return builder.reshape(builder.transpose(builder.matmul(probs, v), {permutation: [1, 0, 2]}), [rows, d]);
      };
      g.heads = (x, rows) => builder.transpose(builder.reshape(x, [rows, heads, D]), {permutation: [1, 0, 2]});
      g.mlp = (x, pre) => builder.add(x, g.lin(builder.gelu(g.lin(g.norm(x, `${pre}final_layer_norm`), `${pre}fc1`)),
                                              `${pre}fc2`));
      return g;
    };
    const build = async (g, outputs, label) => {
      stage = 'build';
      const t = performance.now();
      const graph = await g.builder.build(outputs);
      buildMs += performance.now() - t;
      stage = 'graph building';
      return {graph, layerFacts: g.layerFacts, floatBytes: g.floatBytes, label};
    };

    // The encoder, with every decoder layer's cross-attention keys and values.
    stage = 'graph building';
    let t0 = performance.now();
    const e = newGraph();
    const eb = e.builder;
    const conv = (x, name, stride) => eb.gelu(eb.conv2d(x, eb.reshape(e.param(`${name}.weight`, [d, x.shape[1], 3]),
                                                                          [d, x.shape[1], 1, 3]),
                                                        {padding: [0, 0, 1, 1], strides: [1, stride],
                                                         bias: e.param(`${name}.bias`, [d])}));
    const featuresIn = eb.input('features', {dataType: 'float32', shape: [1, M, 1, F]});
    const c2 = conv(conv(featuresIn, 'model.encoder.conv1', 1), 'model.encoder.conv2', 2);  // [1, d, 1, S]
    let x = eb.add(eb.transpose(eb.reshape(c2, [d, S])), e.param('model.encoder.embed_positions.weight', [S, d]));
    for (let i = 0; i < cfg.encoder_layers; i++) {
      const pre = `model.encoder.layers.${i}.`;
      const h = e.norm(x, `${pre}self_attn_layer_norm`);
      const ctx = e.attend(e.heads(e.lin(h, `${pre}self_attn.q_proj`), S), e.heads(e.lin(h, `${pre}self_attn.k_proj`), S),
                           e.heads(e.lin(h, `${pre}self_attn.v_proj`), S), S, null);
      x = e.mlp(eb.add(x, e.lin(ctx, `${pre}self_attn.out_proj`)), pre);
    }
    const enc = e.norm(x, 'model.encoder.layer_norm');
    const encOutputs = {encoder_out: enc, probe: eb.slice(enc, [0, 0], [1, 1])};
    for (let i = 0; i < L; i++) {
      const pre = `model.decoder.layers.${i}.encoder_attn.`;
      encOutputs[`cross.${i}.k`] = e.heads(e.lin(enc, `${pre}k_proj`), S);
      encOutputs[`cross.${i}.v`] = e.heads(e.lin(enc, `${pre}v_proj`), S);
    }
    constantMs += performance.now() - t0;
    const encoder = await build(e, encOutputs, 'encoder');

    // The decoder over `rows` rows: 'prompt' (from position 0) or 'decode' (one row at a position).
    const decoderGraph = async (kind, rows) => {
      stage = 'graph building';
      const t = performance.now();
      const g = newGraph();
      const b = g.builder;
      const decode = kind === 'decode';
      const keys = decode ? C : rows;
      const positions = g.param('model.decoder.embed_positions.weight', [cfg.target_positions, d]);
      let pos, mask, slot;
      if (decode) {
        pos = b.gather(positions, b.input('position', {dataType: 'int32', shape: [1]}), {axis: 0});
        mask = b.reshape(b.input('mask', {dataType: 'float32', shape: [1, C]}), [1, 1, C]);
        slot = b.input('slot', {dataType: 'float32', shape: [1, C, 1]});
      } else {
        pos = b.slice(positions, [0, 0], [rows, d]);
        const causal = new Float32Array(rows * rows);
        for (let r = 0; r < rows; r++) for (let c = r + 1; c < rows; c++) causal[r * rows + c] = MASKED;
        mask = b.constant({dataType: 'float32', shape: [1, rows, rows]}, causal);
      }
      const ids = b.input('ids', {dataType: 'int32', shape: [rows]});
      let y = b.add(b.gather(g.param('model.decoder.embed_tokens.weight', [V, d]), ids, {axis: 0}), pos);
      const outputs = {};
      const one = g.scalar(1);
      for (let i = 0; i < L; i++) {
        const pre = `model.decoder.layers.${i}.`;
        let h = g.norm(y, `${pre}self_attn_layer_norm`);
        let k = g.heads(g.lin(h, `${pre}self_attn.k_proj`), rows);  // [heads, rows, D]
        let v = g.heads(g.lin(h, `${pre}self_attn.v_proj`), rows);
        if (decode) {  // row p written into the cache: past * (1 - slot) + slot * new, [heads, C, D]
          const keep = b.sub(one, slot);
          k = b.add(b.mul(b.input(`past.${i}.k`, {dataType: 'float32', shape: [heads, C, D]}), keep), b.mul(slot, k));
          v = b.add(b.mul(b.input(`past.${i}.v`, {dataType: 'float32', shape: [heads, C, D]}), keep), b.mul(slot, v));
          outputs[`present.${i}.k`] = k;
          outputs[`present.${i}.v`] = v;
        } else {
          outputs[`present.${i}.k`] = b.pad(k, [0, 0, 0], [0, C - rows, 0]);
          outputs[`present.${i}.v`] = b.pad(v, [0, 0, 0], [0, C - rows, 0]);
        }
        let ctx = g.attend(g.heads(g.lin(h, `${pre}self_attn.q_proj`), rows), k, v, keys, mask);
        y = b.add(y, g.lin(ctx, `${pre}self_attn.out_proj`));
        h = g.norm(y, `${pre}encoder_attn_layer_norm`);
        ctx = g.attend(g.heads(g.lin(h, `${pre}encoder_attn.q_proj`), rows),
                       b.input(`cross.${i}.k`, {dataType: 'float32', shape: [heads, S, D]}),
                       b.input(`cross.${i}.v`, {dataType: 'float32', shape: [heads, S, D]}), S, null);
        y = g.mlp(b.add(y, g.lin(ctx, `${pre}encoder_attn.out_proj`)), pre);
      }
      const logits = g.lin(g.norm(b.slice(y, [rows - 1, 0], [1, d]), 'model.decoder.layer_norm'), 'proj_out');
      const bias = b.constant({dataType: 'float32', shape: [1, V]},
                              typedView('float32', tensors[decode ? 'suppress.rest' : 'suppress.first'], V));
      outputs.id = b.argMax(b.add(logits, bias), 1, {keepDimensions: false, outputDataType: 'int32'});
      if (!decode) outputs.logits = logits;
      constantMs += performance.now() - t;
      return build(g, outputs, kind);
    };
    const prompt = await decoderGraph('prompt', P);
    const decode = await decoderGraph('decode', 1);
    const unused = linears.filter((l) => !encoder.layerFacts[index.get(l.name)] && !decode.layerFacts[index.get(l.name)]);
    if (unused.length) throw new Error(`no graph runs linear layer ${unused[0].name}`);

    stage = 'tensors';
    const tensor = (shape, flags = {}, dataType = 'float32') => context.createTensor({dataType, shape, ...flags});
    const featuresT = await tensor([1, M, 1, F], {writable: true});
    const encOut = await tensor([S, d], {readable: true});
    const probe = await tensor([1, 1], {readable: true});
    const cross = {};
    for (let i = 0; i < L; i++) for (const part of ['k', 'v']) cross[`cross.${i}.${part}`] = await tensor([heads, S, D]);
    const caches = [{}, {}];
    for (const set of caches) {
      for (let i = 0; i < L; i++) for (const part of ['k', 'v']) set[`${i}.${part}`] = await tensor([heads, C, D]);
    }
    const idTensors = [];
    for (let i = 0; i < 2; i++) idTensors.push(await tensor([1], {readable: true}, 'int32'));
    const promptIds = await tensor([P], {writable: true}, 'int32');
    context.writeTensor(promptIds, typedView('int32', tensors[nn.prompt.tensor], P));
    const logitsT = await tensor([1, V], {readable: true});
    const position = await tensor([1], {writable: true}, 'int32');
    const mask = await tensor([1, C], {writable: true});
    const slot = await tensor([1, C, 1], {writable: true});
    const maskData = new Float32Array(C);
    const slotData = new Float32Array(C);
    for (const name of Object.keys(tensors)) if (name !== 'features') delete tensors[name];
    repacked.clear();
    // Each cache set named as a graph's inputs (past) and outputs (present), made once.
    const named = (set, prefix) => {
      const out = {};
      for (let i = 0; i < L; i++) for (const part of ['k', 'v']) out[`${prefix}.${i}.${part}`] = caches[set][`${i}.${part}`];
      return out;
    };
    const cacheIO = [0, 1].map((set) => ({past: named(set, 'past'), present: named(set, 'present')}));
    const readId = async (t) => new Int32Array(await context.readTensor(t))[0];

    const output = new ArrayBuffer(spec.output_bytes);
    const encBytes = 4 * S * d;
    const transcribe = async (c, check) => {
      const start = performance.now();
      context.writeTensor(featuresT, features.subarray(c * M * F, (c + 1) * M * F));
      context.dispatch(encoder.graph, {features: featuresT}, {encoder_out: encOut, probe, ...cross});
      await context.readTensor(probe);
      const t1 = performance.now();
      if (check) new Uint8Array(output, 0, encBytes).set(new Uint8Array(await context.readTensor(encOut)));
      const t1b = performance.now();
      context.dispatch(prompt.graph, {ids: promptIds, ...cross}, {id: idTensors[0], logits: logitsT, ...cacheIO[0].present});
      let id = await readId(idTensors[0]);
      const t2 = performance.now();
      if (check) new Uint8Array(output, encBytes, 4 * V).set(new Uint8Array(await context.readTensor(logitsT)));
      const ids = [];
      const tokenMs = [];
      let last = performance.now();
      const checksMs = (t1b - t1) + (last - t2);  // reading the checks out is not the clip's time
      while (id !== nn.eot) {
        ids.push(id);
        if (ids.length >= nn.max_tokens) break;
        const p = P + ids.length - 1;  // the position of the id the last step wrote
        const from = (ids.length - 1) % 2, to = ids.length % 2;
        maskData.fill(MASKED);
        maskData.fill(0, 0, p + 1);
        slotData.fill(0);
        slotData[p] = 1;
        context.writeTensor(position, new Int32Array([p]));
        context.writeTensor(mask, maskData);
        context.writeTensor(slot, slotData);
        context.dispatch(decode.graph, {ids: idTensors[from], position, mask, slot, ...cross, ...cacheIO[from].past},
                         {id: idTensors[to], ...cacheIO[to].present});
        id = await readId(idTensors[to]);
        const now = performance.now();
        tokenMs.push(now - last);
        last = now;
      }
      return {clip: c, frontend_ms: null, encoder_ms: t1 - start, first_token_ms: t2 - t1b, token_ms: tokenMs,
              total_ms: last - start - checksMs, ids};
    };

    stage = 'dispatch';
    const {timed, records, transcripts} = await timeTranscriptions(spec, nn.clips, transcribe);
    writeTranscripts(output, encBytes + 4 * V, transcripts, nn.max_tokens);

    const heap = await jsHeap();
    const layers = linears.map((l) => encoder.layerFacts[index.get(l.name)] || decode.layerFacts[index.get(l.name)]);
    const graphs = [encoder, prompt, decode];
    const weights = graphs.reduce((a, g) => a + g.floatBytes + g.layerFacts.reduce((s, f) => s + (f ? f.weight_bytes : 0), 0), 0);
    const kv = 2 * 2 * L * heads * C * D * 4 + 2 * L * S * d * 4;
    const scratch = M * F * 4 + S * d * 4 + 4 + V * 4 + (2 + P + 1) * 4 + 2 * C * 4;
    const f16 = plans.some((p) => p.matmul_dtype === 'float16');
    return {
      status: 'ok',
      shader: `webnn ${form}`,
      compute_dtype: f16 ? 'f16' : 'f32',
      weight_operand_dtype: layers.length ? layers[0].weight_dtype : '',
      layers,
      timestamp_query: false,
      gpu_note: 'per-clip wall clock (each new id read back); WebNN has no GPU timestamps; the encoder, prompt ' +
        'and decode graphs each hold their own copy of the weights they use',
      compile_ms: buildMs,
      ...timingReply(timed),
      gpu_buffer_bytes: kv + scratch,
      js_heap: heap,
      speech: {upload_ms: constantMs, memory: {weights, kv_cache: kv, scratch}, clips: records},
      output,
    };
  } catch (e) {
    return {status: 'failed', stage, reason: `WebNN ${stage} error: ${errorText(e)}`};
  } finally {
    if (context.destroy) context.destroy();
  }
}
