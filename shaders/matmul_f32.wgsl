// Float32 baseline: out[M,N] = x[M,K] @ w[N,K]^T. One invocation per output column n and a
// tile of TILE_M rows (each weight vector is loaded once per tile); K is read 4 at a time, like
// the 16- and quantized kernels, so the precisions are compared on kernels of the same shape.
override M: u32;
override K: u32;
override N: u32;
const TILE_M: u32 = 4u;

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> w: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let n = gid.x;
  let m0 = gid.y * TILE_M;
  if (n >= N || m0 >= M) { return; }
  let k4 = K / 4u;
  var acc = array<f32, TILE_M>(0.0, 0.0, 0.0, 0.0);
  for (var k = 0u; k < k4; k++) {
    let wv = w[n * k4 + k];
    for (var t = 0u; t < TILE_M; t++) {
      if (m0 + t < M) { acc[t] += dot(x[(m0 + t) * k4 + k], wv); }
    }
  }
  for (var t = 0u; t < TILE_M; t++) {
    if (m0 + t < M) { out[(m0 + t) * N + n] = acc[t]; }
  }
}
