"""The compile cache: hit latency per tier, and sweeps with repeated sources."""
