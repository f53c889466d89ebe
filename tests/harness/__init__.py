"""The tests' shared harness: what more than one test module uses to build a cluster, a
secured one, a slave rig or a Mesos client, to wait for a condition and to draw hostile
input. Test modules import from here, never from each other (`tests/` is on the path:
`from harness.master import Cluster`)."""
