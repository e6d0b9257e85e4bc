"""A 6-joint test arm written inside the tests: non-zero offsets on all axes, one prismatic and
one fixed joint (with a massive tool link merged into its parent), arbitrary inertias."""

ARM6_URDF = """<?xml version="1.0"?>
<robot name="arm6">
  <link name="base"><inertial><mass value="2"/><inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial></link>
  {links}
</robot>
"""

_LINK = """
  <joint name="j{i}" type="{type}">
    <parent link="{parent}"/><child link="l{i}"/>
    <origin xyz="{xyz}" rpy="{rpy}"/>
    <axis xyz="{axis}"/>
    <limit lower="{lo}" upper="{hi}" effort="100" velocity="10"/>
  </joint>
  <link name="l{i}">
    <inertial>
      <origin xyz="{com}" rpy="{irpy}"/>
      <mass value="{m}"/>
      <inertia ixx="{ixx}" ixy="{ixy}" ixz="{ixz}" iyy="{iyy}" iyz="{iyz}" izz="{izz}"/>
    </inertial>
  </link>"""

_SPECS = [
    # type, xyz, rpy, axis, com, inertial rpy, mass, (ixx ixy ixz iyy iyz izz)
    (
        "revolute",
        "0.01 0.02 0.3",
        "0.1 -0.05 0.2",
        "0 0 1",
        "0.02 -0.01 0.05",
        "0.1 0.2 0.3",
        3.0,
        (0.05, 0.001, -0.002, 0.04, 0.003, 0.03),
    ),
    (
        "revolute",
        "0.03 0.05 0.07",
        "1.2 0.1 -0.3",
        "0 1 0",
        "0.15 0.02 -0.03",
        "0 0 0",
        2.5,
        (0.02, -0.001, 0.004, 0.06, 0.002, 0.05),
    ),
    (
        "prismatic",
        "0.3 -0.02 0.04",
        "-0.2 0.3 0.1",
        "0.6 0 0.8",
        "-0.03 0.04 0.1",
        "0.2 -0.1 0",
        1.5,
        (0.01, 0.0005, 0.0, 0.012, -0.001, 0.008),
    ),
    (
        "revolute",
        "0.05 0.1 -0.02",
        "0.4 -1.1 0.2",
        "1 0 0",
        "0.01 0.08 0.02",
        "0 0.3 0",
        1.2,
        (0.008, 0.0002, 0.0003, 0.006, -0.0004, 0.007),
    ),
    (
        "revolute",
        "-0.04 0.03 0.12",
        "0.7 0.2 1.3",
        "0 0 1",
        "0.03 -0.02 0.06",
        "0 0 0.5",
        0.8,
        (0.004, -0.0001, 0.0002, 0.005, 0.0003, 0.003),
    ),
    (
        "revolute",
        "0.02 -0.06 0.05",
        "-0.5 0.4 0.6",
        "0 0.6 0.8",
        "0.01 0.01 0.03",
        "0.3 0 0",
        0.5,
        (0.002, 0.0001, -0.0001, 0.0025, 0.0002, 0.0015),
    ),
]


def arm6_urdf() -> str:
    parts = []
    parent = "base"
    for i, (jt, xyz, rpy, axis, com, irpy, m, I) in enumerate(_SPECS, start=1):
        lo, hi = (-0.2, 0.3) if jt == "prismatic" else (-3.0, 3.0)
        ixx, ixy, ixz, iyy, iyz, izz = I
        parts.append(
            _LINK.format(
                i=i,
                type=jt,
                parent=parent,
                xyz=xyz,
                rpy=rpy,
                axis=axis,
                lo=lo,
                hi=hi,
                com=com,
                irpy=irpy,
                m=m,
                ixx=ixx,
                ixy=ixy,
                ixz=ixz,
                iyy=iyy,
                iyz=iyz,
                izz=izz,
            )
        )
        parent = f"l{i}"
        if i == 4:  # a fixed joint with a massive link between joints 4 and 5
            parts.append("""
  <joint name="fixed_mid" type="fixed">
    <parent link="l4"/><child link="l4b"/>
    <origin xyz="0.02 0.04 0.09" rpy="0.3 0.2 -0.4"/>
  </joint>
  <link name="l4b">
    <inertial>
      <origin xyz="0.01 -0.02 0.03" rpy="0.1 0 0.2"/>
      <mass value="0.7"/>
      <inertia ixx="0.003" ixy="0.0001" ixz="0.0002" iyy="0.004" iyz="-0.0001" izz="0.002"/>
    </inertial>
  </link>""")
            parent = "l4b"
    # a fixed tool at the tip
    parts.append("""
  <joint name="tool_fixed" type="fixed">
    <parent link="l6"/><child link="tool"/>
    <origin xyz="0 0.01 0.08" rpy="0 0 0.5"/>
  </joint>
  <link name="tool">
    <inertial>
      <origin xyz="0.0 0.0 0.02" rpy="0 0 0"/>
      <mass value="0.3"/>
      <inertia ixx="0.0004" ixy="0" ixz="0" iyy="0.0004" iyz="0" izz="0.0002"/>
    </inertial>
  </link>""")
    return ARM6_URDF.format(links="".join(parts))
