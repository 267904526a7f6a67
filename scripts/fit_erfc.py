#!/usr/bin/python3
"""Fits the erfc approximation of the fused Pattention's AVX2 kernels
(engine/kernels/cpu/pattention_kernels_avx2.cpp):

    erfc(z) ~= t * Q(t) * exp(-z^2),  t = 1 / (1 + z/2),  z >= 0,

with Q of degree 8. Q(t) = erfcx(z) / t is smooth on t in (0, 1] (it tends to 1/(2 sqrt(pi))
as z grows), so a polynomial fits it with a small RELATIVE error for every z, and
exp(-z^2) = exp(-x^2/2) for z = |x|/sqrt(2) is the same exponential as the Gaussian density
in GELU's derivative: the kernels compute it once. The fit is iteratively reweighted least
squares (Lawson) towards the minimax of the relative error on z in [0, 12]. Prints the
coefficients (constant first) and the largest relative error of Q evaluated in float32, as
the kernel does. Usage: /usr/bin/python3 scripts/fit_erfc.py
"""
import numpy as np
from scipy.special import erfcx

DEGREE = 8
z = np.linspace(0, 12, 300001)
t = 1 / (1 + z / 2)
y = erfcx(z) / t
u = 2 * t - 1  # Chebyshev variable on [-1, 1]
w = np.ones_like(z)
for _ in range(60):
    c = np.polynomial.chebyshev.chebfit(u, y, DEGREE, w=np.sqrt(w))
    r = np.abs(np.polynomial.chebyshev.chebval(u, c) / y - 1)
    w = w * (r / r.max() + 1e-12)
    w /= w.mean()
p = np.polynomial.Polynomial(np.polynomial.chebyshev.cheb2poly(c))
coef = p(np.polynomial.Polynomial([-1, 2])).coef  # in powers of t
acc = np.float32(coef[-1])
tf = t.astype(np.float32)
for a in coef[-2::-1]:
    acc = acc * tf + np.float32(a)
rel = np.abs(acc.astype(np.float64) / y - 1)
print("coefficients of Q, constant first:")
for a in coef:
    print(f"  {a:.17g}")
print(f"largest relative error of Q (so of erfc, before exp) on [0, 12]: {rel.max():.3g}")
