// 8/4/2-bit weights, GEMV tiles (fewer rows than columns per invocation): the same packed
// layout, offset-binary trick and per-block scale as matmul_quant.wgsl, but a word's fields are
// masked in place instead of shifted down. (word & (mask << s)) is (q + offset) * 2^s, exact in
// f32; the zero point is scaled by 2^s and the activations by 2^-s (powers of two: exact), so
// every product and sum is the one matmul_quant.wgsl computes, with one shift per field fewer.
// Scaling x costs a multiply per activation and row, so the GEMM tiles (many rows, matmul_quant.wgsl)
// do better shifting the weights, which every row of the tile shares. engines/wgsl/kernels.py picks the
// kernel from the tile.
// //@groups / //@rows / //@cols lines are unrolled by Python as in matmul_quant.wgsl.
// f32 arithmetic and accumulation.
override BITS: u32;
override BLOCK_SIZE: u32;
override FIELD_MASK: u32 = (1u << BITS) - 1u;
override SIGN_BITS: u32 = select(select(0xAAAAAAAAu, 0x88888888u, BITS == 4u), 0x80808080u, BITS == 8u);

@group(0) @binding(2) var<storage, read> wq: array<u32>;
@group(0) @binding(3) var<storage, read> scales: array<f32>;
// zero_points and zero_point(p), block p's zero in the unsigned code domain: a zero-point form's file
// (shaders/zero_point_packed.wgsl or zero_point_float.wgsl), appended by Python at binding 4.

fn accumulate(n0: u32, m0: u32) -> array<f32, TILE_M * TILE_N> {
  let per_word = 32u / BITS;
  let blocks = K / BLOCK_SIZE;
  let words_per_block = BLOCK_SIZE / per_word;
  let k4 = K / 4u;
  let shifts = vec4<u32>(0u, 1u, 2u, 3u) * BITS;
  let mask = vec4<u32>(FIELD_MASK);
  // Fields are masked in place, not shifted: (word & (mask << s)) is (q + offset) * 2^s exactly in
  // f32; x is pre-scaled by 2^-s and the zero point by 2^s, so the products are unchanged.
  //@groups let sh{g} = shifts + {g}u * 4u * BITS;
  //@groups let fm{g} = mask << sh{g};
  //@groups let down{g} = exp2(-vec4<f32>(sh{g}));
  //@groups let up{g} = exp2(vec4<f32>(sh{g}));
  //@cols let col{j} = min(n0 + {j}u, N - 1u);
  //@rows let row{t} = min(m0 + {t}u, M - 1u) * k4;
  //@rows //@cols var acc{t}_{j} = 0.0;
  for (var b = 0u; b < blocks; b++) {
    //@cols let p{j} = col{j} * blocks + b;
    //@cols let zp{j} = zero_point(p{j});
    //@groups //@cols let zps{g}_{j} = zp{j} * up{g};
    // This block's sum of x * (q - zero_point) per row and column (initialised explicitly: a
    // declaration without initializer inside a loop was not re-zeroed per iteration on SwiftShader).
    //@rows //@cols var part{t}_{j} = 0.0;
    for (var wi = 0u; wi < words_per_block; wi++) {
      // Rows are whole blocks, so block p starts at word p * words_per_block.
      //@cols let word{j} = vec4<u32>(wq[p{j} * words_per_block + wi] ^ SIGN_BITS);
      let kx = (b * BLOCK_SIZE + wi * per_word) / 4u;
      //@groups //@cols let q{g}_{j} = vec4<f32>(word{j} & fm{g}) - zps{g}_{j};
      //@groups //@rows let x{g}_{t} = x[row{t} + kx + {g}u] * down{g};
      //@groups //@rows //@cols part{t}_{j} += dot(x{g}_{t}, q{g}_{j});
    }
    //@cols let scale{j} = scales[p{j}];
    //@rows //@cols acc{t}_{j} += scale{j} * part{t}_{j};
  }
  var acc: array<f32, TILE_M * TILE_N>;
  //@rows //@cols acc[{t}u * TILE_N + {j}u] = acc{t}_{j};
  return acc;
}
