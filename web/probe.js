// Capability probe: what this browser says about itself. Recorded with every run.
const KEY_LIMITS = [
  'maxStorageBufferBindingSize', 'maxBufferSize', 'maxComputeWorkgroupSizeX',
  'maxComputeInvocationsPerWorkgroup', 'maxComputeWorkgroupsPerDimension',
  'maxComputeWorkgroupStorageSize', 'maxStorageBuffersPerShaderStage',
];

export async function probe() {
  const out = {
    userAgent: navigator.userAgent,
    crossOriginIsolated: self.crossOriginIsolated === true,
    webgpu: null,
    webnn: {present: 'ml' in navigator},
  };
  if (!('gpu' in navigator)) {
    out.webgpu = {available: false, reason: 'navigator.gpu is missing'};
    return out;
  }
  try {
    const adapter = await navigator.gpu.requestAdapter();
    if (!adapter) {
      out.webgpu = {available: false, reason: 'navigator.gpu.requestAdapter() returned null'};
      return out;
    }
    const info = adapter.info ?? {};
    const limits = {};
    for (const name of KEY_LIMITS) limits[name] = adapter.limits[name];
    out.webgpu = {
      available: true,
      adapter: {
        vendor: info.vendor ?? '', architecture: info.architecture ?? '',
        device: info.device ?? '', description: info.description ?? '',
        isFallbackAdapter: info.isFallbackAdapter ?? adapter.isFallbackAdapter ?? null,
      },
      features: Array.from(adapter.features).sort(),
      wgslLanguageFeatures: Array.from(navigator.gpu.wgslLanguageFeatures ?? []).sort(),
      limits,
    };
  } catch (e) {
    out.webgpu = {available: false, reason: `requestAdapter() threw: ${e}`};
  }
  return out;
}

// WebNN per device type: a context or the browser's own error, and opSupportLimits() in full.
export async function probeWebNN(deviceTypes) {
  if (!('ml' in navigator)) {
    return {present: false, reason: 'navigator.ml is missing: this browser has no WebNN'};
  }
  const contexts = {};
  for (const deviceType of deviceTypes) {
    try {
      const context = await navigator.ml.createContext({deviceType});
      contexts[deviceType] = {available: true, limits: JSON.parse(JSON.stringify(context.opSupportLimits()))};
      if (context.destroy) context.destroy();
    } catch (e) {
      contexts[deviceType] = {available: false, error: `${e.name}: ${e.message}`};
    }
  }
  return {present: true, contexts};
}
