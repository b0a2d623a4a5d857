// Float32 baseline. K is read 4 at a time; each invocation computes a TILE_M x TILE_N tile, so
// each weight vec4 meets TILE_M rows and each activation vec4 TILE_N columns, exactly as in the
// 16-bit and quantized kernels (precisions compared on the same algorithm). Lines starting with
// //@rows / //@cols are repeated by Python once per row ({t}) / column ({j}) of the tile: loops
// and arrays indexed in loops cost more than their bodies on software adapters.
@group(0) @binding(2) var<storage, read> w: array<vec4<f32>>;

fn accumulate(n0: u32, m0: u32) -> array<f32, TILE_M * TILE_N> {
  let k4 = K / 4u;
  //@cols let wrow{j} = min(n0 + {j}u, N - 1u) * k4;
  //@rows let row{t} = min(m0 + {t}u, M - 1u) * k4;
  //@rows //@cols var acc{t}_{j} = 0.0;
  for (var k = 0u; k < k4; k++) {
    //@cols let wv{j} = w[wrow{j} + k];
    //@rows let xv{t} = x[row{t} + k];
    //@rows //@cols acc{t}_{j} += dot(xv{t}, wv{j});
  }
  var acc: array<f32, TILE_M * TILE_N>;
  //@rows //@cols acc[{t}u * TILE_N + {j}u] = acc{t}_{j};
  return acc;
}
