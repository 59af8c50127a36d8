"""The error function ``erf`` and its complement ``erfc``, which NumPy does not provide.

``erf(x) = 2/sqrt(pi) * integral_0^x exp(-t^2) dt`` and ``erfc(x) = 1 - erf(x)``.
The exact GELU needs ``Phi(x) = erfc(-x / sqrt(2)) / 2``: written with ``erfc``
it keeps full relative accuracy for very negative ``x``, where
``(1 + erf(x / sqrt(2))) / 2`` would cancel most of its digits.

On CuPy we call ``cupyx.scipy.special.erf``. On NumPy we evaluate W. J. Cody's
rational Chebyshev approximations (Math. Comp. 23 (1969) 631-637; the
coefficients of his netlib routine CALERF), accurate to about 1e-16 in float64,
which the float64 gradient check of GELU needs: a cruder erf would make the
forward pass disagree with the exact derivative used in the backward pass.

Three ranges of ``y = |x|``, each a ratio of polynomials:

* ``y <= 0.46875``:     ``erf(y)  = y * P(y^2) / Q(y^2)``
* ``0.46875 < y <= 4``: ``erfc(y) = exp(-y^2) * P(y) / Q(y)``
* ``y > 4``:            ``erfc(y) = exp(-y^2) / y * (1/sqrt(pi) - z P(z) / Q(z))``, ``z = 1/y^2``

and ``erf(x) = sign(x) * (1 - erfc(|x|))``, ``erfc(-y) = 2 - erfc(y)``.
Each range is evaluated on its own elements only (picked with a boolean mask,
written back through it): no Python loop over elements, and about a third of
the arithmetic of evaluating every range on the whole array.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from ..backend import is_cupy, xp

# Cody's coefficients, lowest-order term last as in his tables (Horner order below).
_SMALL_NUM = (3.1611237438705656, 113.864154151050156, 377.485237685302021, 3209.37758913846947)
_SMALL_NUM_TOP = 0.185777706184603153
_SMALL_DEN = (23.6012909523441209, 244.024637934444173, 1282.61652607737228, 2844.23683343917062)

_MID_NUM = (
    0.564188496988670089, 8.88314979438837594, 66.1191906371416295, 298.635138197400131,
    881.95222124176909, 1712.04761263407058, 2051.07837782607147, 1230.33935479799725,
)
_MID_NUM_TOP = 2.15311535474403846e-8
_MID_DEN = (
    15.7449261107098347, 117.693950891312499, 537.181101862009858, 1621.38957456669019,
    3290.79923573345963, 4362.61909014324716, 3439.36767414372164, 1230.33935480374942,
)

_LARGE_NUM = (0.305326634961232344, 0.360344899949804439, 0.125781726111229246,
              0.0160837851487422766, 6.58749161529837803e-4)
_LARGE_NUM_TOP = 0.0163153871373020978
_LARGE_DEN = (2.56852019228982242, 1.87295284992346047, 0.527905102951428412,
              0.0605183413124413191, 0.00233520497626869185)

_SMALL_LIMIT = 0.46875
_MID_LIMIT = 4.0
_UNDERFLOW_LIMIT = 27.0  # erfc(27) < 1e-318: beyond it erf is +-1 exactly
_INV_SQRT_PI = 1.0 / math.sqrt(math.pi)


def _rational(t: Any, top: float, numerator: tuple, denominator: tuple) -> Any:
    """``(top t^n + a_0 t^(n-1) + ... + a_last) / (t^n + b_0 t^(n-1) + ... + b_last)`` by Horner."""
    num = top * t
    den = t
    for a_coef, b_coef in zip(numerator[:-1], denominator[:-1]):
        num = (num + a_coef) * t
        den = (den + b_coef) * t
    return (num + numerator[-1]) / (den + denominator[-1])


def _erf_small(y: Any) -> Any:
    """erf(y) for 0 <= y <= 0.46875."""
    return y * _rational(y * y, _SMALL_NUM_TOP, _SMALL_NUM, _SMALL_DEN)


def _erfc_mid(y: Any) -> Any:
    """erfc(y) for 0.46875 < y <= 4, computed directly: no cancellation."""
    return xp.exp(-y * y) * _rational(y, _MID_NUM_TOP, _MID_NUM, _MID_DEN)


def _erfc_large(y: Any) -> Any:
    """erfc(y) for y > 4 (y is clipped to 27, beyond which erfc underflows to 0)."""
    y = xp.minimum(y, _UNDERFLOW_LIMIT)
    z = 1.0 / (y * y)
    tail = z * _rational(z, _LARGE_NUM_TOP, _LARGE_NUM, _LARGE_DEN)
    return xp.exp(-y * y) / y * (_INV_SQRT_PI - tail)


def _by_range(y: Any, from_erf: Callable, from_erfc: Callable) -> Any:
    """For ``y = |x| >= 0``: ``from_erf(erf(y))`` where ``y <= 0.46875``, ``from_erfc(erfc(y))``
    elsewhere, each range evaluated on its own elements (the one beyond 4, empty for most
    inputs, only when some element is there)."""
    out = xp.empty_like(y)
    near = y <= _SMALL_LIMIT
    out[near] = from_erf(_erf_small(y[near]))
    rest = ~near
    y_rest = y[rest]
    far = y_rest > _MID_LIMIT
    if bool(far.any()):
        erfc_rest = xp.empty_like(y_rest)
        erfc_rest[~far] = _erfc_mid(y_rest[~far])
        erfc_rest[far] = _erfc_large(y_rest[far])
    else:
        erfc_rest = _erfc_mid(y_rest)
    out[rest] = from_erfc(erfc_rest)
    return out


def erf(x: Any) -> Any:
    """The error function, elementwise, in the dtype of ``x``."""
    if is_cupy():
        import cupyx.scipy.special

        return cupyx.scipy.special.erf(x)
    erf_abs = _by_range(xp.abs(x), lambda erf_y: erf_y, lambda erfc_y: 1.0 - erfc_y)
    return xp.copysign(erf_abs, x)


def erfc(x: Any) -> Any:
    """The complementary error function ``1 - erf(x)``, accurate in both tails."""
    if is_cupy():
        import cupyx.scipy.special

        return cupyx.scipy.special.erfc(x)
    erfc_abs = _by_range(xp.abs(x), lambda erf_y: 1.0 - erf_y, lambda erfc_y: erfc_y)
    return xp.where(x < 0, 2.0 - erfc_abs, erfc_abs)
