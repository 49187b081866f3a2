"""Hardware profiles: the physical peaks that results are judged against."""

from perfsuite.hardware.profile import HardwareProfile, ProfileRegistry

__all__ = ["HardwareProfile", "ProfileRegistry"]
