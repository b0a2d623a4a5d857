// Talks to the driver's job API. The job id and token come from this page's URL; every request
// carries the token, and the server rejects posts without it.
const OUTPUT_PIECE = 4 * 1024 * 1024;
const OUTPUT_ATTEMPTS = 3;

export class JobClient {
  constructor(jobId, token) {
    this.base = `/api/jobs/${encodeURIComponent(jobId)}`;
    this.query = `?token=${encodeURIComponent(token)}`;
  }

  static fromLocation() {
    const params = new URLSearchParams(window.location.search);
    return new JobClient(params.get('job') ?? '', params.get('token') ?? '');
  }

  async #fetchOk(path, init, extra = '') {
    const response = await fetch(`${this.base}${path}${this.query}${extra}`, init);
    if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
    return response;
  }

  async spec() { return (await this.#fetchOk('/spec')).json(); }

  async tensor(name) {
    return (await this.#fetchOk(`/tensors/${encodeURIComponent(name)}`)).arrayBuffer();
  }

  // The output goes in pieces of OUTPUT_PIECE bytes, in order, each naming its offset (the server
  // appends it there), and a piece that meets a network error goes again: after a long ONNX
  // Runtime wasm session of SmolLM2, Chromium failed the page's first POST (even one the server had
  // read whole) and passed the same POST sent again.
  async postOutput(buffer) {
    const bytes = ArrayBuffer.isView(buffer) ? new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength)
                                             : new Uint8Array(buffer);
    let offset = 0;
    do {
      const piece = bytes.subarray(offset, offset + OUTPUT_PIECE);
      for (let attempt = 1; ; attempt++) {
        try {
          await this.#fetchOk('/output', {
            method: 'POST', body: piece, headers: {'Content-Type': 'application/octet-stream'},
          }, `&offset=${offset}`);
          break;
        } catch (e) {
          if (!(e instanceof TypeError) || attempt === OUTPUT_ATTEMPTS) throw e;
          console.warn(`output piece at ${offset}: ${e.message}; again (${attempt} of ${OUTPUT_ATTEMPTS})`);
          await new Promise((resolve) => setTimeout(resolve, 1000));
        }
      }
      offset += piece.byteLength;
    } while (offset < bytes.byteLength);
  }

  async postResult(result) {
    await this.#fetchOk('/result', {
      method: 'POST', body: JSON.stringify(result), headers: {'Content-Type': 'application/json'},
    });
  }
}
