"""filterpy's extended Kalman filter with seed 004's Euler prediction (imported when an ``ekf`` fit starts)."""

from __future__ import annotations

import numpy as np
from filterpy.kalman import ExtendedKalmanFilter


class EulerEKF(ExtendedKalmanFilter):
    """filterpy's EKF with the prediction of seed 004 Eq. 42–43: x_{k+1} = x_k + Δt·ẋ_k, with
    ẋ = [qd, qdd, 0] and qdd the model's forward dynamics (set in :attr:`qdd` before ``predict``)."""

    def __init__(self, dim_x: int, dim_z: int, n: int, dt: float):
        super().__init__(dim_x, dim_z)
        self.n, self.dt = n, dt
        self.qdd = np.zeros(n)

    def predict_x(self, u=0):
        n, x = self.n, self.x[:, 0]
        step = np.concatenate([x[n : 2 * n], self.qdd, np.zeros(x.shape[0] - 2 * n)])
        self.x = (x + self.dt * step)[:, None]
