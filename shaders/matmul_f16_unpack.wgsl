// 16-bit weights without shader-f16: float16 bit patterns, two per u32 word (element 0 in the
// low half), unpacked with unpack2x16float; arithmetic and accumulation in f32. K 4 at a time,
// the same TILE_M x TILE_N tile per invocation as the other kernels (each weight unpacked once for
// TILE_M rows; unrolled by Python: //@rows, //@cols).
@group(0) @binding(2) var<storage, read> w: array<vec2<u32>>;

fn accumulate(n0: u32, m0: u32) -> array<f32, TILE_M * TILE_N> {
  let k4 = K / 4u;
  //@cols let wrow{j} = min(n0 + {j}u, N - 1u) * k4;
  //@rows let row{t} = min(m0 + {t}u, M - 1u) * k4;
  //@rows //@cols var acc{t}_{j} = 0.0;
  for (var k = 0u; k < k4; k++) {
    //@cols let packed{j} = w[wrow{j} + k];
    //@cols let wv{j} = vec4<f32>(unpack2x16float(packed{j}.x), unpack2x16float(packed{j}.y));
    //@rows let xv{t} = x[row{t} + k];
    //@rows //@cols acc{t}_{j} += dot(xv{t}, wv{j});
  }
  var acc: array<f32, TILE_M * TILE_N>;
  //@rows //@cols acc[{t}u * TILE_N + {j}u] = acc{t}_{j};
  return acc;
}
