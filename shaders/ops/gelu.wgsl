// erfc with fractional error below 1.2e-7 everywhere (Numerical Recipes' erfcc, Chebyshev fit).
fn erfc_nr(v: f32) -> f32 {
  let z = abs(v);
  let t = 1.0 / (1.0 + 0.5 * z);
  let r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
          t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
          t * (-0.82215223 + t * 0.17087277)))))))));
  return select(2.0 - r, r, v >= 0.0);
}

// 0.5 x (1 + erf(x / sqrt 2)) written with erfc, which keeps its precision for negative x.
fn gelu(v: f32) -> f32 {
  return 0.5 * v * erfc_nr(-v * 0.70710678118654752);
}
