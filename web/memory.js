// JavaScript heap of the page: measureUserAgentSpecificMemory() where the browser allows it
// (needs cross-origin isolation, which the server's COOP/COEP headers give), else the
// non-standard performance.memory, else nothing, with the reason.
export async function jsHeap() {
  let why = 'performance.measureUserAgentSpecificMemory is missing';
  if (typeof performance.measureUserAgentSpecificMemory === 'function') {
    try {
      const result = await performance.measureUserAgentSpecificMemory();
      return {bytes: result.bytes, source: 'measureUserAgentSpecificMemory'};
    } catch (e) {
      why = `measureUserAgentSpecificMemory: ${e.name}: ${e.message}`;
    }
  }
  if (performance.memory && typeof performance.memory.usedJSHeapSize === 'number') {
    return {bytes: performance.memory.usedJSHeapSize, source: 'performance.memory', note: why};
  }
  return {bytes: null, source: '', note: `${why}; performance.memory is missing`};
}
