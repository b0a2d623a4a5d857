// Gated activation: g = act(g) * u, element by element (g the gate projection's output, u the up
// one's). ACT 0: SiLU (SwiGLU, Llama); 1: GELU's tanh approximation (GeGLU, Gemma), as
// architectures/gemma3/reference.py.
override COUNT: u32;
override ACT: u32 = 0u;
const SQRT_2_OVER_PI: f32 = 0.7978845608028654;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i >= COUNT) { return; }
  let a = g[i];
  var act: f32;
  if (ACT == 1u) {
    // tanh's argument clamped: some adapters compute it from exp, which overflows (tanh(10) is 1 in f32)
    act = 0.5 * a * (1.0 + tanh(clamp(SQRT_2_OVER_PI * (a + 0.044715 * a * a * a), -10.0, 10.0)));
  } else {
    act = a / (1.0 + exp(-a));
  }
  g[i] = act * u[i];
}
