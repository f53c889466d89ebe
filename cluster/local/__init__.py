"""Running a cluster on one machine: the launcher, the demo, the state view, credentials
for it, and the operator commands."""
