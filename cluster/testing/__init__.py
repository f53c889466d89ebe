"""Harnesses for tests and benchmarks (a throwaway ZooKeeper, an HA cluster to break); not in
the wheel."""
