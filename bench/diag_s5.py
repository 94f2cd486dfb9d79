"""Session 5 diagnosis on CUDA: which part of the policy-step capture fails, and where the host
reads of an iteration come from. `python bench/diag_s5.py` runs every variant in a subprocess
(a failed torch capture poisons its process) and prints one line each."""
import subprocess
import sys
import tempfile
import time


def trainer(**kw):
    from fightlab.config import PPOConfig, TrainConfig
    from fightlab.rl.runner import Trainer

    cfg = TrainConfig(body="simple", nworld=256, device="cuda:0", max_iterations=3, checkpoint_every=0,
                      run_dir=tempfile.mkdtemp(dir="runs"), stop_when_solved=False, ppo=PPOConfig(), **kw)
    return Trainer(cfg, progress=False)


def variant(name):
    import torch

    from fightlab.sim.physics import shared_stream

    if name == "reads":
        tr = trainer(policy_graph=False, update_graph=False)
        tr._start()
        tr.iterate()
        from collections import Counter

        tr._reads.take()
        with shared_stream("cuda:0"), tr._reads:
            for s in range(tr.cfg.ppo.num_steps):
                tr.policy_graphs[s]()
                tr.env.step()
            a = list(tr._reads.sites)
            tr.policy_graphs[tr.cfg.ppo.num_steps]()
            tr.update.draw()
            tr.ppo_graph()
            b = list(tr._reads.sites)[len(a):]
            tr._reads.take()
        print("rollout reads", len(a), Counter(a).most_common(4), "update reads", len(b), Counter(b).most_common(4))
        return
    if name == "update-only":
        tr = trainer(policy_graph=False, update_graph=True)
        tr._start()
        print("update graph", tr.ppo_graph.graph is not None, tr.ppo_graph.fallback_reason)
        r = tr.iterate()
        print("row", r["update_s"], r["rollout_s"], r["host_reads"], r["graph_fallbacks"])
        return
    tr = trainer(policy_graph=False, update_graph=False)
    tr._start()
    env, agent = tr.env, tr.agent
    fns = {
        "mlp": lambda: agent.actor(agent.obs_norm(env.obs)),
        "normal": lambda: torch.normal(torch.zeros(256, 37, device="cuda:0"), torch.ones(256, 37, device="cuda:0")),
        "step0": lambda: tr._policy_step(0),
        "step5": lambda: tr._policy_step(5),
    }
    base, _, mode = name.partition(":")
    fn = fns[base]
    ctx = shared_stream("cuda:0") if "ext" in mode else __import__("contextlib").nullcontext()
    with torch.no_grad(), ctx:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn()
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        err = "thread_local" if "tl" in mode else ("relaxed" if "rx" in mode else "global")
        try:
            with torch.cuda.graph(g, capture_error_mode=err):
                fn()
            g.replay()
            torch.cuda.synchronize()
            print("OK")
        except Exception as e:
            print("ERR", type(e).__name__, str(e).splitlines()[0][:160])


if __name__ == "__main__":
    if len(sys.argv) > 1:
        variant(sys.argv[1])
        sys.exit(0)
    for v in ["reads", "update-only", "mlp", "normal", "step0", "step5", "step0:ext", "step0:tl",
              "step0:rx", "mlp:ext"]:
        t0 = time.time()
        r = subprocess.run([sys.executable, __file__, v], capture_output=True, text=True, timeout=120)
        lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip() and "it/s" not in ln]
        print(f"{v:12s} rc={r.returncode} {time.time() - t0:5.1f}s | " + " || ".join(lines[-3:])[:600], flush=True)
