"""The TD return computed the slow, obvious way: the reference the q_h tests compare with."""

from __future__ import annotations

import numpy as np


def brute_force_returns(rewards_per_chain: list[list[float]], gamma: float) -> list[float]:
    """G_t = r_t + gamma * G_{t+1}, G = r on the last step: one chain at a time, in Python."""
    out: list[float] = []
    for rewards in rewards_per_chain:
        chain = [0.0] * len(rewards)
        for t in reversed(range(len(rewards))):
            r = float(np.float32(rewards[t]))
            chain[t] = r if t == len(rewards) - 1 else r + gamma * chain[t + 1]
        out.extend(chain)
    return out
