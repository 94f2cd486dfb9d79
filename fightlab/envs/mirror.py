"""The stance task's left–right mirror maps over its observations and actions, built from the
body's (`fightlab.bodies.mirror`) and the observation layouts of `fightlab.envs.stance`.

Policy observation: gravity and linear velocity in the pelvis frame are vectors (·, −, ·), the
angular velocity a pseudovector (−, ·, −); height, the rhythm's sin/cos and the amplitude stay
(the bounce is the same phase on both sides); each block of nu actuator values through the
actuator map. Privileged observation: the push force (world frame) a vector, the push and
episode timers stay, the per-DOF velocities through the DOF map. Actions: the actuator map.

The maps mirror deviations from the task's reference: the stance keyframe is orthodox (left
foot forward), not mirror symmetric, so the joint-angle errors (angle − reference target) of a
state mirrored about the reference are the mirrored errors; at amplitude 0 (stage 0) that is
exact; above it the bounce and guard coefficients of the two sides differ a little. The task's
dynamics about the orthodox stance are only nearly symmetric: a mirrored sample is a prior.
"""

from __future__ import annotations

from fightlab.bodies import mirror as M
from fightlab.envs.stance_kernels import OBS_NBLOCK, PRIV_FIXED

__all__ = ["action_mirror", "mirror_maps", "obs_mirror", "priv_mirror"]


def action_mirror(env) -> M.Mirror:
    """The map over the env's actions [nu] (`StanceEnv` ``env``)."""
    return M.actuator_mirror(env.mjm)


def obs_mirror(env) -> M.Mirror:
    """The map over the policy observation [obs_dim] (module docstring; the layout's order:
    gravity, height, linear velocity, angular velocity, phase sin, cos, amplitude, blocks)."""
    head = M.fixed((*M.VECTOR_SIGN, 1.0, *M.VECTOR_SIGN, *M.PSEUDO_SIGN, 1.0, 1.0, 1.0))
    act = action_mirror(env)
    return M.concat(head, *([act] * OBS_NBLOCK))


def priv_mirror(env) -> M.Mirror:
    """The map over the privileged observation [privileged_dim]: push force, push left, next
    push, episode time, then every DOF's velocity."""
    head = M.fixed((*M.VECTOR_SIGN, 1.0, 1.0, 1.0))
    assert len(head.perm) == PRIV_FIXED
    return M.concat(head, M.qvel_mirror(env.mjm))


def mirror_maps(env) -> dict[str, M.Mirror]:
    """{"policy": `obs_mirror`, "critic": `priv_mirror` (empty without a privileged
    observation), "actions": `action_mirror`} of `StanceEnv` ``env``."""
    return {"policy": obs_mirror(env), "critic": priv_mirror(env) if env.priv_dim else M.fixed(()),
            "actions": action_mirror(env)}
