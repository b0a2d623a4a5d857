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

  // A request that meets a network error (TypeError) goes again, OUTPUT_ATTEMPTS times in all:
  // after a long wasm session of SmolLM2 (ONNX Runtime's, transformers.js's q4), Chromium failed the
  // page's next request (a POST the server had read whole, a GET of a tensor) and passed the same
  // request sent again. Only requests that may be repeated come here (GETs; output pieces by offset).
  async #fetchAgain(what, path, init, extra = '') {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.#fetchOk(path, init, extra);
      } catch (e) {
        if (!(e instanceof TypeError) || attempt === OUTPUT_ATTEMPTS) throw e;
        console.warn(`${what}: ${e.message}; again (${attempt} of ${OUTPUT_ATTEMPTS})`);
        await new Promise((resolve) => setTimeout(resolve, 1000));
      }
    }
  }

  async tensor(name) {
    return (await this.#fetchAgain(`tensor ${name}`, `/tensors/${encodeURIComponent(name)}`)).arrayBuffer();
  }

  // The output goes in pieces of OUTPUT_PIECE bytes, in order, each naming its offset (the server
  // appends it there), so a piece sent again lands where it belongs.
  async postOutput(buffer) {
    const bytes = ArrayBuffer.isView(buffer) ? new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength)
                                             : new Uint8Array(buffer);
    let offset = 0;
    do {
      const piece = bytes.subarray(offset, offset + OUTPUT_PIECE);
      await this.#fetchAgain(`output piece at ${offset}`, '/output', {
        method: 'POST', body: piece, headers: {'Content-Type': 'application/octet-stream'},
      }, `&offset=${offset}`);
      offset += piece.byteLength;
    } while (offset < bytes.byteLength);
  }

  async postResult(result) {
    await this.#fetchOk('/result', {
      method: 'POST', body: JSON.stringify(result), headers: {'Content-Type': 'application/json'},
    });
  }
}
