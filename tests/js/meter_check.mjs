// Runs web/meter.js under node (no WebGPU, no WebNN there: its WebAssembly half), for
// tests/test_meter_js.py. argv[2]: the absolute file URL of web/meter.js. Prints one JSON object:
// what engines see of the wrapped WebAssembly.Memory, the meter's figures, and the page's status
// for an engine that failed after a memory could not grow.
const meter = await import(process.argv[2]);

const made = new WebAssembly.Memory({initial: 1, maximum: 4});
made.grow(2);  // 3 pages
let refused = '';
try {
  made.grow(8);  // beyond its maximum: a RangeError the engine's allocator would turn into null
} catch (e) {
  refused = e.constructor.name;
}
// a module that makes and exports its own memory of 2 pages: (module (memory (export "m") 2))
const bytes = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 5, 3, 1, 0, 2, 7, 5, 1, 1, 109, 2, 0]);
const {instance} = await WebAssembly.instantiate(bytes);
const figures = await meter.meterFigures();
console.log(JSON.stringify({
  instanceOf: made instanceof WebAssembly.Memory,
  exportedInstanceOf: instance.exports.m instanceof WebAssembly.Memory,
  refused,
  figures,
  status: meter.faultStatus(figures, 'Aborted(OOM)'),
  okStatus: meter.faultStatus({...figures, faults: {device_lost: [], gpu_out_of_memory: [], wasm_out_of_memory: []}}, 'x'),
}));
