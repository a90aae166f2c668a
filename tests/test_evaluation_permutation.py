"""The fast sign-flip test gives scipy's own p-values (`taser_lib.evaluation.permutation`)."""

import numpy as np
import pytest
from scipy import stats

from taser_lib.evaluation import permutation
from taser_lib.evaluation.permutation import sign_flip_test


def _mean_difference(u, v, axis):
    return np.mean(u - v, axis=axis)


def _pairs(kind: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    r = np.random.default_rng(seed)
    if kind == "continuous":
        return r.random(n), r.random(n)
    if kind == "reciprocal ranks":  # many ties, as MRR per question has
        return ((1 / r.integers(1, 11, n)) * (r.random(n) < 0.8), (1 / r.integers(1, 11, n)) * (r.random(n) < 0.8))
    x = (r.random(n) < 0.5).astype(float)  # hits: all but three pairs equal
    y = x.copy()
    y[:3] = 1 - y[:3]
    return x, y


@pytest.mark.parametrize("kind", ["continuous", "reciprocal ranks", "hits"])
@pytest.mark.parametrize("n, n_resamples, batch", [(3, 10_000, 1000), (13, 10_000, 1000), (14, 10_000, 1000),
                                                   (57, 999, 100), (700, 2500, 1000)])
def test_sign_flip_test_gives_scipys_p_values(kind, n, n_resamples, batch):
    """13 is exact (2**13 <= 10,000) and 14 is not; 999 and 2,500 end on a batch shorter than the others."""
    x, y = _pairs(kind, n, seed=n)
    for alternative, seed in (("two-sided", 0), ("less", 11), ("greater", 12)):
        scipy_two = stats.permutation_test((x, y), _mean_difference, permutation_type="samples", vectorized=True,
                                           n_resamples=n_resamples, batch=batch, alternative=alternative,
                                           rng=np.random.default_rng(seed))
        ours = sign_flip_test(x - y, n_resamples=n_resamples, batch=batch, alternative=alternative, seed=seed)
        assert (ours.pvalue, ours.statistic) == (scipy_two.pvalue, scipy_two.statistic)
        d = x - y - 0.01
        scipy_one = stats.permutation_test((d,), np.mean, permutation_type="samples", vectorized=True,
                                           n_resamples=n_resamples, batch=batch, alternative=alternative,
                                           rng=np.random.default_rng(seed))
        assert sign_flip_test(d, n_resamples=n_resamples, batch=batch, alternative=alternative,
                              seed=seed).pvalue == scipy_one.pvalue


def test_a_generator_is_left_as_scipy_leaves_it():
    """Odd numbers of draws leave half a 64-bit output buffered; the next draws match scipy's generator's."""
    x, y = _pairs("continuous", 57, seed=1)
    ours, theirs = np.random.default_rng(5), np.random.default_rng(5)
    sign_flip_test(x - y, n_resamples=999, batch=100, seed=ours)
    stats.permutation_test((x, y), _mean_difference, permutation_type="samples", vectorized=True, n_resamples=999,
                           batch=100, rng=theirs)
    assert ours.integers(0, 2 ** 32, size=5, dtype=np.uint32).tolist() == \
        theirs.integers(0, 2 ** 32, size=5, dtype=np.uint32).tolist()
    assert ours.random() == theirs.random()


def test_generators_it_cannot_read_fall_back_to_permuted(monkeypatch):
    x, y = _pairs("reciprocal ranks", 200, seed=3)
    expected = stats.permutation_test((x, y), _mean_difference, permutation_type="samples", vectorized=True,
                                      n_resamples=2000, batch=1000, rng=np.random.Generator(np.random.Philox(4)))
    assert sign_flip_test(x - y, n_resamples=2000, seed=np.random.Generator(np.random.Philox(4))).pvalue == \
        expected.pvalue
    # a numpy whose shuffle reads the stream differently: the check at first use sends every test to `permuted`
    monkeypatch.setattr(permutation, "_stream_matches_permuted", lambda: False)
    used = []
    monkeypatch.setattr(permutation._Signs, "swapped", lambda self, count: used.append(count))
    assert sign_flip_test(x - y, n_resamples=2000, seed=0).pvalue == stats.permutation_test(
        (x, y), _mean_difference, permutation_type="samples", vectorized=True, n_resamples=2000, batch=1000,
        rng=np.random.default_rng(0)).pvalue
    assert used == []


def test_the_stream_check_passes_on_this_numpy():
    assert permutation._stream_matches_permuted()


def test_a_clear_difference_is_significant_and_none_is_not():
    r = np.random.default_rng(0)
    noise = r.normal(0, 1, 500)
    assert sign_flip_test(noise + 0.5).pvalue < 0.001
    assert sign_flip_test(noise - noise.mean()).pvalue > 0.9


@pytest.mark.parametrize("bad, message", [([1.0], "2 or more"), ([[1.0, 2.0]], "2 or more"),
                                          (np.zeros((2, 3)), "2 or more")])
def test_bad_input_says_what_is_wrong(bad, message):
    with pytest.raises(ValueError, match=message):
        sign_flip_test(bad)
    with pytest.raises(ValueError, match="alternative"):
        sign_flip_test([1.0, 2.0, 3.0], alternative="bigger")
