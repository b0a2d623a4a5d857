// Dequantize packed 8/4/2-bit weights to float32 once: the GEMM path's first step (M spans
// several row tiles, so the fused kernels would decode every weight once per row tile). It runs
// in the same compute pass right before matmul_f32.wgsl and writes W[N, K] as float32 into a
// scratch buffer (counted in the row's GPU buffer bytes) that the float32 kernel then reads.
// Same packed layout and arithmetic as matmul_quant.wgsl: (q - zero_point) * scale, with
// q - zero_point exact through the offset-binary XOR. One invocation per block (its zero point
// and scale read once); //@groups lines are repeated by Python once per vec4 of a word, and
// {WORKGROUP} is filled in by Python (engines/wgsl/kernels.py), which also sizes the dispatch.
override K: u32;
override N: u32;
override BITS: u32;
override BLOCK_SIZE: u32;
override FIELD_MASK: u32 = (1u << BITS) - 1u;
override SIGN_BITS: u32 = select(select(0xAAAAAAAAu, 0x88888888u, BITS == 4u), 0x80808080u, BITS == 8u);

@group(0) @binding(0) var<storage, read> wq: array<u32>;
@group(0) @binding(1) var<storage, read> scales: array<f32>;
// zero_points and zero_point(p), block p's zero in the unsigned code domain: a zero-point form's file
// (shaders/zero_point_packed.wgsl or zero_point_float.wgsl), appended by Python at binding 2.
@group(0) @binding(3) var<storage, read_write> wf: array<vec4<f32>>;

@compute @workgroup_size({WORKGROUP})
fn main(@builtin(global_invocation_id) gid: vec3<u32>,
        @builtin(num_workgroups) groups: vec3<u32>) {
  let per_word = 32u / BITS;
  let words_per_block = BLOCK_SIZE / per_word;
  let p = gid.y * groups.x * {WORKGROUP}u + gid.x;  // the block this invocation decodes
  if (p >= N * (K / BLOCK_SIZE)) { return; }
  let zp = vec4<f32>(zero_point(p));
  let scale = scales[p];
  let shifts = vec4<u32>(0u, 1u, 2u, 3u) * BITS;
  let mask = vec4<u32>(FIELD_MASK);
  // Rows are whole blocks: block p's words start at p * words_per_block, its floats at p * BLOCK_SIZE.
  for (var wi = 0u; wi < words_per_block; wi++) {
    let word = vec4<u32>(wq[p * words_per_block + wi] ^ SIGN_BITS);
    let base = (p * BLOCK_SIZE + wi * per_word) / 4u;
    //@groups wf[base + {g}u] = (vec4<f32>((word >> (shifts + {g}u * 4u * BITS)) & mask) - zp) * scale;
  }
}
