"""The user's own accelerator profile: a training run's step time and input share, as the
TensorFlow Profiler (xprof) measured them. `tfpipe bench --from-profile` takes its consumer from
here.

Example:
  >>> from tfpipe.bench import profiles
  >>> p = profiles.read("gs://bucket/logs")   # the newest run, every host
  >>> p.device, p.step_time_ms, p.input_wait  # e.g. ('TPU v2', 313.8, 0.0001)
"""

from tfpipe.bench.profiles.analysis import DroppedStep, HostAnalysis, Profile, ProfileError, Step
from tfpipe.bench.profiles.read import read

__all__ = ["DroppedStep", "HostAnalysis", "Profile", "ProfileError", "Step", "read"]
