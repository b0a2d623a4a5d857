// Which kernel variant a WebGPU page runs: the first of the job's variants whose `requires` the
// adapter has. 'wgsl:NAME' is a WGSL language feature (navigator.gpu.wgslLanguageFeatures), the
// rest adapter features (requested on the device). Shared by the matmul and model runners.
export function hasFeature(adapter, feature) {
  if (feature.startsWith('wgsl:')) {
    const wgsl = navigator.gpu.wgslLanguageFeatures;
    return Boolean(wgsl && wgsl.has(feature.slice(5)));
  }
  return adapter.features.has(feature);
}

export function chooseVariant(adapter, variants) {
  return variants.find((v) => v.requires.every((f) => hasFeature(adapter, f))) || null;
}

export function needsText(variants) {
  return variants.map((v) => v.requires.join('+') || 'none').join(' or ');
}

export function deviceFeatures(variants) {
  return [...new Set(variants.flatMap((v) => v.requires.filter((f) => !f.startsWith('wgsl:'))))];
}
