// Whisper on the harness's own WGSL kernels (WebGPU). Python writes four passes as step lists
// (engines/wgsl/speech.py): `frontend` (the clip's PCM to log-mel features), `encoder` (the
// convolutions, the encoder layers, every decoder layer's cross-attention keys and values),
// `prompt` (the decoder over the prompt's ids, the greedy argmax on the device) and `decode`
// (one id at the position the KV cache has reached). This page compiles the kernels, uploads
// the weights and every clip's PCM, then transcribes clips: per clip one submission for the
// front end, one for the encoder, one for the prompt and one per decode step, each new id read
// back after its step (the per-token timestamps), until the end of text or max_tokens. The
// first transcription (clip 0, cold) also copies out its features, encoder output and first
// logits for the checks in Python. Timed iterations take the clips in turn; clips no timed
// iteration reached are transcribed afterwards, untimed, so every clip has its ids. Returns raw
// samples and facts; decides nothing about them.
import {jsHeap} from '../memory.js';
import {timeTranscriptions, writeTranscripts} from '../transcription.js';
import {chooseVariant, deviceFeatures, needsText} from '../webgpu_variants.js';

const DEFAULT_MAX_STORAGE_BINDING = 134217728;
const DEFAULT_MAX_BUFFER = 268435456;

function unsupported(reason) { return {status: 'unsupported', reason}; }

function align4(n) { return Math.ceil(Math.max(n, 4) / 4) * 4; }

class StageError extends Error {
  constructor(stage, message) { super(message); this.stage = stage; }
}

async function compilationErrors(module) {
  const info = await module.getCompilationInfo();
  return info.messages.filter((m) => m.type === 'error')
      .map((m) => `${m.lineNum}:${m.linePos} ${m.message}`);
}

export async function run(spec, client) {
  const opts = spec.options;
  let stage = 'adapter';
  if (!('gpu' in navigator)) return unsupported('WebGPU: navigator.gpu is missing');
  const adapter = await navigator.gpu.requestAdapter();
  if (!adapter) return unsupported('WebGPU: requestAdapter() returned null');

  const chosen = {};
  for (const [kernel, variants] of Object.entries(opts.linear_variants)) {
    const v = chooseVariant(adapter, variants);
    if (!v) return unsupported(`WebGPU adapter lacks the features the ${kernel} kernel needs (${needsText(variants)})`);
    chosen[kernel] = v;
  }
  const requiredFeatures = deviceFeatures(Object.values(chosen));
  const allSteps = Object.values(opts.passes).flat().flatMap((s) => (s.prologue ? [s.prologue, s] : [s]));
  const clips = opts.clips.length;
  const maxTokens = opts.max_tokens;

  let device = null;
  try {
    stage = 'limits';
    const sizes = {};
    for (const name of spec.bindings) sizes[name] = align4(opts.tensor_bytes[name]);
    for (const [name, bytes] of Object.entries(opts.activations)) sizes[name] = align4(bytes);
    const [largestName, largest] = Object.entries(sizes).concat([['output', spec.output_bytes]])
        .reduce((a, b) => (b[1] > a[1] ? b : a));
    const al = adapter.limits;
    for (const [limit, value] of [['maxStorageBufferBindingSize', al.maxStorageBufferBindingSize],
                                  ['maxBufferSize', al.maxBufferSize]]) {
      if (largest > value) {
        return unsupported(`WebGPU: buffer ${largestName} (${largest} bytes) exceeds the adapter's ${limit} ${value}`);
      }
    }
    const requiredLimits = {};
    if (largest > DEFAULT_MAX_STORAGE_BINDING) requiredLimits.maxStorageBufferBindingSize = al.maxStorageBufferBindingSize;
    if (largest > DEFAULT_MAX_BUFFER) requiredLimits.maxBufferSize = al.maxBufferSize;
    for (const step of allSteps) {
      const most = Math.max(...step.workgroups);
      if (most > al.maxComputeWorkgroupsPerDimension) {
        return unsupported(`WebGPU: a ${step.op} dispatch of ${most} workgroups exceeds ` +
                           `maxComputeWorkgroupsPerDimension ${al.maxComputeWorkgroupsPerDimension}`);
      }
      const storage = step.bindings.filter((b) => b !== null).length;
      if (storage > al.maxStorageBuffersPerShaderStage) {
        return unsupported(`WebGPU: the ${step.op} kernel binds ${storage} storage buffers; ` +
                           `maxStorageBuffersPerShaderStage is ${al.maxStorageBuffersPerShaderStage}`);
      }
      if (storage > 8) requiredLimits.maxStorageBuffersPerShaderStage = al.maxStorageBuffersPerShaderStage;
    }

    stage = 'device';
    device = await adapter.requestDevice({requiredFeatures, requiredLimits});
    let lostInfo = null;
    device.lost.then((info) => { lostInfo = info; });
    const uncaptured = [];
    device.addEventListener('uncapturederror', (e) => uncaptured.push(String(e.error.message)));
    device.pushErrorScope('out-of-memory');
    device.pushErrorScope('validation');

    stage = 'compile';
    const tCompile = performance.now();
    const modules = new Map();
    const moduleFor = (key, code) => {
      if (!modules.has(key)) modules.set(key, device.createShaderModule({code, label: key}));
      return modules.get(key);
    };
    const pipelines = new Map();
    const pipelineKey = (step) => {
      const [key, code] = step.op === 'linear' ?
        [`${chosen[step.kernel].shader}@${step.kernel}`, chosen[step.kernel].source] :
        [step.program, opts.programs[step.program]];
      const pkey = `${key}|${JSON.stringify(step.constants)}`;
      if (!pipelines.has(pkey)) {
        pipelines.set(pkey, device.createComputePipelineAsync({
          layout: 'auto', label: pkey,
          compute: {module: moduleFor(key, code), entryPoint: 'main', constants: step.constants},
        }));
      }
      return pkey;
    };
    for (const step of allSteps) step.pkey = pipelineKey(step);
    for (const [key, module] of modules) {
      const errors = await compilationErrors(module);
      if (errors.length) throw new StageError('compile', `WGSL compile error in ${key}: ${errors.join('; ')}`);
    }
    const built = new Map();
    for (const [pkey, promise] of pipelines) built.set(pkey, await promise);
    const compileMs = performance.now() - tCompile;

    stage = 'fetch';
    const tensors = {};
    for (const name of spec.bindings) {
      tensors[name] = await client.tensor(name);
      if (align4(tensors[name].byteLength) !== sizes[name]) {
        throw new StageError('fetch', `tensor ${name} has ${tensors[name].byteLength} bytes, the job said ${opts.tensor_bytes[name]}`);
      }
    }

    // Load phase: the weights to the device (with the clips' PCM and the front end's tables).
    stage = 'upload';
    const tUpload = performance.now();
    const buffers = {};
    for (const name of spec.bindings) {
      buffers[name] = device.createBuffer({
        label: name, size: sizes[name], usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC,
      });
      device.queue.writeBuffer(buffers[name], 0, tensors[name]);
    }
    await device.queue.onSubmittedWorkDone();
    const uploadMs = performance.now() - tUpload;
    for (const name of Object.keys(opts.activations)) {
      buffers[name] = device.createBuffer({
        label: name, size: sizes[name], usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST,
      });
    }
    for (const name of Object.keys(tensors)) delete tensors[name];
    const floatBytes = spec.outputs.filter((o) => o.dtype === 'float32')
        .reduce((a, o) => a + 4 * o.shape.reduce((x, y) => x * y, 1), 0);
    const checks = device.createBuffer({label: 'checks', size: align4(floatBytes),
                                        usage: GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC});
    const idRead = device.createBuffer({size: 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST});

    const bind = (step) => {
      const pipeline = built.get(step.pkey);
      const entries = [];
      step.bindings.forEach((name, binding) => {
        if (name === null) return;
        if (!buffers[name]) throw new StageError('upload', `step ${step.op} binds unknown buffer ${name}`);
        entries.push({binding, resource: {buffer: buffers[name]}});
      });
      return {...step, pipeline, bindGroup: device.createBindGroup({layout: pipeline.getBindGroupLayout(0), entries}),
              prologue: step.prologue ? bind(step.prologue) : null};
    };
    const passes = {};
    for (const [name, steps] of Object.entries(opts.passes)) passes[name] = steps.map(bind);
    // Every linear layer once, in the plan's order, with the weight buffer it bound.
    const linearByName = new Map();
    for (const name of ['encoder', 'decode']) {
      for (const s of passes[name]) if (s.op === 'linear' && !linearByName.has(s.name)) linearByName.set(s.name, s);
    }
    const linearSteps = opts.layer_order.map((name) => {
      const s = linearByName.get(name);
      if (!s) throw new StageError('upload', `no pass runs layer ${name}`);
      return s;
    });
    const layerWeightBytes = linearSteps.map((s) => {
      const bound = s.prologue ? s.prologue.bindings[0] : s.bindings[2];
      if (bound !== s.weights) throw new StageError('upload', `layer ${s.name} binds ${bound} as its weights, not ${s.weights}`);
      return sizes[bound];
    });

    const encodePass = (encoder, name) => {
      const cp = encoder.beginComputePass();
      for (const s of passes[name]) {
        if (s.prologue) {
          cp.setPipeline(s.prologue.pipeline);
          cp.setBindGroup(0, s.prologue.bindGroup);
          cp.dispatchWorkgroups(...s.prologue.workgroups);
        }
        cp.setPipeline(s.pipeline);
        cp.setBindGroup(0, s.bindGroup);
        cp.dispatchWorkgroups(...s.workgroups);
      }
      cp.end();
    };
    const submitPass = async (name, copies = []) => {
      const encoder = device.createCommandEncoder();
      encodePass(encoder, name);
      for (const [src, dst, offset, bytes] of copies) encoder.copyBufferToBuffer(src, 0, dst, offset, bytes);
      device.queue.submit([encoder.finish()]);
      await device.queue.onSubmittedWorkDone();
    };
    const step = async (name, copies = []) => {
      const encoder = device.createCommandEncoder();
      encodePass(encoder, name);
      for (const [src, dst, offset, bytes] of copies) encoder.copyBufferToBuffer(src, 0, dst, offset, bytes);
      encoder.copyBufferToBuffer(buffers.ids, 0, idRead, 0, 4);
      device.queue.submit([encoder.finish()]);
      await idRead.mapAsync(GPUMapMode.READ);
      const id = new Int32Array(idRead.getMappedRange().slice(0))[0];
      idRead.unmap();
      return id;
    };

    const zero = new Uint32Array([0]);
    const outSpec = Object.fromEntries(spec.outputs.map((o) => [o.name, 4 * o.shape.reduce((x, y) => x * y, 1)]));
    // One clip end to end; `check` copies out the first clip's features, encoder output and logits.
    const transcribe = async (c, check) => {
      const [offset, length] = opts.clips[c];
      device.queue.writeBuffer(buffers.clip, 0, new Uint32Array([offset, length]));
      device.queue.writeBuffer(buffers.pos, 0, zero);
      device.queue.writeBuffer(buffers.count, 0, zero);
      const t0 = performance.now();
      await submitPass('frontend', check ? [[buffers.features, checks, 0, outSpec.features]] : []);
      const t1 = performance.now();
      await submitPass('encoder', check ? [[buffers.enc, checks, outSpec.features, outSpec.encoder_out]] : []);
      const t2 = performance.now();
      const prime = device.createCommandEncoder();
      prime.copyBufferToBuffer(buffers[opts.prompt.tensor], 0, buffers.ids, 0, opts.prompt.rows * 4);
      device.queue.submit([prime.finish()]);
      const ids = [];
      let id = await step('prompt', check ? [[buffers.logits, checks, outSpec.features + outSpec.encoder_out,
                                               outSpec.first_logits]] : []);
      const t3 = performance.now();
      const tokenMs = [];
      let last = t3;
      while (id !== opts.eot) {
        ids.push(id);
        if (ids.length >= maxTokens) break;
        id = await step('decode');
        const now = performance.now();
        tokenMs.push(now - last);
        last = now;
      }
      return {clip: c, frontend_ms: t1 - t0, encoder_ms: t2 - t1, first_token_ms: t3 - t2, token_ms: tokenMs,
              total_ms: last - t0, ids};
    };

    stage = 'dispatch';
    const {coldMs, wallMs, records, transcripts} = await timeTranscriptions(spec, clips, transcribe);

    stage = 'readback';
    const readback = device.createBuffer({size: align4(floatBytes), usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST});
    const encoder = device.createCommandEncoder();
    encoder.copyBufferToBuffer(checks, 0, readback, 0, align4(floatBytes));
    device.queue.submit([encoder.finish()]);
    await readback.mapAsync(GPUMapMode.READ);
    const out = new Uint8Array(spec.output_bytes);
    out.set(new Uint8Array(readback.getMappedRange().slice(0, floatBytes)), 0);
    readback.unmap();
    writeTranscripts(out.buffer, floatBytes, transcripts, maxTokens);

    const heap = await jsHeap();
    const validation = await device.popErrorScope();
    const oom = await device.popErrorScope();
    if (validation) return {status: 'failed', stage, reason: `WebGPU validation error: ${validation.message}`};
    if (oom) return {status: 'failed', stage, reason: `WebGPU out of memory: ${oom.message}`};
    if (lostInfo) return {status: 'failed', stage, reason: `WebGPU device lost: ${lostInfo.message}`};
    if (uncaptured.length) return {status: 'failed', stage, reason: `WebGPU error: ${uncaptured[0]}`};

    const sum = (names) => names.reduce((a, n) => a + buffers[n].size, 0);
    const weights = sum(opts.weight_tensors);
    const kv = sum(opts.kv_cache);
    const all = Object.values(buffers).reduce((a, b) => a + b.size, 0) + checks.size;
    const kernelsUsed = [...new Set(allSteps.filter((s) => s.op === 'linear')
        .map((s) => `${s.kernel}=${chosen[s.kernel].shader}`))];
    return {
      status: 'ok',
      shader: kernelsUsed.join('+'),
      compute_dtype: Object.values(chosen).some((v) => v.compute_dtype === 'f16') ? 'f16' : 'f32',
      weight_buffer_bytes: layerWeightBytes.reduce((a, b) => a + b, 0),
      timestamp_query: false,
      gpu_note: 'per-clip wall clock (each new id read back)',
      compile_ms: compileMs,
      cold_ms: coldMs,
      wall_ms: wallMs,
      gpu_ms: null,
      gpu_buffer_bytes: all,
      js_heap: heap,
      layers: linearSteps.map((s, l) => ({name: s.name, weight_dtype: chosen[s.kernel].weight_dtype,
                                          weight_bytes: layerWeightBytes[l]})),
      speech: {upload_ms: uploadMs, memory: {weights, kv_cache: kv, scratch: all - weights - kv},
               clips: records},
      output: out.buffer,
    };
  } catch (e) {
    const reason = `${e && e.name ? e.name + ': ' : ''}${e && e.message ? e.message : e}`;
    return {status: 'failed', stage: (e && e.stage) || stage, reason};
  } finally {
    if (device) device.destroy();
  }
}
