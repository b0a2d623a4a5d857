// 16-bit weights without shader-f16: pairs of float16 bit patterns in u32 words (element 0 in the
// low half), unpacked with unpack2x16float; arithmetic and accumulation in f32.
override M: u32;
override K: u32;
override N: u32;
const TILE_M: u32 = 4u;

@group(0) @binding(0) var<storage, read> x: array<vec2<f32>>;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let n = gid.x;
  let m0 = gid.y * TILE_M;
  if (n >= N || m0 >= M) { return; }
  let half_k = K / 2u;
  var acc = array<f32, TILE_M>(0.0, 0.0, 0.0, 0.0);
  for (var k2 = 0u; k2 < half_k; k2++) {
    let wv = unpack2x16float(w[n * half_k + k2]);
    for (var t = 0u; t < TILE_M; t++) {
      if (m0 + t < M) {
        let xv = x[(m0 + t) * half_k + k2];
        acc[t] += xv.x * wv.x + xv.y * wv.y;
      }
    }
  }
  for (var t = 0u; t < TILE_M; t++) {
    if (m0 + t < M) { out[(m0 + t) * N + n] = acc[t]; }
  }
}
