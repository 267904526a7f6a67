#!/usr/bin/python3
"""Fits the erfc approximation of the fused Pattention's AVX2 kernels
(engine/pattention_kernels_avx2.cpp):

    erfc(z) ~= t * exp(P(t) - z^2),  t = 1 / (1 + z/2),  z >= 0,

with P of degree 9, by iteratively reweighted least squares towards the minimax fit of
log(erfc(z)/t) + z^2 on z in [0, 10] (beyond 10, erfc underflows float32). Prints the
coefficients of P (constant first) and the largest relative error of erfc when P is
evaluated in float32, as the kernel does. Usage: /usr/bin/python3 scripts/fit_erfc.py
"""
import numpy as np
from scipy.special import erfc

DEGREE = 9
z = np.linspace(0, 10, 200001)
t = 1 / (1 + z / 2)
y = np.log(erfc(z) / t) + z * z
u = 2 * t - 1  # Chebyshev variable on [-1, 1]
w = np.ones_like(z)
for _ in range(50):  # Lawson's iteration
    c = np.polynomial.chebyshev.chebfit(u, y, DEGREE, w=np.sqrt(w))
    r = np.abs(np.polynomial.chebyshev.chebval(u, c) - y)
    w = w * (r / r.max() + 1e-12)
    w /= w.mean()
p = np.polynomial.Polynomial(np.polynomial.chebyshev.cheb2poly(c))
coef = p(np.polynomial.Polynomial([-1, 2])).coef  # in powers of t
acc = np.float32(coef[-1])
tf = t.astype(np.float32)
for a in coef[-2::-1]:
    acc = acc * tf + np.float32(a)
rel = np.abs(tf.astype(np.float64) * np.exp(acc.astype(np.float64) - z * z) / erfc(z) - 1)
print("coefficients of P, constant first:")
for a in coef:
    print(f"  {a:.17g}")
print(f"largest relative error of erfc on [0, 10]: {rel.max():.3g}")
