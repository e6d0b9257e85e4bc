"""Issue 27 (carried over): an excitation drawn from a seed records that seed in its description."""

from __future__ import annotations

import numpy as np
import pytest

from robotid_sim.excitation import excitation_from_config


@pytest.mark.parametrize(
    "recipe",
    [
        {"type": "fourier", "harmonics": 3, "base_frequency": 0.2, "seed": 7},
        {"type": "polynomial", "random_waypoints": 3, "seed": 5},
    ],
    ids=["fourier", "polynomial-random-waypoints"],
)
def test_a_drawn_excitation_records_its_seed_and_the_description_round_trips(robots, recipe):
    robot = robots["planar3r"]
    drawn = excitation_from_config(recipe, robot)
    description = drawn.describe()
    assert description["seed"] == recipe["seed"]
    rebuilt = excitation_from_config(description, robot)
    assert rebuilt.describe() == description
    t = np.linspace(0.0, drawn.duration, 7)
    assert np.array_equal(rebuilt.evaluate(t)[0], drawn.evaluate(t)[0])


def test_explicit_coefficients_record_no_seed(robots):
    drawn = excitation_from_config({"type": "fourier", "harmonics": 3, "base_frequency": 0.2}, robots["planar3r"])
    explicit = {key: value for key, value in drawn.describe().items() if key != "seed"}
    assert "seed" not in excitation_from_config(explicit).describe()


def test_given_polynomial_waypoints_record_no_seed(robots):
    given = {"type": "polynomial", "q_start": [0.0, 0.0, 0.0], "q_end": [0.1, 0.2, 0.3], "durations": 1.0}
    assert "seed" not in excitation_from_config(given, robots["planar3r"]).describe()
