"""The compile server under load and faults."""
