// Entry point of the harness page: fetch the job, load the engine runner it names, run it, post
// raw measurements back. The page only measures; statistics and accuracy are computed in Python.
// A runner is web/engines/<spec.runner>.js exporting `run(spec, client)`; 'probe' only reports
// capabilities (WebNN contexts and their opSupportLimits per device type).
import {faultStatus, meterFigures} from './meter.js';  // first: the meter is in place before any engine loads
import {JobClient} from './job_client.js';
import {probe, probeWebNN} from './probe.js';

const PROTOCOL_VERSION = 7;  // fixed_web_platform/vocabulary.py PROTOCOL_VERSION
const RUNNER_NAME = /^[a-z][a-z0-9_]*$/;

function setStatus(text) { document.getElementById('status').textContent = text; }

async function runJob(spec, client) {
  if (spec.protocol_version !== PROTOCOL_VERSION) {
    return {status: 'failed', reason: `job protocol ${spec.protocol_version}; this page speaks ${PROTOCOL_VERSION}`};
  }
  if (spec.runner === 'probe') {
    return {status: 'ok', webnn: await probeWebNN(spec.options.webnn_devices ?? ['cpu'])};
  }
  if (!RUNNER_NAME.test(String(spec.runner))) {
    return {status: 'failed', reason: `bad runner name ${spec.runner}`};
  }
  const module = await import(`./engines/${spec.runner}.js`);
  return module.run(spec, client);
}

async function main() {
  const client = JobClient.fromLocation();
  let capabilities = null;
  try {
    const spec = await client.spec();
    setStatus(`running ${spec.engine} ${spec.platform} ${spec.bits}-bit`);
    capabilities = await probe();
    const result = await runJob(spec, client);
    if (result.output) {
      await client.postOutput(result.output);
      delete result.output;
    }
    const meter = await meterFigures();
    const fault = result.status === 'ok' ? null : faultStatus(meter, result.reason);
    await client.postResult({...result, ...fault, meter, protocol_version: PROTOCOL_VERSION, probe: capabilities});
    setStatus(`done: ${result.status}`);
  } catch (e) {
    setStatus(`error: ${e}`);
    const meter = await meterFigures();
    const reason = `${e && e.name ? e.name + ': ' : ''}${e && e.message ? e.message : e}`;
    await client.postResult({status: 'failed', reason, ...faultStatus(meter, reason), meter,
      protocol_version: PROTOCOL_VERSION, probe: capabilities});
  }
}

main();
