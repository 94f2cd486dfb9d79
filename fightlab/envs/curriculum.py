"""The amplitude curriculum and the solve criterion (README "The task").

The rhythm amplitude a rises through ``curriculum_stages`` (0.1 … 1.0), starting at 0.1; each
widening ramps the reference over 1 s in all worlds. After the start and after each widening the
runner waits W = ``curriculum_wait`` iterations (≈ 2 episodes per world at 32 steps per
iteration); from then on every iteration checks the episodes that finished in the last W
iterations and widens when their fall rate ≤ 5 % and their bounce tracking ≥ 0.75. Solved: at the
last stage the same check passes, the mean episode length is ≥ 9.5 s and every episode ended by a
fall or the 10 s limit.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

__all__ = ["WINDOW_KEYS", "REPORT_KEYS", "Curriculum", "ratio"]

#: what the criterion reads of each iteration's summary (every checkpoint's window has these)
WINDOW_KEYS = ("episodes", "falls", "timeouts", "episode_s_sum", "track_num", "track_den")
#: reported beside the criterion, never judged: tracking over the episodes that survived to the
#: time limit (older checkpoints' window entries lack them and count 0)
REPORT_KEYS = ("track_num_survived", "track_den_survived")


def ratio(num: float, den: float) -> float:
    """num / den, NaN when den ≤ 0 (tracking with no episode to measure)."""
    return num / den if den > 0 else math.nan


@dataclass
class Curriculum:
    """Amplitude curriculum and solve criterion over per-iteration episode summaries.

    `update(summary)` takes one iteration's summary (a dict with at least WINDOW_KEYS: counts of
    episodes finished, falls, timeouts, the sum of their lengths in s, and the lock-in tracking
    numerator/denominator summed over them) and returns the event: "wait" (inside the W
    iterations after a widening), "hold" (checked, not good enough), "widen" or "solved".
    """

    stages: tuple[float, ...]
    wait: int = 32
    max_fall_rate: float = 0.05
    min_tracking: float = 0.75
    min_episode_s: float = 9.5
    stage: int = 0
    since_widen: int = 0
    solved: bool = False
    window: deque = field(default_factory=deque)
    #: `window_stats` of the window that passed at the last widening (the window is cleared then)
    widened_on: dict | None = None

    @property
    def amplitude(self) -> float:
        return float(self.stages[self.stage])

    def window_stats(self) -> dict:
        """Fall rate, tracking (the criterion's: over every finished episode), tracking_survived
        (reported only: over the episodes that reached the time limit), mean episode length and
        counts over the window (NaN if empty)."""
        tot = {k: sum(w.get(k, 0.0) for w in self.window) for k in (*WINDOW_KEYS, *REPORT_KEYS)}
        n = tot["episodes"]
        return dict(
            episodes=n,
            fall_rate=tot["falls"] / n if n else math.nan,
            tracking=ratio(tot["track_num"], tot["track_den"]),
            tracking_survived=ratio(tot["track_num_survived"], tot["track_den_survived"]),
            mean_episode_s=tot["episode_s_sum"] / n if n else math.nan,
            other_endings=n - tot["falls"] - tot["timeouts"],
        )

    def passes(self, final: bool) -> bool:
        s = self.window_stats()
        if not s["episodes"]:
            return False
        ok = s["fall_rate"] <= self.max_fall_rate and s["tracking"] >= self.min_tracking
        if final:
            ok = ok and s["mean_episode_s"] >= self.min_episode_s and s["other_endings"] == 0
        return bool(ok)

    def update(self, summary: dict) -> str:
        if self.solved:
            return "solved"
        self.window.append({k: summary[k] for k in (*WINDOW_KEYS, *REPORT_KEYS) if k in summary})
        while len(self.window) > self.wait:
            self.window.popleft()
        self.since_widen += 1
        if self.since_widen < self.wait:
            return "wait"
        final = self.stage == len(self.stages) - 1
        if not self.passes(final):
            return "hold"
        if final:
            self.solved = True
            return "solved"
        self.widened_on = self.window_stats()  # what passed: the widening row reports it
        self.stage += 1
        self.since_widen = 0
        self.window.clear()
        return "widen"

    def state_dict(self) -> dict:
        return dict(stage=self.stage, since_widen=self.since_widen, solved=self.solved,
                    window=list(self.window), widened_on=self.widened_on)

    def load_state_dict(self, s: dict) -> None:
        self.stage, self.since_widen, self.solved = s["stage"], s["since_widen"], s["solved"]
        self.window = deque(s["window"])
        self.widened_on = s.get("widened_on")  # older checkpoints: None

    def last_stats(self) -> dict:
        """`window_stats`, or right after a widening (the window cleared, nothing since) the
        window that passed: a run stopped on its widening (`stop_after_stage`) reports what
        passed, not NaN."""
        ws = self.window_stats()
        if not ws["episodes"] and self.since_widen == 0 and self.widened_on:
            return dict(self.widened_on)
        return ws
