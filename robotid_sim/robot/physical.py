"""Physical consistency of a link's standard inertial parameters.

A link is described by its 10 standard parameters (SPEC §4, :data:`~robotid_sim.dynamics.chain.INERTIAL_NAMES`)

    phi = (XX, XY, XZ, YY, YZ, ZZ, MX, MY, MZ, M)

about the origin O of the link frame: the inertia tensor I_O (XX..ZZ), the first moments
m·c (MX, MY, MZ) and the mass m. With the centre of mass c = (MX, MY, MZ)/m, the inertia about
the COM is I_C = I_O − m (c·c E − c cᵀ) (parallel-axis theorem, :func:`split_inertial`).

A rigid body with a positive volume has these values only if (from weaker to stronger):

1. **positive mass**: m > 0;
2. **positive-definite rotational inertia about the COM**: the principal moments
   λ1, λ2, λ3 (eigenvalues of I_C) are all > 0;
3. **triangle inequality** of the principal moments: λi < λj + λk for every i (it implies 2.,
   since adding two of them gives λk > 0);
4. **positive-definite pseudo-inertia** (Wensing, Kim & Slotine 2017, "Linear matrix
   inequalities for physically consistent inertial parameter identification", IEEE RA-L)::

       J = [[Σ_O, m c], [m cᵀ, m]],   Σ_O = ½ tr(I_O) E − I_O      (4 × 4)

   J is the second-moment matrix ∫ [r; 1][r; 1]ᵀ dm of the body's mass distribution. Its Schur
   complement is Σ_C = ½ tr(I_C) E − I_C, with eigenvalues (λj + λk − λi)/2, so J ≻ 0 exactly
   when m > 0 and 3. holds; J is linear in phi, which makes it the constraint an LMI estimator
   can use (SPEC §8, ``lmi_wls``).

``strict=False`` asks the semidefinite versions instead (m ≥ 0, λ ≥ 0, λi ≤ λj + λk, J ⪰ 0):
limit bodies such as point masses, thin rods and massless frames pass. That is exactly what
PyBullet accepts: a link whose principal moments are negative or break the (non-strict)
triangle inequality has its inertia silently set to zero when the URDF is loaded.

Every function takes ``phi`` of shape (..., 10) (one link (10,) or a batch (n, 10)) and returns
one value per link. Comparisons use a relative tolerance ``rtol`` times the scale of the
numbers that were subtracted, ``tr(I_O)``, so that values which are exactly on the boundary
(a rod, a point mass) but went through a parallel-axis round trip are not misjudged.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from robotid_sim.errors import DataError

#: default relative tolerance of the comparisons (times tr(I_O) of the link)
DEFAULT_RTOL = 1e-12


def _phi(phi) -> np.ndarray:
    arr = np.asarray(phi, dtype=float)
    if arr.shape[-1:] != (10,):
        raise DataError(f"standard inertial parameters must have shape (..., 10), got {arr.shape}")
    return arr


def mass(phi) -> np.ndarray:
    """Mass m (...)."""
    return _phi(phi)[..., 9]


def center_of_mass(phi) -> np.ndarray:
    """COM c = (MX, MY, MZ)/m (..., 3) in the link frame; zero where m = 0."""
    phi = _phi(phi)
    m = phi[..., 9:10]
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(m != 0, phi[..., 6:9] / np.where(m != 0, m, 1.0), 0.0)


def inertia_about_origin(phi) -> np.ndarray:
    """Inertia tensor I_O (..., 3, 3) about the link frame origin."""
    phi = _phi(phi)
    XX, XY, XZ, YY, YZ, ZZ = (phi[..., k] for k in range(6))
    return np.stack(
        [np.stack([XX, XY, XZ], -1), np.stack([XY, YY, YZ], -1), np.stack([XZ, YZ, ZZ], -1)],
        axis=-2,
    )


def inertia_about_com(phi) -> np.ndarray:
    """Inertia tensor I_C (..., 3, 3) about the COM, axes of the link frame (parallel-axis theorem)."""
    phi = _phi(phi)
    c = center_of_mass(phi)
    m = phi[..., 9, None, None]
    cc = np.einsum("...i,...i->...", c, c)[..., None, None]
    return inertia_about_origin(phi) - m * (cc * np.eye(3) - c[..., :, None] * c[..., None, :])


def principal_moments(phi) -> np.ndarray:
    """Principal moments of inertia about the COM (..., 3), ascending (eigenvalues of I_C)."""
    return np.linalg.eigvalsh(inertia_about_com(phi))


def pseudo_inertia(phi) -> np.ndarray:
    """Pseudo-inertia matrix J (..., 4, 4) = [[½ tr(I_O) E − I_O, m c], [m cᵀ, m]] (Wensing et al. 2017, Eq. 10)."""
    phi = _phi(phi)
    I_O = inertia_about_origin(phi)
    trace = np.trace(I_O, axis1=-2, axis2=-1)[..., None, None]
    J = np.zeros(phi.shape[:-1] + (4, 4))
    J[..., :3, :3] = 0.5 * trace * np.eye(3) - I_O
    J[..., :3, 3] = phi[..., 6:9]
    J[..., 3, :3] = phi[..., 6:9]
    J[..., 3, 3] = phi[..., 9]
    return J


def _scale(phi: np.ndarray) -> np.ndarray:
    """tr(I_O) (...): the size of the numbers the COM quantities are computed from."""
    return np.abs(phi[..., 0]) + np.abs(phi[..., 3]) + np.abs(phi[..., 5])


def _triangle_margins(phi: np.ndarray) -> np.ndarray:
    """λj + λk − λi for each principal moment λi (..., 3); all ≥ 0 for a (limit) rigid body."""
    lam = principal_moments(phi)
    return lam.sum(-1, keepdims=True) - 2.0 * lam


def mass_positive(phi, strict: bool = True) -> np.ndarray:
    """m > 0 (``strict``) or m ≥ 0, per link (...) bool."""
    m = mass(phi)
    return m > 0 if strict else m >= 0


def inertia_positive_definite(phi, strict: bool = True, rtol: float = DEFAULT_RTOL) -> np.ndarray:
    """Inertia about the COM positive definite (``strict``) or semidefinite, per link (...) bool."""
    phi = _phi(phi)
    lam_min = principal_moments(phi)[..., 0]
    tol = rtol * _scale(phi)
    return lam_min > tol if strict else lam_min >= -tol


def triangle_inequality(phi, strict: bool = True, rtol: float = DEFAULT_RTOL) -> np.ndarray:
    """Principal moments about the COM satisfy λi < λj + λk (``strict``) or ≤, per link (...) bool."""
    phi = _phi(phi)
    margin = _triangle_margins(phi).min(-1)
    tol = rtol * _scale(phi)
    return margin > tol if strict else margin >= -tol


def pseudo_inertia_positive_definite(phi, strict: bool = True, rtol: float = DEFAULT_RTOL) -> np.ndarray:
    """Pseudo-inertia J positive definite (``strict``) or semidefinite, per link (...) bool.

    Decided through the Schur complement of J's mass entry (see the module docstring): J ≻ 0
    ⇔ m > 0 and Σ_C ≻ 0, whose eigenvalues are half the triangle margins λj + λk − λi; this is
    well scaled where the eigenvalues of J itself mix kg and kg·m². A massless J ⪰ 0 needs
    zero first moments and Σ_O ⪰ 0.
    """
    phi = _phi(phi)
    m = phi[..., 9]
    tol = rtol * _scale(phi)
    if strict:
        return (m > 0) & (_triangle_margins(phi).min(-1) > tol)
    massless = m == 0
    h_zero = np.all(phi[..., 6:9] == 0, axis=-1)
    sigma_O = np.linalg.eigvalsh(pseudo_inertia(phi)[..., :3, :3])[..., 0]
    massive_ok = (m > 0) & (_triangle_margins(phi).min(-1) >= -tol)
    return np.where(massless, h_zero & (sigma_O >= -tol), massive_ok)


def physically_consistent(phi, strict: bool = True, rtol: float = DEFAULT_RTOL) -> np.ndarray:
    """All four conditions of the module docstring hold, per link (...) bool."""
    phi = _phi(phi)
    return (
        mass_positive(phi, strict)
        & inertia_positive_definite(phi, strict, rtol)
        & triangle_inequality(phi, strict, rtol)
        & pseudo_inertia_positive_definite(phi, strict, rtol)
    )


def _fmt(values) -> str:
    return ", ".join(f"{v:.6g}" for v in np.atleast_1d(values))


def link_violations(phi, name: str = "link", strict: bool = True, rtol: float = DEFAULT_RTOL) -> list[str]:
    """Readable violations of one link (10,); empty when it is physically consistent.

    Example: ``["link2: principal moments of inertia about the COM (0.00306, 0.0236, 0.0269)
    kg·m² break the triangle inequality (0.0269 > 0.00306 + 0.0236)"]``.
    """
    phi = _phi(phi)
    if phi.shape != (10,):
        raise DataError(f"link_violations takes one link (10,), got {phi.shape}; use violations() for a batch")
    out: list[str] = []
    m = float(phi[9])
    if not mass_positive(phi, strict):
        out.append(f"{name}: mass is {'not positive' if strict else 'negative'} ({m:.6g} kg)")
    lam = principal_moments(phi)
    if not inertia_positive_definite(phi, strict, rtol):
        what = "not positive definite" if strict else "not positive semidefinite"
        out.append(f"{name}: inertia about the COM is {what} (eigenvalues {_fmt(lam)} kg·m²)")
    if not triangle_inequality(phi, strict, rtol):
        i = int(np.argmin(_triangle_margins(phi)))
        j, k = (x for x in range(3) if x != i)
        op = ">=" if strict else ">"
        out.append(
            f"{name}: principal moments of inertia about the COM ({_fmt(lam)}) kg·m² break the triangle "
            f"inequality ({lam[i]:.6g} {op} {lam[j]:.6g} + {lam[k]:.6g})"
        )
    if not out and not pseudo_inertia_positive_definite(phi, strict, rtol):
        eig = np.linalg.eigvalsh(pseudo_inertia(phi))
        what = "not positive definite" if strict else "not positive semidefinite"
        out.append(f"{name}: pseudo-inertia matrix is {what} (eigenvalues {_fmt(eig)})")
    return out


def violations(phis, names: Sequence[str] | None = None, strict: bool = True, rtol: float = DEFAULT_RTOL) -> list[str]:
    """Readable violations of every link of ``phis`` (n, 10), in link order (empty when all are consistent).

    Args:
        phis: standard parameters of n links.
        names: one name per link (default ``link1`` ... ``linkn``).
        strict: positive definite (True) or semidefinite (False) conditions.
        rtol: relative tolerance, see the module docstring.
    """
    phis = np.atleast_2d(_phi(phis))
    if phis.ndim != 2:
        raise DataError(f"violations takes (n, 10) parameters, got {phis.shape}")
    names = list(names) if names is not None else [f"link{i + 1}" for i in range(len(phis))]
    if len(names) != len(phis):
        raise DataError(f"{len(phis)} links but {len(names)} names")
    ok = physically_consistent(phis, strict, rtol)
    out: list[str] = []
    for i in np.flatnonzero(~ok):
        out += link_violations(phis[i], names[i], strict, rtol)
    return out
