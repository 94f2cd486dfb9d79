"""The 63 ellipsoid muscles of the ``muscular-fast`` body, as data.

Each row is one superficial muscle (or muscle group) drawn as an ellipsoid geom on the segment it
covers. The muscles are what the body lies on after a fall, so the table favours the muscles that
touch the floor when lying on the back, front or side (glutes, back, chest, shoulders, limbs)
rather than deep muscles. They collide with the floor only and carry the segment's soft-tissue
mass (see ``skeleton.SOFT_TISSUE_FRACTION``), split between a segment's muscles by volume.

Sources / rationale
-------------------
* Names, attachments and rough bellies: Gray's Anatomy (40th ed.) surface anatomy chapters; the
  set follows the superficial layer shown in standard anatomical atlases (e.g. Netter, plates of
  the back, thorax, upper and lower limb).
* Belly sizes: half-lengths are ~half the muscle belly length scaled to a 1.78 m adult; half-widths
  come from typical limb / trunk girths (thigh ~55 cm, calf ~37 cm, upper arm ~30 cm) so that
  the ellipsoids of one segment roughly fill its circumference around the thin bone capsule.
* Positions are in the segment's body frame, for the LEFT side (``side=True`` rows); the right side
  is mirrored (y -> -y, and the x- and z-rotations flip sign). Body frames: z up, x forward,
  y to the body's left, origin at the proximal joint (see ``skeleton.py``).
* Counting: 30 paired muscles (60 geoms) + 3 midline muscles = 63, the count of the original study.

Columns: name, segment (body name without side suffix), pos [m], half-sizes [m] (ellipsoid
semi-axes along the geom's local x, y, z), euler [deg] (intrinsic xyz rotation of the geom frame
relative to the body frame), side (True: one per side, named ``muscle_<name>_l/_r``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Muscle:
    name: str
    segment: str
    pos: tuple[float, float, float]
    half_sizes: tuple[float, float, float]
    euler_deg: tuple[float, float, float] = (0.0, 0.0, 0.0)
    side: bool = True


MUSCLES: tuple[Muscle, ...] = (
    # --- pelvis: hip extensors / abductors (what one sits and lies on) -------------------------
    Muscle("gluteus_maximus", "pelvis", (-0.085, 0.075, -0.075), (0.05, 0.07, 0.085), (0, 15, 0)),
    Muscle("gluteus_medius", "pelvis", (-0.035, 0.125, -0.005), (0.045, 0.035, 0.055)),
    # --- lumbar segment (abdomen): abdominal wall and lumbar erectors -------------------------
    Muscle("rectus_abdominis_lower", "lumbar", (0.095, 0.0, 0.06), (0.025, 0.07, 0.085), side=False),
    Muscle("external_oblique", "lumbar", (0.045, 0.115, 0.06), (0.055, 0.03, 0.085), (0, 0, 30)),
    Muscle("erector_spinae_lumbar", "lumbar", (-0.085, 0.04, 0.06), (0.03, 0.035, 0.09)),
    # --- torso (thorax): chest, back, shoulder girdle -----------------------------------------
    Muscle("rectus_abdominis_upper", "torso", (0.10, 0.0, 0.05), (0.025, 0.065, 0.07), side=False),
    Muscle("trapezius_middle", "torso", (-0.105, 0.0, 0.20), (0.025, 0.09, 0.07), side=False),
    Muscle("pectoralis_major", "torso", (0.095, 0.085, 0.18), (0.03, 0.08, 0.06), (-10, 0, 0)),
    Muscle("latissimus_dorsi", "torso", (-0.06, 0.115, 0.09), (0.045, 0.045, 0.11), (0, 0, -20)),
    Muscle("trapezius_upper", "torso", (-0.03, 0.085, 0.29), (0.04, 0.07, 0.035), (20, 0, 0)),
    Muscle("serratus_anterior", "torso", (0.035, 0.14, 0.12), (0.045, 0.025, 0.07)),
    Muscle("erector_spinae_thoracic", "torso", (-0.10, 0.035, 0.10), (0.025, 0.03, 0.10)),
    # --- neck ----------------------------------------------------------------------------------
    Muscle("sternocleidomastoid", "neck", (0.03, 0.03, 0.045), (0.018, 0.018, 0.06), (-15, 0, 0)),
    Muscle("splenius", "neck", (-0.03, 0.025, 0.05), (0.02, 0.02, 0.06)),
    # --- upper arm: deltoid heads, elbow flexors / extensors ----------------------------------
    Muscle("deltoid_anterior", "upper_arm", (0.03, 0.0, -0.045), (0.022, 0.03, 0.07)),
    Muscle("deltoid_lateral", "upper_arm", (0.0, 0.035, -0.05), (0.03, 0.022, 0.07)),
    Muscle("deltoid_posterior", "upper_arm", (-0.03, 0.0, -0.045), (0.022, 0.03, 0.07)),
    Muscle("biceps_brachii", "upper_arm", (0.025, 0.0, -0.165), (0.025, 0.025, 0.08)),
    Muscle("triceps_brachii", "upper_arm", (-0.028, 0.0, -0.15), (0.028, 0.03, 0.095)),
    # --- forearm -------------------------------------------------------------------------------
    Muscle("brachioradialis", "forearm", (0.015, 0.018, -0.06), (0.02, 0.02, 0.065)),
    Muscle("forearm_flexors", "forearm", (0.0, -0.018, -0.095), (0.022, 0.02, 0.085)),
    Muscle("forearm_extensors", "forearm", (-0.015, 0.015, -0.095), (0.02, 0.02, 0.085)),
    # --- hand: thenar eminence (the palm's floor contact) --------------------------------------
    Muscle("thenar", "hand", (0.025, -0.012, -0.04), (0.014, 0.012, 0.025)),
    # --- thigh: quadriceps, hamstrings, adductors ----------------------------------------------
    Muscle("rectus_femoris", "thigh", (0.045, 0.0, -0.20), (0.03, 0.03, 0.15)),
    Muscle("vastus_lateralis", "thigh", (0.01, 0.05, -0.22), (0.03, 0.03, 0.14)),
    Muscle("vastus_medialis", "thigh", (0.03, -0.035, -0.30), (0.03, 0.028, 0.09)),
    Muscle("biceps_femoris", "thigh", (-0.045, 0.022, -0.22), (0.03, 0.028, 0.14)),
    Muscle("semitendinosus", "thigh", (-0.045, -0.022, -0.22), (0.03, 0.028, 0.14)),
    Muscle("adductors", "thigh", (0.0, -0.045, -0.12), (0.035, 0.028, 0.10)),
    # --- shank: calf and shin ------------------------------------------------------------------
    Muscle("gastrocnemius_medial", "shin", (-0.04, -0.02, -0.12), (0.025, 0.025, 0.08)),
    Muscle("gastrocnemius_lateral", "shin", (-0.04, 0.02, -0.12), (0.025, 0.022, 0.08)),
    Muscle("soleus", "shin", (-0.03, 0.0, -0.24), (0.022, 0.03, 0.08)),
    Muscle("tibialis_anterior", "shin", (0.025, 0.012, -0.17), (0.018, 0.018, 0.10)),
)


def expanded() -> list[tuple[str, str, tuple[float, float, float], tuple[float, float, float], tuple[float, float, float]]]:
    """All muscle geoms, sides expanded: (geom name, body name, pos, half_sizes, euler_deg).

    Right-side rows are the left rows mirrored in the sagittal (xz) plane: y -> -y and the
    rotations about x and z change sign.
    """
    rows = []
    for mu in MUSCLES:
        if not mu.side:
            rows.append((f"muscle_{mu.name}", mu.segment, mu.pos, mu.half_sizes, mu.euler_deg))
            continue
        for sfx, sgn in (("l", 1.0), ("r", -1.0)):
            x, y, z = mu.pos
            ex, ey, ez = mu.euler_deg
            rows.append((f"muscle_{mu.name}_{sfx}", f"{mu.segment}_{sfx}" if mu.segment not in _MIDLINE_SEGMENTS
                         else mu.segment, (x, sgn * y, z), mu.half_sizes, (sgn * ex, ey, sgn * ez)))
    return rows


# Segments on the body's midline (no side suffix); paired muscles on them keep the body name.
_MIDLINE_SEGMENTS = frozenset({"pelvis", "lumbar", "torso", "neck", "head"})

N_MUSCLES = 63
assert len(expanded()) == N_MUSCLES, len(expanded())
