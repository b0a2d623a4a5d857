// Talks to the driver's job API. The job id and token come from this page's URL; every request
// carries the token, and the server rejects posts without it.
export class JobClient {
  constructor(jobId, token) {
    this.base = `/api/jobs/${encodeURIComponent(jobId)}`;
    this.query = `?token=${encodeURIComponent(token)}`;
  }

  static fromLocation() {
    const params = new URLSearchParams(window.location.search);
    return new JobClient(params.get('job') ?? '', params.get('token') ?? '');
  }

  async #fetchOk(path, init) {
    const response = await fetch(`${this.base}${path}${this.query}`, init);
    if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
    return response;
  }

  async spec() { return (await this.#fetchOk('/spec')).json(); }

  async tensor(name) {
    return (await this.#fetchOk(`/tensors/${encodeURIComponent(name)}`)).arrayBuffer();
  }

  async postOutput(buffer) {
    await this.#fetchOk('/output', {
      method: 'POST', body: buffer, headers: {'Content-Type': 'application/octet-stream'},
    });
  }

  async postResult(result) {
    await this.#fetchOk('/result', {
      method: 'POST', body: JSON.stringify(result), headers: {'Content-Type': 'application/json'},
    });
  }
}
