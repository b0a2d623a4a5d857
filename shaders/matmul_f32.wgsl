// Float32 baseline. K is read 4 at a time, like the 16-bit and quantized kernels, so the
// precisions are compared on kernels of the same shape.
@group(0) @binding(2) var<storage, read> w: array<vec4<f32>>;

fn accumulate(n: u32, m0: u32) -> array<f32, TILE_M> {
  let k4 = K / 4u;
  var acc: array<f32, TILE_M>;
  for (var k = 0u; k < k4; k++) {
    let wv = w[n * k4 + k];
    for (var t = 0u; t < TILE_M; t++) {
      if (m0 + t < M) { acc[t] += dot(x[(m0 + t) * k4 + k], wv); }
    }
  }
  return acc;
}
