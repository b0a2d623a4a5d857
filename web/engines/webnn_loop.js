// What the harness's WebNN generate and transcribe pages share (webnn_decoder.js, webnn_speech.js):
// two sets of KV-cache MLTensors (a step reads one and writes the other), the two id tensors the
// steps hand on (the page reads each new id back, never writes it), the inputs that say where a
// decode step is (engines/webnn/lower.py's Positions op), and dispatching a graph with its inputs
// and outputs found by name: past.<slot> and present.<slot> are the cache sets' tensors.

import {MASKED} from './webnn_ops.js';

// `slots`: the cache's names (a layer's keys or values, "0.k"), each a tensor of `cacheShape`;
// `positions`: the cache's length.
export async function loopState(context, slots, cacheShape, positions) {
  const tensor = (shape, flags = {}, dataType = 'float32') => context.createTensor({dataType, shape, ...flags});
  const caches = [{}, {}];
  for (const set of caches) for (const slot of slots) set[slot] = await tensor(cacheShape);
  const ids = [await tensor([1], {readable: true}, 'int32'), await tensor([1], {readable: true}, 'int32')];
  const step = {position: await tensor([1], {writable: true}, 'int32'), mask: await tensor([1, positions], {writable: true}),
                slot: await tensor([1, positions, 1], {writable: true})};
  const maskData = new Float32Array(positions);
  const slotData = new Float32Array(positions);
  return {
    caches, ids, step,
    // The step inputs of one row at position p: it sees positions 0..p and is written at p.
    at(p) {
      maskData.fill(MASKED);
      maskData.fill(0, 0, p + 1);
      slotData.fill(0);
      slotData[p] = 1;
      context.writeTensor(step.position, new Int32Array([p]));
      context.writeTensor(step.mask, maskData);
      context.writeTensor(step.slot, slotData);
    },
    readId: async (t) => new Int32Array(await context.readTensor(t))[0],
    // One graph (buildGraph's): its inputs by name from `given` or, past.*, cache set `from`; its
    // outputs `outputs` and, present.*, cache set `to` (-1: none).
    dispatch(g, given, outputs, from = -1, to = -1) {
      const inputs = {};
      for (const name of g.inputs) inputs[name] = name.startsWith('past.') ? caches[from][name.slice(5)] : given[name];
      const out = {...outputs};
      for (const name of g.outputs) if (name.startsWith('present.')) out[name] = caches[to][name.slice(8)];
      context.dispatch(g.graph, inputs, out);
    },
  };
}

// The cache slots a pass's graphs write.
export function cacheSlots(graphs) {
  return graphs.flatMap((g) => g.outputs.filter((n) => n.startsWith('present.')).map((n) => n.slice(8)));
}
