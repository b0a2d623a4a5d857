// Prelude of a whole model's linear layers, prepended by Python (engines/wgsl/encoder.py) to the
// matmul kernels' own bodies (shaders/matmul_*.wgsl), so the packed weight formats live in one
// place. out[M, N] = x[M, K] @ W[N, K]^T + bias, then GELU (exact, erf) where GELU is set.
// Same bindings as shaders/prelude.wgsl (x 0, out 1, the kernel's weights from 2 on, the DP4A
// kernel's x scale and zero point at 6) plus the bias at binding 5. One invocation per tile of
// TILE_M rows x TILE_N columns (chosen in Python from the shape, as for the matmul sweep);
// accumulate(n0, m0) returns it row-major.
override M: u32;
override K: u32;
override N: u32;
override GELU: bool = false;
const TILE_M: u32 = {TILE_M}u;
const TILE_N: u32 = {TILE_N}u;
const WORKGROUP_X: u32 = {WORKGROUP_X}u;

@group(0) @binding(0) var<storage, read> x: array<{X_ELEMENT}>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<storage, read> bias: array<f32>;

//@include gelu.wgsl

@compute @workgroup_size(WORKGROUP_X)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let n0 = gid.x * TILE_N;
  let m0 = gid.y * TILE_M;
  if (n0 >= N || m0 >= M) { return; }
  let acc = accumulate(n0, m0);
  for (var j = 0u; j < TILE_N; j++) {
    let n = n0 + j;
    if (n >= N) { break; }
    let b = bias[n];
    for (var t = 0u; t < TILE_M; t++) {
      if (m0 + t < M) {
        var v = acc[t * TILE_N + j] + b;
        if (GELU) { v = gelu(v); }
        out[(m0 + t) * N + n] = v;
      }
    }
  }
}
