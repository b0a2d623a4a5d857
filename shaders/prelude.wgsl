// Prelude of every matmul kernel, prepended by Python (fixed_web_platform/engines/wgsl/kernels.py), which
// also fills in the tile sizes (chosen from the shape) and tells the page the dispatch size, so
// neither the kernels nor the page repeat them. out[M, N] = x[M, K] @ W[N, K]^T: one invocation
// per tile of TILE_M rows x TILE_N columns; each kernel supplies accumulate(n0, m0) for its weight
// format (returning the tile row-major, acc[t * TILE_N + j]) and binds its weight buffers from
// binding 2 on. Reads past the last row or column are clamped to it (no branch in the inner
// loop); only the writes are guarded. x is float32 (vec4) or, for int8 activations, four int8
// to a u32 word ({X_ELEMENT}, filled in by Python; the DP4A kernel reads their scale and zero
// point at binding 6).
override M: u32;
override K: u32;
override N: u32;
const TILE_M: u32 = {TILE_M}u;
const TILE_N: u32 = {TILE_N}u;
const WORKGROUP_X: u32 = {WORKGROUP_X}u;

@group(0) @binding(0) var<storage, read> x: array<{X_ELEMENT}>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(WORKGROUP_X)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let n0 = gid.x * TILE_N;
  let m0 = gid.y * TILE_M;
  if (n0 >= N || m0 >= M) { return; }
  let acc = accumulate(n0, m0);
  for (var t = 0u; t < TILE_M; t++) {
    for (var j = 0u; j < TILE_N; j++) {
      if (m0 + t < M && n0 + j < N) { out[(m0 + t) * N + n0 + j] = acc[t * TILE_N + j]; }
    }
  }
}
