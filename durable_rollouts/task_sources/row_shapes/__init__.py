"""Dataset row shapes other projects publish (SWE-rebench, SWE-Gym, SWE-smith, flat SWE-bench), behind ``registry``."""
