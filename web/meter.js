// The memory every engine really uses, measured one way for all of them (docs/concepts/memory.md).
// harness.js imports this module first, so the meter is in place before any engine's code loads:
// - WebGPU: every device an adapter hands out, and every buffer made on it (GPUDevice.createBuffer),
//   counted live from creation until GPUBuffer.destroy, its device's destroy, or its collection
//   (an engine that drops a buffer without destroying it, as ONNX Runtime's WebGPU EP does, keeps
//   it until the garbage collector takes it: so does the browser). Live and peak bytes, per phase
//   (load, warm-up, measured), the most buffers live at once, the largest single buffer.
// - WebAssembly: every WebAssembly.Memory an engine creates (the constructor) or a module exports
//   (instantiate); a memory never shrinks, so its peak is its size when last read.
// - WebNN: bytes handed to MLGraphBuilder.constant and MLContext.createTensor /
//   createConstantTensor (what the engine gave the browser, not what the device holds).
// Engines that run in a worker built from a Blob (wllama) get the same meter: the worker's script
// is prefixed with installMeter's source, which reports on a BroadcastChannel.
// Everything here is bookkeeping around the engine's own calls: no figure is estimated.

export const PHASES = ['load', 'warmup', 'measured'];

// Installs the meter on `scope` (window or a worker's global) and returns it. Self-contained (no
// outside names), because its source is what a worker is prefixed with.
export function installMeter(scope, channelName) {
  if (scope.__precisionMeter) return scope.__precisionMeter;
  const phases = ['load', 'warmup', 'measured'];
  const gpu = {live: 0, peak: 0, liveBuffers: 0, peakBuffers: 0, largest: 0, created: 0, devices: 0,
    collected: 0, phasePeak: {load: 0, warmup: 0, measured: 0}};
  const memories = [];  // WeakRefs of every WebAssembly.Memory seen
  const seenMemories = new WeakSet();
  let wasmPeak = 0;
  const webnn = {constantBytes: 0, tensorLive: 0, tensorPeak: 0};
  // What went wrong underneath an engine: devices lost (GPUDevice.lost, with the browser's reason),
  // GPU out-of-memory errors no error scope caught, WebAssembly memory that could not grow.
  const faults = {deviceLost: [], gpuOutOfMemory: [], wasmOutOfMemory: []};
  let phase = 'load';
  const sizes = new WeakMap();  // GPUBuffer -> bytes while counted live
  const deviceBuffers = new WeakMap();  // GPUDevice -> Set of WeakRefs of its live buffers
  // Emscripten's pthreads (workers named em-pthread) share their parent's memory and device:
  // metered, but never answering, so nothing is counted twice. The channel is opened when first
  // needed (a page that starts no worker never opens one).
  const inWorker = typeof scope.WorkerGlobalScope !== 'undefined';
  const pthread = String(scope.name || '').startsWith('em-pthread');
  let channel = null;
  const channelOf = () => {
    if (!channel && channelName && !pthread && typeof scope.BroadcastChannel === 'function') {
      channel = new scope.BroadcastChannel(channelName);
    }
    return channel;
  };
  let workers = 0;  // workers this scope started with the meter
  const heard = new Map();  // worker id -> its latest figures
  function listen() {
    if (inWorker || !channelOf() || channel.onmessage) return;
    channel.onmessage = (event) => {
      if (event.data?.kind === 'figures' && typeof event.data.id === 'string') heard.set(event.data.id, event.data.figures);
    };
  }

  // A worker sends its figures whenever a peak rises (at most every 100 ms) and when asked: an
  // engine may end its worker before the page asks.
  const id = Math.random().toString(36).slice(2);
  let pending = false;
  function push() {
    if (!inWorker || pending || !channelOf()) return;
    pending = true;
    setTimeout(() => {
      pending = false;
      channelOf().postMessage({kind: 'figures', id, figures: figures()});
    }, 100);
  }

  function bump() {
    push();
    if (gpu.live > gpu.peak) gpu.peak = gpu.live;
    if (gpu.live > gpu.phasePeak[phase]) gpu.phasePeak[phase] = gpu.live;
    if (gpu.liveBuffers > gpu.peakBuffers) gpu.peakBuffers = gpu.liveBuffers;
  }

  function release(buffer) {
    const size = sizes.get(buffer);
    if (size === undefined) return;
    sizes.delete(buffer);
    gpu.live -= size;
    gpu.liveBuffers -= 1;
  }

  // A buffer collected without destroy: its bytes (held in the token, the buffer is gone).
  const collected = typeof scope.FinalizationRegistry === 'function'
    ? new scope.FinalizationRegistry((token) => {
      if (!token.counted) return;
      token.counted = false;
      gpu.live -= token.size;
      gpu.liveBuffers -= 1;
      gpu.collected += token.size;
    }) : null;
  const tokens = new WeakMap();  // GPUBuffer -> its registry token

  function wrap(proto, name, make) {
    if (!proto || typeof proto[name] !== 'function') return false;
    const original = proto[name];
    Object.defineProperty(proto, name, {value: make(original), writable: true, configurable: true});
    return true;
  }

  if (scope.GPUAdapter && scope.GPUDevice && scope.GPUBuffer) {
    wrap(scope.GPUAdapter.prototype, 'requestDevice', (original) => async function requestDevice(...args) {
      const device = await original.apply(this, args);
      if (device && !deviceBuffers.has(device)) {
        deviceBuffers.set(device, new Set());
        gpu.devices += 1;
        device.lost.then((info) => {
          // 'destroyed' is an engine's own destroy() (its clean-up): only a loss the browser made counts
          if (info?.reason === 'destroyed') return;
          faults.deviceLost.push({reason: String(info?.reason ?? ''), message: String(info?.message ?? '').slice(0, 300)});
        });
        device.addEventListener('uncapturederror', (event) => {
          const error = event.error;
          const oom = (scope.GPUOutOfMemoryError && error instanceof scope.GPUOutOfMemoryError)
            || error?.constructor?.name === 'GPUOutOfMemoryError';
          if (oom && faults.gpuOutOfMemory.length < 5) faults.gpuOutOfMemory.push(String(error.message || 'GPUOutOfMemoryError').slice(0, 300));
        });
      }
      return device;
    });
    wrap(scope.GPUDevice.prototype, 'createBuffer', (original) => function createBuffer(descriptor) {
      const buffer = original.call(this, descriptor);
      const size = Number(buffer.size);
      if (!sizes.has(buffer) && Number.isFinite(size)) {
        const token = {size, counted: true};
        sizes.set(buffer, size);
        tokens.set(buffer, token);
        if (collected) collected.register(buffer, token, token);
        let set = deviceBuffers.get(this);
        if (!set) {
          set = new Set();
          deviceBuffers.set(this, set);
          gpu.devices += 1;
        }
        set.add(new WeakRef(buffer));
        gpu.live += size;
        gpu.liveBuffers += 1;
        gpu.created += 1;
        if (size > gpu.largest) gpu.largest = size;
        bump();
      }
      return buffer;
    });
    const forget = (buffer) => {
      const token = tokens.get(buffer);
      if (token) {
        token.counted = false;
        if (collected) collected.unregister(token);
      }
      release(buffer);
    };
    wrap(scope.GPUBuffer.prototype, 'destroy', (original) => function destroy() {
      forget(this);
      return original.call(this);
    });
    wrap(scope.GPUDevice.prototype, 'destroy', (original) => function destroy() {
      for (const ref of deviceBuffers.get(this) ?? []) {
        const buffer = ref.deref();
        if (buffer) forget(buffer);
      }
      deviceBuffers.set(this, new Set());
      return original.call(this);
    });
  }

  function addMemory(memory) {
    if (!memory || seenMemories.has(memory)) return;
    seenMemories.add(memory);
    memories.push(new WeakRef(memory));
    readWasm();
  }

  function readWasm() {
    let total = 0;
    for (const ref of memories) {
      const memory = ref.deref();
      if (!memory) continue;
      try {
        total += memory.buffer.byteLength;
      } catch (e) {
        // a detached or inaccessible buffer: nothing to read now
      }
    }
    if (total > wasmPeak) {
      wasmPeak = total;
      push();
    }
    return total;
  }

  const WA = scope.WebAssembly;
  if (WA && typeof WA.Memory === 'function') {
    const Memory = WA.Memory;
    // A Proxy keeps `instanceof WebAssembly.Memory` and the real objects engines expect.
    const refused = (e) => {
      if (e instanceof RangeError && faults.wasmOutOfMemory.length < 5) faults.wasmOutOfMemory.push(String(e.message).slice(0, 300));
    };
    WA.Memory = new Proxy(Memory, {
      construct(target, args, newTarget) {
        let memory;
        try {
          memory = Reflect.construct(target, args, newTarget);
        } catch (e) {
          refused(e);
          throw e;
        }
        addMemory(memory);
        return memory;
      },
    });
    wrap(Memory.prototype, 'grow', (original) => function grow(...args) {
      let result;
      try {
        result = original.apply(this, args);
      } catch (e) {
        refused(e);  // Emscripten catches it and its malloc returns null: the engine's error comes later
        throw e;
      }
      addMemory(this);
      readWasm();
      return result;
    });
    const exported = (instance) => {
      for (const value of Object.values(instance?.exports ?? {})) {
        if (value instanceof Memory) addMemory(value);
      }
    };
    for (const name of ['instantiate', 'instantiateStreaming']) {
      if (typeof WA[name] !== 'function') continue;
      const original = WA[name];
      WA[name] = async function (...args) {
        const result = await original.apply(this, args);
        exported(result instanceof WA.Instance ? result : result?.instance);
        return result;
      };
    }
  }

  const bytesOf = (data) => (data && typeof data.byteLength === 'number' ? data.byteLength : 0);
  const ELEMENT = {float32: 4, float16: 2, int32: 4, uint32: 4, int64: 8, uint64: 8, int8: 1, uint8: 1,
    int4: 0.5, uint4: 0.5};
  const tensorBytes = (descriptor) => {
    const shape = descriptor?.shape ?? descriptor?.dimensions ?? [];
    return Math.ceil(shape.reduce((n, d) => n * Number(d), 1) * (ELEMENT[descriptor?.dataType] ?? 0));
  };
  const tensors = new WeakMap();
  const countTensor = (tensor, bytes) => {
    tensors.set(tensor, bytes);
    webnn.tensorLive += bytes;
    if (webnn.tensorLive > webnn.tensorPeak) webnn.tensorPeak = webnn.tensorLive;
    return tensor;
  };
  if (scope.MLGraphBuilder) {
    wrap(scope.MLGraphBuilder.prototype, 'constant', (original) => function constant(...args) {
      if (args.length >= 2 && typeof args[0] === 'object' && typeof args[1] === 'object') {
        webnn.constantBytes += bytesOf(args[1]);
      }
      return original.apply(this, args);
    });
  }
  if (scope.MLContext) {
    wrap(scope.MLContext.prototype, 'createTensor', (original) => async function createTensor(descriptor) {
      return countTensor(await original.call(this, descriptor), tensorBytes(descriptor));
    });
    wrap(scope.MLContext.prototype, 'createConstantTensor',
      (original) => async function createConstantTensor(descriptor, data) {
        webnn.constantBytes += bytesOf(data);
        return original.call(this, descriptor, data);
      });
  }
  if (scope.MLTensor) {
    wrap(scope.MLTensor.prototype, 'destroy', (original) => function destroy() {
      const bytes = tensors.get(this);
      if (bytes !== undefined) {
        tensors.delete(this);
        webnn.tensorLive -= bytes;
      }
      return original.call(this);
    });
  }

  // Workers built from a Blob (wllama's) start with this meter too.
  if (scope.URL && typeof scope.URL.createObjectURL === 'function' && typeof scope.Blob === 'function') {
    const createObjectURL = scope.URL.createObjectURL;
    const source = `(${installMeter.toString()})(self, ${JSON.stringify(channelName || null)});\n`;
    scope.URL.createObjectURL = function (object) {
      if (channelName && object instanceof scope.Blob && /javascript/.test(object.type)) {
        workers += 1;
        listen();
        return createObjectURL.call(this, new scope.Blob([source, object], {type: object.type}));
      }
      return createObjectURL.call(this, object);
    };
  }

  function figures() {
    readWasm();
    return {
      gpu: {devices: gpu.devices, live_bytes: gpu.live, peak_bytes: gpu.peak, peak_buffers: gpu.peakBuffers,
        largest_bytes: gpu.largest, buffers_created: gpu.created, collected_bytes: gpu.collected,
        phase_peak_bytes: {...gpu.phasePeak}},
      wasm: {memories: memories.filter((r) => r.deref()).length, peak_bytes: wasmPeak},
      webnn: {constant_bytes: webnn.constantBytes, tensor_peak_bytes: webnn.tensorPeak},
      faults: {device_lost: faults.deviceLost.slice(0, 5), gpu_out_of_memory: [...faults.gpuOutOfMemory],
        wasm_out_of_memory: [...faults.wasmOutOfMemory]},
    };
  }

  const meter = {
    phase(name) {
      if (!phases.includes(name) || name === phase) return;
      phase = name;
      if (gpu.live > gpu.phasePeak[phase]) gpu.phasePeak[phase] = gpu.live;
      readWasm();
      if (workers || inWorker) channelOf()?.postMessage({kind: 'phase', phase});
    },
    figures,
    channelOf,
    heard,
    get workers() { return workers; },
  };
  if (inWorker && channelOf()) {
    // in a worker: answer the page's requests for figures, and follow its phases
    channel.onmessage = (event) => {
      if (event.data?.kind === 'phase') meter.phase(event.data.phase);
      if (event.data?.kind === 'ask') channel.postMessage({kind: 'figures', id, figures: figures()});
    };
  }
  scope.__precisionMeter = meter;
  return meter;
}

// The page's meter (window), and the figures of the page and its metered workers together.
const CHANNEL = `precision-meter-${Math.random().toString(36).slice(2)}`;
export const meter = installMeter(globalThis, CHANNEL);

export function markPhase(name) {
  meter.phase(name);
}

// The page's figures plus its workers' (the latest each sent, after asking the live ones once), the
// workers' peaks added: a worker's buffers and memories are its own (summed peaks may not have
// coincided: an upper bound where a page and its workers both hold memory).
export async function meterFigures(waitMs = 150) {
  const own = meter.figures();
  own.workers = 0;
  if (!meter.workers || !meter.channelOf()) return own;
  meter.channelOf().postMessage({kind: 'ask'});
  await new Promise((resolve) => setTimeout(resolve, waitMs));
  for (const other of meter.heard.values()) {
    own.gpu.devices += other.gpu.devices;
    for (const key of ['live_bytes', 'peak_bytes', 'peak_buffers', 'buffers_created', 'collected_bytes']) {
      own.gpu[key] += other.gpu[key];
    }
    own.gpu.largest_bytes = Math.max(own.gpu.largest_bytes, other.gpu.largest_bytes);
    for (const p of PHASES) own.gpu.phase_peak_bytes[p] += other.gpu.phase_peak_bytes[p];
    own.wasm.memories += other.wasm.memories;
    own.wasm.peak_bytes += other.wasm.peak_bytes;
    own.webnn.constant_bytes += other.webnn.constant_bytes;
    own.webnn.tensor_peak_bytes += other.webnn.tensor_peak_bytes;
    for (const key of ['device_lost', 'gpu_out_of_memory', 'wasm_out_of_memory']) {
      own.faults[key] = [...own.faults[key], ...(other.faults?.[key] ?? [])].slice(0, 5);
    }
  }
  own.workers = meter.heard.size;
  return own;
}

// A page whose engine failed, restated as what happened underneath it, where the meter saw it:
// memory the GPU or WebAssembly could not give ('out-of-memory'), else a device the browser lost
// ('device-lost'); null when the failure is the engine's own. The engine's message stays in the
// reason.
export function faultStatus(figures, reason) {
  const f = figures.faults;
  const said = reason ? `; the engine said: ${reason}` : '';
  if (f.gpu_out_of_memory.length) return {status: 'out-of-memory', reason: `GPU out of memory: ${f.gpu_out_of_memory[0]}${said}`};
  if (f.wasm_out_of_memory.length) {
    return {status: 'out-of-memory', reason: `WebAssembly memory could not grow: ${f.wasm_out_of_memory[0]}${said}`};
  }
  if (f.device_lost.length) {
    const lost = f.device_lost[0];
    return {status: 'device-lost', reason: `the GPU device was lost (${lost.reason || 'no reason'}: ${lost.message})${said}`};
  }
  return null;
}
