// 8/4/2-bit weights: signed integers packed into u32 words (first element in the lowest bits,
// rows contiguous), blockwise float32 scales and zero points along K (packed integers or float32:
// zero_point(p), appended by Python). Computes exactly
// what WebNN dequantizeLinear -> matmul does, (q - zero_point) * scale, rearranged:
//   * a whole word is decoded at once: XOR with the sign bit of every field turns the
//     two's-complement fields into offset binary (q + 2^(BITS-1)), then one vector shift and
//     mask gives four fields in order; the zero point gets the same offset, so the difference
//     q - zero_point is exact (small integers in f32);
//   * scale and zero point are applied once per block: sum_k x * (q - zp) is accumulated over
//     the block, then multiplied by the block's scale;
//   * each decoded weight vec4 meets the TILE_M rows of the invocation's tile, each activation
//     vec4 its TILE_N columns.
// Lines starting with //@groups are repeated by Python once per vec4 of a word ({g}: 1, 2, 4
// for 8, 4, 2 bits), then //@rows once per row ({t}) and //@cols once per column ({j}) of the
// tile: loops over them cost more than their bodies on software adapters.
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
  //@cols let col{j} = min(n0 + {j}u, N - 1u);
  //@rows let row{t} = min(m0 + {t}u, M - 1u) * k4;
  //@rows //@cols var acc{t}_{j} = 0.0;
  for (var b = 0u; b < blocks; b++) {
    //@cols let p{j} = col{j} * blocks + b;
    //@cols let zp{j} = vec4<f32>(zero_point(p{j}));
    // This block's sum of x * (q - zero_point) per row and column (initialised explicitly: a
    // declaration without initializer inside a loop was not re-zeroed per iteration on SwiftShader).
    //@rows //@cols var part{t}_{j} = 0.0;
    for (var wi = 0u; wi < words_per_block; wi++) {
      // Rows are whole blocks, so block p starts at word p * words_per_block.
      //@cols let word{j} = vec4<u32>(wq[p{j} * words_per_block + wi] ^ SIGN_BITS);
      let kx = (b * BLOCK_SIZE + wi * per_word) / 4u;
      //@groups //@cols let q{g}_{j} = vec4<f32>((word{j} >> (shifts + {g}u * 4u * BITS)) & mask) - zp{j};
      //@groups //@rows let x{g}_{t} = x[row{t} + kx + {g}u];
      //@groups //@rows //@cols part{t}_{j} += dot(x{g}_{t}, q{g}_{j});
    }
    //@cols let scale{j} = scales[p{j}];
    //@rows //@cols acc{t}_{j} += scale{j} * part{t}_{j};
  }
  var acc: array<f32, TILE_M * TILE_N>;
  //@rows //@cols acc[{t}u * TILE_N + {j}u] = acc{t}_{j};
  return acc;
}
