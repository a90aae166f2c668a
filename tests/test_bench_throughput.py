"""bench.throughput.encoding_throughput: every encoder times every round on the same passages, after an untimed
warm-up on a slice; rates are passages over seconds."""

from __future__ import annotations

import time

import numpy as np
import pytest

from taser_book.bench.throughput import WARMUP_PASSAGES, encoding_throughput


class SlowEncoder:
    def __init__(self, seconds_per_passage: float):
        self.seconds_per_passage, self.calls = seconds_per_passage, []

    def encode_passages(self, passages):
        self.calls.append(len(passages))
        time.sleep(self.seconds_per_passage * len(passages))
        return np.zeros((len(passages), 4), dtype=np.float32)


def test_rounds_rates_and_warm_up():
    fast, slow = SlowEncoder(0.0005), SlowEncoder(0.002)
    passages = [("t", f"passage {i}") for i in range(40)]
    table = encoding_throughput({"fast": fast, "slow": slow}, passages, repeats=3)
    assert len(table) == 6 and set(table["model"]) == {"fast", "slow"}
    assert sorted(table["round"].unique()) == [0, 1, 2]
    assert (table["passages"] == 40).all()
    assert np.allclose(table["passages_per_second"], 40 / table["seconds"])
    assert fast.calls == slow.calls == [WARMUP_PASSAGES, 40, 40, 40]   # warm-up slice, then every round
    rates = table.groupby("model")["passages_per_second"].median()
    assert rates["fast"] > 2 * rates["slow"]                            # 4x faster by construction
    assert rates["slow"] < 1 / 0.002 * 1.01                             # no faster than its sleep allows


def test_nothing_to_time_is_an_error():
    with pytest.raises(ValueError, match="no passages"):
        encoding_throughput({"a": SlowEncoder(0)}, [])
    with pytest.raises(ValueError, match="no encoders"):
        encoding_throughput({}, [("t", "x")])
