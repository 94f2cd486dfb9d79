"""The shared humanoid skeleton, built with ``mujoco.MjSpec`` (no XML).

One kinematic tree rooted at the pelvis (free joint ``root``), human proportions (~1.78 m, ~70 kg),
z up, facing +x, the body's left on +y. All body frames are parallel to the world in the zero pose
(arms hanging, palms facing the thighs); each body's origin is its proximal joint.

Joint sign conventions (the same for both sides; right-side axes are the left axes mirrored in the
sagittal plane, so a positive angle means the same anatomical motion on both sides):

* ``*_y`` on trunk/neck/head: + = forward flexion.     ``*_x``: + = lean to the left (left side).
* ``hip_y``, ``shoulder_y``: + = flexion (limb forward). ``hip_x``, ``shoulder_x``: + = abduction.
  ``hip_z``, ``shoulder_z``: + = internal rotation.
* ``knee``: + = flexion (heel backward). ``elbow``: + = flexion. ``ankle_y``: + = dorsiflexion
  (toes up). ``toe``: + = toe extension (up). ``wrist_x`` and finger ``*_mcp_flex``, ``pip``,
  ``dip``: + = flexion toward the palm.
* ``clavicle_y``: + = elevation (shrug), ``clavicle_z``: + = protraction (the names follow the
  study's table; the elevation axis is the world x axis in the zero pose).

Two variants share this builder (``build_humanoid(muscular=...)``):

* ``simple`` (43 DOF): capsule geoms (colliding) on every segment; no clavicles, fingers or head
  joints (``head`` is a body welded to the neck).
* ``muscular-fast`` (89 DOF): thin bone capsules (visual, non-colliding, carrying the bone/organ
  share of the mass) and the 63 ellipsoid muscles of ``muscles.py`` (colliding, carrying the soft
  tissue); clavicles, two head joints and 20 finger joints per hand.

Collision: the floor (``contype=0, conaffinity=1``) collides with body geoms (``contype=1,
conaffinity=0``); body geoms never collide with each other. Visual geoms: ``contype=conaffinity=0``,
group 3.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import mujoco
import numpy as np

from fightlab.bodies import muscles as _muscles

# -- Proportions [m] and masses [kg] -----------------------------------------------------------
# Segment masses: de Leva (1996) male segment mass fractions scaled to 70 kg
# (head+neck 6.94 %, upper/middle/lower trunk 15.96/16.33/11.17 %, upper arm 2.71 %, forearm 1.62 %,
# hand 0.61 %, thigh 14.16 %, shank 4.33 %, foot 1.37 %).
SEGMENT_MASS = {
    "pelvis": 7.8, "lumbar": 11.4, "torso": 11.1, "neck": 1.2, "head": 3.65,
    "clavicle": 0.3,  # muscular only; taken from the torso there
    "upper_arm": 1.9, "forearm": 1.13, "hand": 0.43,
    "thigh": 9.9, "shin": 3.03, "foot": 0.82, "toe": 0.14,
}
# Share of a muscled segment's mass carried by its muscle ellipsoids (soft tissue); the rest stays
# on the bone capsule (bone, organs). Trunk segments keep their viscera on the core capsule.
SOFT_TISSUE_FRACTION = {
    "pelvis": 0.45, "lumbar": 0.45, "torso": 0.45, "neck": 0.5,
    "upper_arm": 0.75, "forearm": 0.7, "hand": 0.1, "thigh": 0.75, "shin": 0.7,
}
FINGER_MASS = 0.03   # kg per finger (3 phalanges), muscular only, taken from the hand
THUMB_MASS = 0.04

HIP_OFFSET = (0.0, 0.09, -0.08)        # pelvis frame -> hip joint (left)
THIGH_LEN = 0.42
SHIN_LEN = 0.42
ANKLE_HEIGHT = 0.075                   # ankle joint above the sole
LUMBAR_OFFSET = 0.09                   # pelvis -> lumbar joint (z)
TORSO_OFFSET = 0.14                    # lumbar -> thorax joint (z)
NECK_OFFSET = 0.28                     # thorax -> neck joint (z)
HEAD_OFFSET = 0.09                     # neck -> head joint (z)
SHOULDER_Z = 0.25                      # thorax origin -> shoulder height
SHOULDER_Y = 0.18                      # half shoulder width (simple: shoulder joint on thorax)
CLAVICLE_ROOT_Y = 0.02                 # muscular: sternoclavicular joint
UPPER_ARM_LEN = 0.29
FOREARM_LEN = 0.26
FOOT_HALF = (0.095, 0.045, 0.03)       # foot box half sizes; centre below the ankle:
FOOT_CENTER = (0.035, 0.0, -ANKLE_HEIGHT + 0.03)
TOE_OFFSET = (0.13, 0.0, -0.06)        # ankle -> toe joint
TOE_HALF = (0.03, 0.045, 0.015)
TOE_CENTER = (0.03, 0.0, 0.0)

# -- Joints: name -> (axis for the left side / midline, range [rad], gain class) ---------------
# Gain classes: (kp [N m/rad], kv [N m s/rad], joint damping [N m s/rad], armature [kg m^2]).
# kp: the stance must hold under gravity (knee load ~40 N m -> ~0.1 rad sag at kp=400) but a strong
# push must still knock the zero-action policy over. kv and damping stay small enough for explicit
# (Euler) stability at dt = 4 ms; damping is integrated implicitly by Euler.
# Ankles are the exception to "200-400": with both feet flat the whole body can tip as one piece
# about the line through the two ankles, resisted by the ankles alone; gravity's tipping stiffness
# is m g h ~ 70 * 9.81 * 0.88 ~ 600 N m/rad, and the trunk, hip, knee and toe servos in series
# soften the ankles further: measured, the zero-action stance creeps over below ~1500 N m/rad per
# ankle (2x kp of 600 fell within 2-3 s). The larger armature keeps omega*dt = sqrt(kp/I)*dt < 1.
# Trunk 600 and hips 500 (not 450/400): with softer ones the upper body sags forward ~0.1 rad, the
# centre of mass creeps off the middle of the soles, and the zero-action stance falls within 10 s.
GAINS = {
    "trunk": (600.0, 8.0, 5.0, 0.02),
    "neck": (120.0, 2.0, 2.0, 0.02),
    "head": (60.0, 1.0, 1.0, 0.02),
    "clavicle": (150.0, 2.0, 2.0, 0.02),
    "shoulder": (120.0, 2.0, 2.0, 0.02),
    "elbow": (80.0, 1.5, 1.5, 0.015),
    "forearm": (25.0, 0.3, 0.5, 0.01),
    "wrist": (25.0, 0.3, 0.5, 0.01),
    "finger": (2.0, 0.02, 0.05, 0.01),
    "hip": (500.0, 8.0, 5.0, 0.02),
    "knee": (400.0, 8.0, 5.0, 0.02),
    "ankle": (1500.0, 3.0, 8.0, 0.04),
    "toe": (200.0, 0.5, 1.0, 0.01),
}

X, Y, Z = (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)
NX, NY, NZ = (-1.0, 0.0, 0.0), (0.0, -1.0, 0.0), (0.0, 0.0, -1.0)

TRUNK_JOINTS = {
    "abdomen_x": (X, (-0.5, 0.5), "trunk"), "abdomen_y": (Y, (-0.5, 0.9), "trunk"),
    "abdomen_z": (Z, (-0.6, 0.6), "trunk"),
    "chest_x": (X, (-0.4, 0.4), "trunk"), "chest_y": (Y, (-0.4, 0.6), "trunk"),
    "chest_z": (Z, (-0.5, 0.5), "trunk"),
    "neck_x": (X, (-0.6, 0.6), "neck"), "neck_y": (Y, (-0.6, 0.8), "neck"),
    "neck_z": (Z, (-0.9, 0.9), "neck"),
    "head_y": (Y, (-0.5, 0.5), "head"), "head_z": (Z, (-0.5, 0.5), "head"),
}
ARM_JOINTS = {   # left side axes
    "clavicle_y": (X, (-0.2, 0.5), "clavicle"), "clavicle_z": (NZ, (-0.3, 0.3), "clavicle"),
    "shoulder_x": (X, (-0.6, 2.8), "shoulder"), "shoulder_y": (NY, (-1.0, 3.0), "shoulder"),
    "shoulder_z": (NZ, (-1.2, 1.5), "shoulder"),
    "elbow": (NY, (0.0, 2.6), "elbow"), "pronation": (Z, (-1.4, 1.4), "forearm"),
    "wrist_x": (NX, (-1.0, 1.2), "wrist"), "wrist_y": (Y, (-0.5, 0.35), "wrist"),
}
THUMB_JOINTS = {
    "thumb_cmc_x": (NX, (-0.5, 0.9), "finger"), "thumb_cmc_y": (Y, (-0.5, 0.9), "finger"),
    "thumb_mcp": (NX, (0.0, 1.0), "finger"), "thumb_ip": (NX, (-0.2, 1.3), "finger"),
}
FINGER_JOINTS = {  # per finger, prefixed with the finger name
    "mcp_flex": (NX, (-0.3, 1.6), "finger"), "mcp_abd": (Y, (-0.35, 0.35), "finger"),
    "pip": (NX, (0.0, 1.9), "finger"), "dip": (NX, (0.0, 1.4), "finger"),
}
# fingers: name -> (x position on the palm's distal edge [m], phalanx lengths [m])
FINGERS = {
    "index": (0.03, (0.045, 0.026, 0.020)),
    "middle": (0.01, (0.048, 0.030, 0.022)),
    "ring": (-0.01, (0.045, 0.028, 0.021)),
    "little": (-0.03, (0.036, 0.021, 0.018)),
}
LEG_JOINTS = {
    "hip_x": (X, (-0.5, 0.9), "hip"), "hip_y": (NY, (-0.5, 2.0), "hip"),
    "hip_z": (NZ, (-0.8, 0.8), "hip"),
    "knee": (Y, (0.0, 2.6), "knee"),
    "ankle_y": (NY, (-0.9, 0.6), "ankle"), "ankle_x": (X, (-0.4, 0.4), "ankle"),
    "toe": (NY, (-0.5, 1.0), "toe"),
}

# -- The fighting stance (orthodox: left foot forward); leg joints are solved by inverse kinematics ---
STANCE_KNEE = 0.52                  # rad (~30 deg) knee flexion, both legs
STANCE_FEET = {                     # foot spread (x, y) [m] about the centre, foot yaw [rad];
    "l": (0.15, 0.17, 0.0),         # the pair is then shifted so the whole-body centre of mass
    "r": (-0.15, -0.17, -0.3),      # lies over the middle of the soles; rear foot turned out 17 deg
}
STANCE_UPPER = {                    # joint angles [rad]; "_l"/"_r" added for paired joints
    "abdomen_y": 0.03, "abdomen_z": -0.08, "chest_y": 0.08, "chest_z": -0.12,
    "neck_y": 0.05, "neck_z": 0.1, "head_y": 0.1, "head_z": 0.08,
    "shoulder_x_l": 0.1, "shoulder_y_l": 0.75, "shoulder_z_l": 0.35, "elbow_l": 1.85,
    "shoulder_x_r": 0.1, "shoulder_y_r": 0.6, "shoulder_z_r": 0.45, "elbow_r": 2.15,
    "wrist_x_l": 0.1, "wrist_x_r": 0.1,
}
STANCE_FIST = {"mcp_flex": 1.3, "pip": 1.5, "dip": 0.9,
               "thumb_cmc_x": 0.4, "thumb_cmc_y": 0.4, "thumb_mcp": 0.6, "thumb_ip": 0.5}

SUPPORT_BODIES = ("foot_l", "foot_r", "toe_l", "toe_r")
KEYFRAME = "stance"        # the keyframe add_stance_keyframe adds
FLOOR_GEOM = "floor"

RGBA_SKIN = (0.8, 0.6, 0.45, 1.0)
RGBA_BONE = (0.9, 0.9, 0.85, 1.0)
RGBA_MUSCLE = (0.7, 0.2, 0.2, 1.0)
RGBA_FOOT = (0.2, 0.2, 0.25, 1.0)


def _mirror_axis(axis, side: str):
    """Mirror a rotation axis (a pseudovector) in the sagittal plane for the right side."""
    ax, ay, az = axis
    return (ax, ay, az) if side != "r" else (-ax, ay, -az)


def _mirror_pos(pos, side: str):
    x, y, z = pos
    return (x, y, z) if side != "r" else (x, -y, z)


def _euler_quat(euler_deg) -> np.ndarray:
    q = np.zeros(4)
    mujoco.mju_euler2Quat(q, np.deg2rad(np.asarray(euler_deg, dtype=float)), "xyz")
    return q


@dataclass
class _Builder:
    spec: mujoco.MjSpec
    muscular: bool
    servos: dict = field(default_factory=dict)   # joint name -> (kp, kv, range)

    # -- geoms ------------------------------------------------------------------------------
    def collide(self, body, **kw):
        return body.add_geom(contype=1, conaffinity=0, condim=3, group=0, **kw)

    def visual(self, body, **kw):
        return body.add_geom(contype=0, conaffinity=0, group=3, **kw)

    def capsule(self, body, a, b, r, mass, colliding: bool, rgba=RGBA_SKIN, name=""):
        fn = self.collide if colliding else self.visual
        return fn(body, name=name, type=mujoco.mjtGeom.mjGEOM_CAPSULE,
                  fromto=[*a, *b], size=[r, 0, 0], mass=mass, rgba=list(rgba))

    def segment(self, body, seg: str, a, b, r_simple: float, r_bone: float, mass: float):
        """Simple: one colliding capsule carrying the mass. Muscular: a thin visual bone capsule
        carrying the non-muscle share (the muscles are added later, carrying the rest)."""
        if self.muscular:
            frac = SOFT_TISSUE_FRACTION.get(seg, 0.0)
            return self.capsule(body, a, b, r_bone, mass * (1.0 - frac), False, RGBA_BONE,
                                name=f"bone_{body.name}")
        return self.capsule(body, a, b, r_simple, mass, True, name=f"geom_{body.name}")

    # -- joints and actuators -------------------------------------------------------------------
    def hinge(self, body, name: str, axis, rng, gain: str):
        kp, kv, damping, armature = GAINS[gain]
        body.add_joint(name=name, type=mujoco.mjtJoint.mjJNT_HINGE, axis=list(axis),
                       range=list(rng), limited=mujoco.mjtLimited.mjLIMITED_TRUE,
                       damping=damping, armature=armature)
        self.servos[name] = (kp, kv, rng)

    def add_servos(self) -> None:
        """One position servo per hinge, in the compiled joint (qpos) order: actuator i drives
        qpos[7 + i]."""
        m = self.spec.compile()
        for j in range(1, m.njnt):
            name = m.joint(j).name
            kp, kv, rng = self.servos[name]
            act = self.spec.add_actuator(name=name, target=name, trntype=mujoco.mjtTrn.mjTRN_JOINT)
            act.set_to_position(kp=kp, kv=kv)
            act.ctrlrange = list(rng)
            act.ctrllimited = mujoco.mjtLimited.mjLIMITED_TRUE

    def joints(self, body, table: dict, names, side: str = "", prefix: str = ""):
        for n in names:
            axis, rng, gain = table[n]
            full = f"{prefix}{n}" + (f"_{side}" if side else "")
            self.hinge(body, full, _mirror_axis(axis, side), rng, gain)


def build_humanoid(muscular: bool) -> mujoco.MjSpec:
    """Build the humanoid spec (without the keyframe; see ``add_stance_keyframe``)."""
    spec = mujoco.MjSpec()
    spec.modelname = "muscular_fast" if muscular else "simple"
    spec.compiler.degree = False
    spec.compiler.autolimits = True
    opt = spec.option
    opt.timestep = 0.004
    opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
    opt.cone = mujoco.mjtCone.mjCONE_PYRAMIDAL
    opt.iterations = 10
    opt.ls_iterations = 20

    b = _Builder(spec, muscular)
    world = spec.worldbody
    world.add_geom(name=FLOOR_GEOM, type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 0.05],
                   contype=0, conaffinity=1, condim=3, rgba=[0.5, 0.55, 0.6, 1.0])
    world.add_light(name="sun", pos=[0, 0, 4], dir=[0, 0, -1], type=mujoco.mjtLightType.mjLIGHT_DIRECTIONAL)

    hip_h = THIGH_LEN + SHIN_LEN + ANKLE_HEIGHT
    pelvis = world.add_body(name="pelvis", pos=[0, 0, hip_h - HIP_OFFSET[2]])
    pelvis.add_freejoint(name="root")
    b.segment(pelvis, "pelvis", (0, -0.07, -0.03), (0, 0.07, -0.03), 0.09, 0.03, SEGMENT_MASS["pelvis"])

    lumbar = pelvis.add_body(name="lumbar", pos=[0, 0, LUMBAR_OFFSET])
    b.joints(lumbar, TRUNK_JOINTS, ("abdomen_x", "abdomen_y", "abdomen_z"))
    b.segment(lumbar, "lumbar", (0, -0.06, 0.07), (0, 0.06, 0.07), 0.095, 0.04, SEGMENT_MASS["lumbar"])

    torso = lumbar.add_body(name="torso", pos=[0, 0, TORSO_OFFSET])
    b.joints(torso, TRUNK_JOINTS, ("chest_x", "chest_y", "chest_z"))
    torso_mass = SEGMENT_MASS["torso"] - (2 * SEGMENT_MASS["clavicle"] if muscular else 0.0)
    if muscular:
        b.segment(torso, "torso", (0, 0, 0.02), (0, 0, 0.26), 0.0, 0.05, torso_mass)
    else:
        b.capsule(torso, (0, -0.07, 0.11), (0, 0.07, 0.11), 0.11, 0.75 * torso_mass, True,
                  name="geom_torso")
        b.capsule(torso, (0, -0.11, 0.24), (0, 0.11, 0.24), 0.07, 0.25 * torso_mass, True,
                  name="geom_shoulders")

    neck = torso.add_body(name="neck", pos=[0, 0, NECK_OFFSET])
    b.joints(neck, TRUNK_JOINTS, ("neck_x", "neck_y", "neck_z"))
    b.segment(neck, "neck", (0, 0, 0.0), (0, 0, 0.07), 0.05, 0.02, SEGMENT_MASS["neck"])

    head = neck.add_body(name="head", pos=[0, 0, HEAD_OFFSET])
    if muscular:
        b.joints(head, TRUNK_JOINTS, ("head_y", "head_z"))
    b.collide(head, name="geom_head", type=mujoco.mjtGeom.mjGEOM_SPHERE, pos=[0.015, 0, 0.09],
              size=[0.095, 0, 0], mass=SEGMENT_MASS["head"], rgba=list(RGBA_SKIN))

    for side in ("l", "r"):
        _arm(b, torso, side)
        _leg(b, pelvis, side)

    if muscular:
        _add_muscles(spec)
    b.add_servos()
    return spec


def _arm(b: _Builder, torso, side: str) -> None:
    s = side
    hand_mass = SEGMENT_MASS["hand"] - (4 * FINGER_MASS + THUMB_MASS if b.muscular else 0.0)
    if b.muscular:
        clav = torso.add_body(name=f"clavicle_{s}", pos=list(_mirror_pos((0, CLAVICLE_ROOT_Y, SHOULDER_Z), s)))
        b.joints(clav, ARM_JOINTS, ("clavicle_y", "clavicle_z"), s)
        length = SHOULDER_Y - CLAVICLE_ROOT_Y
        b.capsule(clav, (0, 0, 0), _mirror_pos((0, length, 0), s), 0.012, SEGMENT_MASS["clavicle"],
                  False, RGBA_BONE, name=f"bone_clavicle_{s}")
        parent, pos = clav, _mirror_pos((0, length, 0), s)
    else:
        parent, pos = torso, _mirror_pos((0, SHOULDER_Y, SHOULDER_Z), s)

    upper = parent.add_body(name=f"upper_arm_{s}", pos=list(pos))
    b.joints(upper, ARM_JOINTS, ("shoulder_x", "shoulder_y", "shoulder_z"), s)
    b.segment(upper, "upper_arm", (0, 0, -0.02), (0, 0, -UPPER_ARM_LEN + 0.02), 0.045, 0.016,
              SEGMENT_MASS["upper_arm"])

    fore = upper.add_body(name=f"forearm_{s}", pos=[0, 0, -UPPER_ARM_LEN])
    b.joints(fore, ARM_JOINTS, ("elbow", "pronation"), s)
    b.segment(fore, "forearm", (0, 0, -0.02), (0, 0, -FOREARM_LEN + 0.02), 0.038, 0.014,
              SEGMENT_MASS["forearm"])

    hand = fore.add_body(name=f"hand_{s}", pos=[0, 0, -FOREARM_LEN])
    b.joints(hand, ARM_JOINTS, ("wrist_x", "wrist_y"), s)
    if b.muscular:
        frac = SOFT_TISSUE_FRACTION["hand"]
        b.collide(hand, name=f"geom_hand_{s}", type=mujoco.mjtGeom.mjGEOM_BOX, pos=[0, 0, -0.05],
                  size=[0.043, 0.014, 0.045], mass=hand_mass * (1 - frac), rgba=list(RGBA_SKIN))
        _fingers(b, hand, s)
    else:
        b.capsule(hand, (0, 0, -0.01), (0, 0, -0.08), 0.04, hand_mass, True, name=f"geom_hand_{s}")


def _fingers(b: _Builder, hand, s: str) -> None:
    # thumb: carpometacarpal (2 DOF), metacarpophalangeal, interphalangeal
    seg_mass = THUMB_MASS / 3
    meta = hand.add_body(name=f"thumb_meta_{s}", pos=list(_mirror_pos((0.035, -0.012, -0.025), s)))
    b.joints(meta, THUMB_JOINTS, ("thumb_cmc_x", "thumb_cmc_y"), s)
    tip = (0.02, 0.0, -0.035)
    b.capsule(meta, (0, 0, 0), tip, 0.011, seg_mass, False, name=f"bone_thumb_meta_{s}")
    prox = meta.add_body(name=f"thumb_prox_{s}", pos=list(tip))
    b.joints(prox, THUMB_JOINTS, ("thumb_mcp",), s)
    b.capsule(prox, (0, 0, 0), (0.01, 0, -0.03), 0.01, seg_mass, False, name=f"bone_thumb_prox_{s}")
    dist = prox.add_body(name=f"thumb_dist_{s}", pos=[0.01, 0, -0.03])
    b.joints(dist, THUMB_JOINTS, ("thumb_ip",), s)
    b.capsule(dist, (0, 0, 0), (0.005, 0, -0.025), 0.009, seg_mass, False, name=f"bone_thumb_dist_{s}")

    for finger, (x, lengths) in FINGERS.items():
        seg_mass = FINGER_MASS / 3
        parent = hand.add_body(name=f"{finger}_prox_{s}", pos=[x, 0, -0.095])
        b.joints(parent, FINGER_JOINTS, ("mcp_flex", "mcp_abd"), s, prefix=f"{finger}_")
        for k, (seg, jn) in enumerate(zip(("prox", "mid", "dist"), (None, "pip", "dip"))):
            if k > 0:
                parent = parent.add_body(name=f"{finger}_{seg}_{s}", pos=[0, 0, -lengths[k - 1]])
                b.joints(parent, FINGER_JOINTS, (jn,), s, prefix=f"{finger}_")
            b.capsule(parent, (0, 0, 0), (0, 0, -lengths[k]), 0.0085, seg_mass, False,
                      name=f"bone_{finger}_{seg}_{s}")


def _leg(b: _Builder, pelvis, side: str) -> None:
    s = side
    thigh = pelvis.add_body(name=f"thigh_{s}", pos=list(_mirror_pos(HIP_OFFSET, s)))
    b.joints(thigh, LEG_JOINTS, ("hip_x", "hip_y", "hip_z"), s)
    b.segment(thigh, "thigh", (0, 0, -0.02), (0, 0, -THIGH_LEN + 0.03), 0.07, 0.02, SEGMENT_MASS["thigh"])

    shin = thigh.add_body(name=f"shin_{s}", pos=[0, 0, -THIGH_LEN])
    b.joints(shin, LEG_JOINTS, ("knee",), s)
    b.segment(shin, "shin", (0, 0, -0.02), (0, 0, -SHIN_LEN + 0.04), 0.05, 0.017, SEGMENT_MASS["shin"])

    foot = shin.add_body(name=f"foot_{s}", pos=[0, 0, -SHIN_LEN])
    b.joints(foot, LEG_JOINTS, ("ankle_y", "ankle_x"), s)
    b.collide(foot, name=f"geom_foot_{s}", type=mujoco.mjtGeom.mjGEOM_BOX, pos=list(FOOT_CENTER),
              size=list(FOOT_HALF), mass=SEGMENT_MASS["foot"], rgba=list(RGBA_FOOT))

    toe = foot.add_body(name=f"toe_{s}", pos=list(TOE_OFFSET))
    b.joints(toe, LEG_JOINTS, ("toe",), s)
    b.collide(toe, name=f"geom_toe_{s}", type=mujoco.mjtGeom.mjGEOM_BOX, pos=list(TOE_CENTER),
              size=list(TOE_HALF), mass=SEGMENT_MASS["toe"], rgba=list(RGBA_FOOT))


def _add_muscles(spec: mujoco.MjSpec) -> None:
    """Add the ellipsoid muscles; each muscled segment's soft-tissue mass is split by volume."""
    rows = _muscles.expanded()
    volume: dict[str, float] = {}
    for _, body, _, half, _ in rows:
        volume[body] = volume.get(body, 0.0) + float(np.prod(half))
    for name, body_name, pos, half, euler in rows:
        body = spec.body(body_name)
        seg = body_name[:-2] if body_name.endswith(("_l", "_r")) else body_name
        soft = SEGMENT_MASS[seg] * SOFT_TISSUE_FRACTION[seg]
        if seg == "hand":     # the fingers' mass was taken from the hand
            soft = (SEGMENT_MASS["hand"] - 4 * FINGER_MASS - THUMB_MASS) * SOFT_TISSUE_FRACTION["hand"]
        if seg == "torso":    # the clavicles' mass was taken from the torso
            soft = (SEGMENT_MASS["torso"] - 2 * SEGMENT_MASS["clavicle"]) * SOFT_TISSUE_FRACTION["torso"]
        body.add_geom(name=name, type=mujoco.mjtGeom.mjGEOM_ELLIPSOID, pos=list(pos),
                      quat=list(_euler_quat(euler)), size=list(half),
                      mass=soft * float(np.prod(half)) / volume[body_name],
                      contype=1, conaffinity=0, condim=3, group=1, rgba=list(RGBA_MUSCLE))


# -- Stance keyframe ---------------------------------------------------------------------------
def _qadr(m: mujoco.MjModel, joint: str) -> int:
    return int(m.jnt_qposadr[m.joint(joint).id])


def _set_upper(m: mujoco.MjModel, qpos: np.ndarray) -> None:
    for jn, val in STANCE_UPPER.items():
        if mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, jn) >= 0:
            qpos[_qadr(m, jn)] = val
    for s in ("l", "r"):
        for jn, val in STANCE_FIST.items():
            names = [f"{jn}_{s}"] if jn.startswith("thumb") else [f"{f}_{jn}_{s}" for f in FINGERS]
            for full in names:
                if mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, full) >= 0:
                    qpos[_qadr(m, full)] = val


def _foot_pose_error(m, d, side: str, target_pos, target_quat) -> np.ndarray:
    mujoco.mj_kinematics(m, d)
    fid = m.body(f"foot_{side}").id
    pid = m.body("pelvis").id
    rel = d.xpos[fid] - d.xpos[pid]          # pelvis stays identity-oriented during the solve
    err = np.zeros(6)
    err[:3] = rel - target_pos
    mujoco.mju_subQuat(err[3:], d.xquat[fid], target_quat)
    return err


def _solve_leg(m, d, side: str, target_pos, yaw: float, iters: int = 50) -> None:
    """Gauss-Newton on the six leg joints: foot frame at target_pos (pelvis frame), flat, yawed."""
    names = [f"{j}_{side}" for j in ("hip_x", "hip_y", "hip_z", "knee", "ankle_y", "ankle_x")]
    adr = [_qadr(m, n) for n in names]
    tq = np.array([np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)])
    eps = 1e-6
    for _ in range(iters):
        e0 = _foot_pose_error(m, d, side, target_pos, tq)
        if np.linalg.norm(e0) < 1e-10:
            break
        J = np.zeros((6, 6))
        for k, a in enumerate(adr):
            d.qpos[a] += eps
            J[:, k] = (_foot_pose_error(m, d, side, target_pos, tq) - e0) / eps
            d.qpos[a] -= eps
        dq = np.linalg.solve(J.T @ J + 1e-9 * np.eye(6), -J.T @ e0)
        d.qpos[adr] += dq
    e = _foot_pose_error(m, d, side, target_pos, tq)
    if np.linalg.norm(e) > 1e-6:
        raise RuntimeError(f"stance IK for leg {side!r} did not converge (error {np.linalg.norm(e):.2e})")


def lowest_support_z(m: mujoco.MjModel, d: mujoco.MjData) -> float:
    """Lowest world z [m] of the foot/toe box geoms (after mj_kinematics)."""
    zmin = np.inf
    for g in _support_geoms(m):
        R = d.geom_xmat[g].reshape(3, 3)
        zmin = min(zmin, d.geom_xpos[g][2] - float(np.abs(R[2, :]) @ m.geom_size[g]))
    return zmin


def _support_geoms(m: mujoco.MjModel) -> list[int]:
    adr = [(m.body_geomadr[m.body(b).id], m.body_geomnum[m.body(b).id]) for b in SUPPORT_BODIES]
    return [g for a, n in adr for g in range(a, a + n)]


def _sole_centre(m: mujoco.MjModel, d: mujoco.MjData) -> np.ndarray:
    """Area-weighted centre (x, y) of the foot and toe soles."""
    gs = _support_geoms(m)
    area = np.array([m.geom_size[g][0] * m.geom_size[g][1] for g in gs])
    return (area[:, None] * d.geom_xpos[gs][:, :2]).sum(0) / area.sum()


def stance_qpos(m: mujoco.MjModel) -> np.ndarray:
    """The fighting stance: upper body from STANCE_UPPER, legs by IK, soles exactly on z=0."""
    d = mujoco.MjData(m)
    qpos = m.qpos0.copy()
    _set_upper(m, qpos)
    d.qpos[:] = qpos
    # leg length hip->ankle for the chosen knee angle (law of cosines), and the hip height it gives
    reach = np.sqrt(THIGH_LEN**2 + SHIN_LEN**2 + 2 * THIGH_LEN * SHIN_LEN * np.cos(STANCE_KNEE))
    shift = np.zeros(2)   # feet offset that puts the centre of mass over the middle of the soles
    for _ in range(20):
        targets = {}
        for s, (fx, fy, yaw) in STANCE_FEET.items():
            hx, hy, hz = _mirror_pos(HIP_OFFSET, s)
            tx, ty = fx + shift[0], fy + shift[1]
            targets[s] = [tx, ty, hz - np.sqrt(reach**2 - (tx - hx) ** 2 - (ty - hy) ** 2), yaw]
        tz = np.mean([t[2] for t in targets.values()])   # both soles at one height
        for s, (tx, ty, _, yaw) in targets.items():
            d.qpos[_qadr(m, f"knee_{s}")] = STANCE_KNEE
            d.qpos[_qadr(m, f"hip_y_{s}")] = STANCE_KNEE / 2
            d.qpos[_qadr(m, f"ankle_y_{s}")] = STANCE_KNEE / 2
            _solve_leg(m, d, s, np.array([tx, ty, tz]), yaw)
        mujoco.mj_kinematics(m, d)
        mujoco.mj_comPos(m, d)
        com = d.subtree_com[m.body("pelvis").id][:2]
        centre = _sole_centre(m, d)
        if np.linalg.norm(com - centre) < 1e-4:
            break
        shift += com - centre
    mujoco.mj_kinematics(m, d)
    d.qpos[2] -= lowest_support_z(m, d)
    mujoco.mj_kinematics(m, d)
    qpos = d.qpos.copy()
    for j in range(m.njnt):           # the stance must respect every joint limit
        if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE:
            lo, hi = m.jnt_range[j]
            v = qpos[m.jnt_qposadr[j]]
            if not lo <= v <= hi:
                raise RuntimeError(f"stance angle {v:.3f} of joint {m.joint(j).name!r} outside [{lo}, {hi}]")
    return qpos


def stance_ctrl(m: mujoco.MjModel, qpos: np.ndarray) -> np.ndarray:
    """Position-servo targets equal to the stance joint angles (so zero action holds the stance)."""
    return np.array([qpos[m.jnt_qposadr[m.actuator_trnid[i, 0]]] for i in range(m.nu)])


def add_stance_keyframe(spec: mujoco.MjSpec) -> mujoco.MjSpec:
    """Compile once, solve the stance, and add the keyframe ``KEYFRAME`` ("stance") to the spec."""
    m = spec.compile()
    qpos = stance_qpos(m)
    spec.add_key(name=KEYFRAME, qpos=list(qpos), qvel=[0.0] * m.nv, ctrl=list(stance_ctrl(m, qpos)))
    return spec
