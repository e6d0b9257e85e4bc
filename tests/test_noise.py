"""Noise models (SPEC §5): SNR, absolute std, outliers, quantisation, current measurement."""

from __future__ import annotations

import numpy as np
import pytest

from robotid_sim.errors import ConfigError, DataError
from robotid_sim.sim.noise import (
    CurrentMeasurement,
    GaussianSNR,
    GaussianStd,
    NoiseChain,
    Outliers,
    Quantization,
    measured_snr_db,
    noise_from_config,
)

N_SAMPLES = 20000


@pytest.fixture(scope="module")
def smooth_signals() -> dict[str, np.ndarray]:
    """A smooth 3-joint sinusoidal motion, N = 20000 at 1 kHz, with exact derivatives."""
    t = np.arange(N_SAMPLES) * 1e-3
    w = 2 * np.pi * np.array([0.2, 0.35, 0.5])
    amp = np.array([1.0, 0.5, 0.8])
    offset = np.array([0.3, -0.2, 0.0])
    phase = w * t[:, None] + np.array([0.0, 1.0, 2.0])
    q = offset + amp * np.sin(phase)
    return {
        "q": q,
        "qd": amp * w * np.cos(phase),
        "qdd": -amp * w**2 * np.sin(phase),
        "tau": 5.0 * np.sin(phase) + 2.0,
    }


def _fresh(signals):
    return {key: value.copy() for key, value in signals.items()}


def test_gaussian_snr_reaches_requested_snr_within_half_db(smooth_signals):
    chain = noise_from_config({"q": {"snr_db": 60}, "qd": {"snr_db": 40}, "qdd": {"snr_db": 20}})
    noisy = chain.apply(smooth_signals, np.random.default_rng(0))
    for signal, snr in (("q", 60.0), ("qd", 40.0), ("qdd", 20.0)):
        measured = measured_snr_db(smooth_signals[signal], noisy[signal])
        np.testing.assert_allclose(measured, snr, atol=0.5)
    np.testing.assert_array_equal(noisy["tau"], smooth_signals["tau"])


def test_gaussian_snr_accepts_one_value_per_joint(smooth_signals):
    noisy = GaussianSNR("q", [70.0, 50.0, 30.0]).apply(smooth_signals, np.random.default_rng(1))
    np.testing.assert_allclose(measured_snr_db(smooth_signals["q"], noisy["q"]), [70.0, 50.0, 30.0], atol=0.5)


def test_gaussian_std_adds_noise_of_the_requested_std(smooth_signals):
    noisy = GaussianStd("tau", [0.5, 1.0, 0.0]).apply(smooth_signals, np.random.default_rng(2))
    std = (noisy["tau"] - smooth_signals["tau"]).std(axis=0)
    np.testing.assert_allclose(std[:2], [0.5, 1.0], rtol=0.03)
    assert std[2] == 0.0


def test_outliers_hit_the_requested_fraction_within_20_percent(smooth_signals):
    chain = noise_from_config(
        {
            "tau": {"std": 0.1},
            "outliers": {"fraction": 0.005, "magnitude": 10.0, "signal": "tau"},
        }
    )
    noisy = chain.apply(smooth_signals, np.random.default_rng(3))
    spikes = np.abs(noisy["tau"] - smooth_signals["tau"]) > 4.0  # 0.1 std noise never gets there
    np.testing.assert_allclose(spikes.mean(axis=0), 0.005, rtol=0.2)


def test_outlier_spikes_lie_between_half_and_full_magnitude_with_both_signs(smooth_signals):
    noisy = Outliers(0.01, 8.0).apply(smooth_signals, np.random.default_rng(4))
    change = (noisy["tau"] - smooth_signals["tau"]).ravel()
    spikes = change[change != 0.0]
    assert spikes.size == 3 * 200
    assert np.all((np.abs(spikes) >= 4.0 - 1e-9) & (np.abs(spikes) <= 8.0 + 1e-9))
    assert 0.4 < np.mean(spikes > 0) < 0.6


def test_quantization_rounds_to_multiples_of_the_resolution(smooth_signals):
    resolution = 2 * np.pi / 2**17
    noisy = Quantization(resolution).apply(smooth_signals, np.random.default_rng(5))
    steps = noisy["q"] / resolution
    np.testing.assert_allclose(steps, np.round(steps), atol=1e-6)
    assert np.max(np.abs(noisy["q"] - smooth_signals["q"])) <= resolution / 2 * (1 + 1e-9)
    assert np.any(noisy["q"] != smooth_signals["q"])


def test_current_measurement_torque_noise_is_ratio_times_current_noise(smooth_signals):
    # seed 001 Eq. 1, tau = eta K i_q with reduction ratio 160 and K = 0.21 N m / A (Table 2)
    model = CurrentMeasurement(gear_ratio=160.0, torque_constant=0.21, current_std=0.005, efficiency=[1.0, 0.9, 0.8])
    noisy = model.apply(smooth_signals, np.random.default_rng(6))
    std = (noisy["tau"] - smooth_signals["tau"]).std(axis=0)
    np.testing.assert_allclose(std, 160.0 * 0.21 * 0.005 * np.array([1.0, 0.9, 0.8]), rtol=0.03)


def test_current_measurement_without_current_noise_returns_the_torque(smooth_signals):
    model = CurrentMeasurement(gear_ratio=100.0, torque_constant=0.1, current_std=0.0)
    noisy = model.apply(smooth_signals, np.random.default_rng(7))
    np.testing.assert_allclose(noisy["tau"], smooth_signals["tau"], rtol=1e-14)


def test_noise_chain_with_the_same_seed_is_reproducible(smooth_signals):
    chain = noise_from_config({"q": {"snr_db": 50}, "tau": {"std": 0.3}})
    first = chain.apply(smooth_signals, np.random.default_rng(8))
    again = chain.apply(smooth_signals, np.random.default_rng(8))
    other = chain.apply(smooth_signals, np.random.default_rng(9))
    for key in ("q", "tau"):
        np.testing.assert_array_equal(first[key], again[key])
        assert not np.array_equal(first[key], other[key])


def test_noise_never_modifies_its_input(smooth_signals):
    signals = _fresh(smooth_signals)
    chain = noise_from_config(
        {
            "q": {"snr_db": 40},
            "quantization": {"q": 1e-3},
            "outliers": {"fraction": 0.01, "magnitude": 1.0},
            "current": {"gear_ratio": 100, "torque_constant": 0.1, "current_std": 0.01},
        }
    )
    out = chain.apply(signals, np.random.default_rng(10))
    for key in smooth_signals:
        np.testing.assert_array_equal(signals[key], smooth_signals[key])
        assert not np.shares_memory(out[key], signals[key])


def test_noise_from_config_applies_models_in_a_fixed_order():
    chain = noise_from_config(
        {
            "outliers": {"fraction": 0.01, "magnitude": 1.0},
            "quantization": {"q": 1e-4},
            "tau": {"std": 0.5, "snr_db": 30},
            "q": {"snr_db": 60},
            "current": {"gear_ratio": 160, "torque_constant": 0.21, "current_std": 0.005},
        }
    )
    assert [type(m).__name__ for m in chain.models] == [
        "CurrentMeasurement",
        "GaussianSNR",
        "GaussianSNR",
        "GaussianStd",
        "Quantization",
        "Outliers",
    ]
    assert [m.signal for m in chain.models[1:3]] == ["q", "tau"]


def test_noise_chain_round_trips_through_to_dict():
    chain = noise_from_config(
        {
            "q": {"snr_db": [60, 61, 62]},
            "tau": {"std": 0.5},
            "outliers": {"fraction": 0.005, "magnitude": 10.0, "signal": "tau"},
            "quantization": {"q": 1e-4},
            "current": {"gear_ratio": 160, "torque_constant": 0.21, "current_std": 0.005},
        }
    )
    assert noise_from_config(chain.to_dict()) == chain
    assert chain.to_dict()["models"][1] == {"type": "gaussian_snr", "signal": "q", "snr_db": [60.0, 61.0, 62.0]}


def test_noise_config_names_an_unknown_key_and_the_allowed_ones():
    with pytest.raises(
        ConfigError,
        match=r"'noise': unknown key\(s\) \['qq'\]; valid keys: "
        r"\['q', 'qd', 'qdd', 'tau', 'outliers', 'quantization', 'current'\]",
    ):
        noise_from_config({"qq": {"snr_db": 3}})
    with pytest.raises(ConfigError, match=r"'noise.q': unknown key\(s\) \['snr'\]; valid keys: \['snr_db', 'std'\]"):
        noise_from_config({"q": {"snr": 3}})


def test_noise_config_rejects_values_out_of_range():
    with pytest.raises(ConfigError, match=r"'noise.tau'.*option 'std' must be >= 0"):
        noise_from_config({"tau": {"std": -1.0}})
    with pytest.raises(ConfigError, match=r"'noise.outliers'.*option 'fraction' must be one number in \[0, 1\]"):
        noise_from_config({"outliers": {"fraction": 1.5, "magnitude": 1.0}})
    with pytest.raises(ConfigError, match=r"'noise.outliers'.*option 'magnitude' is required"):
        noise_from_config({"outliers": {"fraction": 0.1}})


def test_per_joint_values_must_match_the_number_of_joints(smooth_signals):
    with pytest.raises(ConfigError, match="has 2 values but the signal has 3 joints"):
        GaussianSNR("q", [60.0, 50.0]).apply(smooth_signals, np.random.default_rng(0))


def test_check_joints_refuses_a_per_joint_option_of_the_wrong_length_before_any_signal_exists():
    chain = noise_from_config(
        {"q": {"snr_db": [60, 60, 60]}, "tau": {"std": [0.1, 0.2]}, "outliers": {"fraction": 0.01, "magnitude": 5}}
    )
    with pytest.raises(ConfigError, match=r"'gaussian_snr' on 'q': 'snr_db' has 3 values but the robot has 2 joints"):
        chain.check_joints(2)
    with pytest.raises(ConfigError, match=r"'gaussian_std' on 'tau': 'std' has 2 values but the robot has 3 joints"):
        chain.check_joints(3)
    models = [CurrentMeasurement([160, 100], 0.2, 0.005), Quantization(1e-4), Outliers(0.1, [1.0, 2.0, 3.0])]
    with pytest.raises(ConfigError, match=r"'current': 'gear_ratio' has 2 values but the robot has 3 joints"):
        NoiseChain(models).check_joints(3)
    NoiseChain(models[1:]).check_joints(3)
    NoiseChain().check_joints(1)
    with pytest.raises(ConfigError, match="n_dof must be a positive integer"):
        NoiseChain().check_joints(0)


def test_noise_options_of_the_wrong_type_name_the_field():
    with pytest.raises(ConfigError, match=r"'noise.tau'.*option 'std' must be a number .*got True"):
        noise_from_config({"tau": {"std": True}})
    with pytest.raises(
        ConfigError,
        match=r"'noise.models\[0\]' \(gaussian_std\): noise model 'gaussian_std': option 'std' must be a number",
    ):
        noise_from_config({"models": [{"type": "gaussian_std", "signal": "tau", "std": "loud"}]})
    with pytest.raises(
        ConfigError, match=r"'noise.models\[0\]' \(outliers\): noise model 'outliers': option 'fraction'"
    ):
        noise_from_config({"models": [{"type": "outliers", "fraction": {"a": 1}, "magnitude": 1.0}]})


def test_noise_on_a_missing_signal_names_it(smooth_signals):
    signals = {"q": smooth_signals["q"]}
    with pytest.raises(DataError, match="acts on 'tau' but the signals given are q"):
        GaussianStd("tau", 1.0).apply(signals, np.random.default_rng(0))


def test_noise_requires_a_numpy_generator(smooth_signals):
    with pytest.raises(ConfigError, match="numpy.random.Generator"):
        NoiseChain((GaussianStd("q", 1.0),)).apply(smooth_signals, 42)


def test_measured_snr_db_of_known_noise():
    clean = np.full((1000, 2), 10.0)
    noise = np.where(np.arange(1000) % 2 == 0, 1.0, -1.0)[:, None] * np.array([1.0, 0.1])
    np.testing.assert_allclose(measured_snr_db(clean, clean + noise), [20.0, 40.0])


def test_a_noise_model_is_validated_by_its_options_from_python_and_from_a_config():
    with pytest.raises(ConfigError, match=r"noise model 'gaussian_std': option 'std' must be >= 0"):
        GaussianStd("tau", -1.0)
    with pytest.raises(ConfigError, match=r"option 'signal' must be one of q, qd, qdd, tau"):
        GaussianSNR("torque", 60.0)
    with pytest.raises(
        ConfigError,
        match=r"noise model 'quantization': unknown option\(s\) \['step'\]; option 'resolution' is required; valid options: \['resolution', 'signal'\]",
    ):
        noise_from_config({"models": [{"type": "quantization", "step": 1e-3}]})
    assert GaussianSNR("q", [60, 61]).snr_db == (60.0, 61.0)
