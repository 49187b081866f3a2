"""``lab/power_bound.py``: the Neyman-Pearson bound's arithmetic."""

from __future__ import annotations

import numpy as np
from scipy import stats as sps

from lab import power_bound


def test_same_rate_bound_is_the_one_sided_z_test() -> None:
    # An effect 3.97 sd wide at 1% false alarms: z(0.99) + z(0.95) = 2.326 + 1.645.
    d = np.array([sps.norm.isf(0.01) + sps.norm.isf(0.05)])
    assert abs(power_bound.power(d, np.array([sps.norm.isf(0.01)]))[0] - 0.95) < 1e-12


def test_shared_out_false_alarms_average_the_rate_and_never_lose_power() -> None:
    d = np.array([0.5, 1.0, 2.0, 4.0])
    z = power_bound.shared_out(d, 0.01)
    assert abs(np.mean(sps.norm.sf(z)) - 0.01) < 1e-9
    same = power_bound.power(d, np.full_like(d, sps.norm.isf(0.01)))
    assert np.mean(power_bound.power(d, z)) >= np.mean(same)
    # The marginal power per false alarm is equal across checks at the optimum.
    slopes = sps.norm.pdf(z - d) / sps.norm.pdf(z)
    assert np.allclose(slopes, slopes[0])


def test_within_limit_is_certain_without_spread_and_rare_with_much() -> None:
    rng = np.random.default_rng(0)
    assert power_bound.within_limit(1e-6, 5, 1.15, rng) == 1.0
    assert power_bound.within_limit(0.5, 5, 1.15, rng) < 0.01


def test_shared_out_holds_when_every_check_is_quiet() -> None:
    # sds of 0.1% (a GPU's) put every d near 180; identical runs give an sd floor of 1e-9.
    for d in (np.array([150.0, 180.0, 220.0]), np.array([2.2e8, 3.0])):
        z = power_bound.shared_out(d, 0.01)
        assert abs(np.mean(sps.norm.sf(z)) - 0.01) < 1e-9
