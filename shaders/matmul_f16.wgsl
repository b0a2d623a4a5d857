// 16-bit weights with shader-f16: weights read as vec4<f16>, activations converted to f16,
// products and 4-term sums in f16, accumulated across K in f32 (a long f16 sum loses too much).
// Same TILE_M x TILE_N tile per invocation as the other kernels (unrolled by Python: //@rows,
// //@cols).
enable f16;

@group(0) @binding(2) var<storage, read> w: array<vec4<f16>>;

fn accumulate(n0: u32, m0: u32) -> array<f32, TILE_M * TILE_N> {
  let k4 = K / 4u;
  //@cols let wrow{j} = min(n0 + {j}u, N - 1u) * k4;
  //@rows let row{t} = min(m0 + {t}u, M - 1u) * k4;
  //@rows //@cols var acc{t}_{j} = 0.0;
  for (var k = 0u; k < k4; k++) {
    //@cols let wv{j} = w[wrow{j} + k];
    //@rows let xv{t} = vec4<f16>(x[row{t} + k]);
    //@rows //@cols acc{t}_{j} += f32(dot(xv{t}, wv{j}));
  }
  var acc: array<f32, TILE_M * TILE_N>;
  //@rows //@cols acc[{t}u * TILE_N + {j}u] = acc{t}_{j};
  return acc;
}
