// 16-bit weights with shader-f16: weights read as vec4<f16>, activations converted to f16,
// products and 4-term sums in f16, accumulated across K in f32 (a long f16 sum loses too much).
enable f16;

@group(0) @binding(2) var<storage, read> w: array<vec4<f16>>;

fn accumulate(n: u32, m0: u32) -> array<f32, TILE_M> {
  let k4 = K / 4u;
  var acc: array<f32, TILE_M>;
  for (var k = 0u; k < k4; k++) {
    let wv = w[n * k4 + k];
    for (var t = 0u; t < TILE_M; t++) {
      if (m0 + t < M) {
        let xv = vec4<f16>(x[(m0 + t) * k4 + k]);
        acc[t] += f32(dot(xv, wv));
      }
    }
  }
  return acc;
}
