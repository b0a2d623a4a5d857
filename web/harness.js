// Entry point of the harness page: fetch the job, run it, post raw measurements back.
// The page only measures; statistics and accuracy are computed in Python.
import {JobClient} from './job_client.js';
import {probe, probeWebNN} from './probe.js';
import {runWebNN} from './webnn_runner.js';
import {runWebGPU} from './webgpu_runner.js';

// 'probe' only reports capabilities (WebNN contexts and their opSupportLimits per device type).
const RUNNERS = {
  webgpu: runWebGPU,
  webnn: runWebNN,
  probe: async (spec) => ({status: 'ok', webnn: await probeWebNN(spec.webnn_devices ?? ['cpu'])}),
};

function setStatus(text) { document.getElementById('status').textContent = text; }

async function main() {
  const client = JobClient.fromLocation();
  let capabilities = null;
  try {
    const spec = await client.spec();
    setStatus(`running ${spec.platform} ${spec.bits}-bit`);
    capabilities = await probe();
    const runner = RUNNERS[spec.platform];
    const result = runner
      ? await runner(spec, client)
      : {status: 'unsupported', reason: `platform ${spec.platform} has no runner in this page`};
    if (result.output) {
      await client.postOutput(result.output);
      delete result.output;
    }
    await client.postResult({...result, probe: capabilities});
    setStatus(`done: ${result.status}`);
  } catch (e) {
    setStatus(`error: ${e}`);
    await client.postResult({
      status: 'failed', reason: `${e && e.name ? e.name + ': ' : ''}${e && e.message ? e.message : e}`,
      probe: capabilities,
    });
  }
}

main();
