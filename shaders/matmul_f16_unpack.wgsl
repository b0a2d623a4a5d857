// 16-bit weights without shader-f16: float16 bit patterns, two per u32 word (element 0 in the
// low half), unpacked with unpack2x16float; arithmetic and accumulation in f32. K 4 at a time.
@group(0) @binding(2) var<storage, read> w: array<vec2<u32>>;

fn accumulate(n: u32, m0: u32) -> array<f32, TILE_M> {
  let k4 = K / 4u;
  var acc: array<f32, TILE_M>;
  for (var k = 0u; k < k4; k++) {
    let packed = w[n * k4 + k];
    let wv = vec4<f32>(unpack2x16float(packed.x), unpack2x16float(packed.y));
    for (var t = 0u; t < TILE_M; t++) {
      if (m0 + t < M) { acc[t] += dot(x[(m0 + t) * k4 + k], wv); }
    }
  }
  return acc;
}
