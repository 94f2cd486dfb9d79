# Measures the mean episode length (s) at amplitude 0.1 under the task's pushes when the actions
# are exploration noise alone, std * N(0, 1) around the reference (no policy): 32 worlds, 5 s, for
# std 0, 0.2, 0.5, on warp's CPU device (bench/NOTES.md, 2026-12-01: what init_std costs).
#   PYTHONPATH=. python bench/noise_episode_length.py BODY        # BODY: simple or muscular-fast
import sys, time, torch
from fightlab.config import EnvConfig
from fightlab.envs.stance import StanceEnv
from fightlab.sim.physics import shared_stream
body = sys.argv[1]; n = 32
for std in (0.0, 0.2, 0.5):
    env = StanceEnv(body, nworld=n, device="cpu", seed=5, cfg=EnvConfig())
    g = torch.Generator().manual_seed(0)
    t0 = time.time()
    with shared_stream("cpu"):
        env.set_amplitude(0.1, immediate=True)
        env.reset(stagger=False)
        for _ in range(250):
            a = std * torch.randn(n, env.nu, generator=g)
            env.step(a)
        s = env.read_summary()
    print(body, "std", std, "episodes", s["episodes"], "falls", s["falls"], "timeouts", s["timeouts"],
          "mean_ep_s", round(s["episode_s_sum"]/max(1, s["episodes"]), 2), f"{time.time()-t0:.0f}s", flush=True)
