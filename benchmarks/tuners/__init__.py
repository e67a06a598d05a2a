"""Autotuners compiling through asynccomp: MetaSchedule (TVM) and TileLang."""
