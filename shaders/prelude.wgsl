// Prelude of every matmul kernel, prepended by Python (fixed_web_platform/engines/wgsl.py), which
// also fills in the tile sizes and tells the page the dispatch size, so neither the kernels nor
// the page repeat them. out[M, N] = x[M, K] @ W[N, K]^T: one invocation per output column n and
// a tile of TILE_M rows; each kernel supplies accumulate(n, m0) for its weight format and binds
// its weight buffers from binding 2 on.
override M: u32;
override K: u32;
override N: u32;
const TILE_M: u32 = {TILE_M}u;
const WORKGROUP_X: u32 = {WORKGROUP_X}u;

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(WORKGROUP_X)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let n = gid.x;
  let m0 = gid.y * TILE_M;
  if (n >= N || m0 >= M) { return; }
  let acc = accumulate(n, m0);
  for (var t = 0u; t < TILE_M; t++) {
    if (m0 + t < M) { out[(m0 + t) * N + n] = acc[t]; }
  }
}
